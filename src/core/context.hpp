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

// Why the dispatcher chose a backend, kept as its parts: the sentence is built only when it is
// asked for (epigemm_context_last_backend), not on every call. Building it with string streams on
// every call took a third of a small call's host work: a forward of a 4 x 8 x 8 layer on the cpu
// backend under AUTO ran 19,500 instructions per call with it and 13,300 without (callgrind, the
// difference of 11,000 and 1,000 calls, 2026-12-01).
struct Selection {
  epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
  bool requested = false;  // the call named its backend; AUTO did not choose
  int priority = 0;        // under AUTO: the chosen backend's priority for the call
  std::string declined;    // under AUTO: "; <name> declined (<reason>)" for each backend ranked
                           // above the chosen one that declined (empty when none did)
  // "requested: cpu", or "auto: cpu has the highest priority (10) among the backends that
  // support the call; cuda declined (...)".
  std::string text() const;
};

class Context {
 public:
  Context();

  // The backend object for an id, or nullptr when it is not compiled into this build.
  Backend* find(epigemm_backend_t id) const;
  bool usable(epigemm_backend_t id) const;

  // Picks the backend for a validated call: the requested one (which must be usable and
  // support the call), or under AUTO the usable, supporting backend of highest priority.
  // `why` records the choice, for epigemm_context_last_backend.
  Status select(const GemmCall& call, Backend** chosen, Selection* why) const;

  // Workspace bytes of the backend select() picks.
  Status workspace_bytes(const GemmCall& call, size_t* bytes) const;

  // validate -> select -> workspace check -> run; records the decision on success.
  Status execute(const GemmCall& call);

  std::string last_error;
  Selection last_selection;  // the last successful call's choice (its backend: AUTO before any)
  std::string last_reason;   // last_selection.text(), built when epigemm_context_last_backend asks
  // Used by the classic and layer-level calls, which take no description.
  epigemm_backend_t default_backend = EPIGEMM_BACKEND_AUTO;
  bool default_allow_tf32 = false;
  // The text epigemm_backend_description last returned (it points into this string).
  std::string last_description;

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
  Selection scratch_selection_;  // execute()'s choice until the call has succeeded
};

}  // namespace epigemm
