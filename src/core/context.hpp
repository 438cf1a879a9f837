// The context: the backends (created once, owning their handles), the dispatcher, and the
// last error / last dispatch decision reported through the C API. One thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/gemm_call.hpp"
#include "core/status.hpp"

namespace epigemm {

class Context {
 public:
  Context();

  // The backend object for an id, or nullptr when it is not compiled into this build.
  Backend* find(epigemm_backend_t id) const;
  bool usable(epigemm_backend_t id) const;

  // Picks the backend for a validated call: the requested one (which must be usable and
  // support the call), or under AUTO the usable, supporting backend of highest priority.
  // `reason` says why, for epigemm_context_last_backend.
  Status select(const GemmCall& call, Backend** chosen, std::string* reason) const;

  // Workspace bytes of the backend select() picks.
  Status workspace_bytes(const GemmCall& call, size_t* bytes) const;

  // validate -> select -> workspace check -> run; records the decision on success.
  Status execute(const GemmCall& call);

  std::string last_error;
  epigemm_backend_t last_backend = EPIGEMM_BACKEND_AUTO;
  std::string last_reason;
  // Used by the classic and layer-level calls, which take no description.
  epigemm_backend_t default_backend = EPIGEMM_BACKEND_AUTO;
  bool default_allow_tf32 = false;
  // The text epigemm_backend_description last returned (it points into this string).
  std::string last_description;

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

}  // namespace epigemm
