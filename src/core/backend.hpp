// The interface every backend implements. A backend lives in src/backends/<name>/, is created
// once per context (so it may own handles, streams, events), and is registered by one line in
// src/core/backend_registry.cpp. The dispatcher (Context::select in context.cpp) asks supports()
// before it routes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/gemm_call.hpp"
#include "core/status.hpp"

namespace epigemm {

struct Support {
  bool supported = false;
  std::string reason;  // why not, when not supported ("cuda: operands are in host memory")

  static Support yes() { return Support{true, {}}; }
  static Support no(std::string why) { return Support{false, std::move(why)}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual epigemm_backend_t id() const = 0;
  // Compiled in and runnable here (a GPU backend needs a GPU). Checked once at creation.
  virtual bool usable() const = 0;
  // Whether this backend can run a call that validate() already accepted.
  virtual Support supports(const GemmCall& call) const = 0;
  // Bytes of workspace run() needs for this call (0 when none).
  virtual size_t workspace_bytes(const GemmCall& call) const = 0;
  // Runs a validated, supported call whose workspace is large enough.
  virtual Status run(const GemmCall& call) = 0;
  // Dispatch preference among backends that support a call: larger wins under AUTO.
  virtual int auto_priority(const GemmCall& call) const = 0;
  // What this backend runs on here, in one line for people (epigemm_backend_description): the
  // engine or library and its version, the kernel build, the device; when usable() is false,
  // why ("not usable here: ...").
  virtual std::string description() const = 0;
};

// All backends compiled into this build, freshly created (one set per context).
std::vector<std::unique_ptr<Backend>> create_backends();

}  // namespace epigemm
