// The dispatcher: which backend runs a call, and why.
#include "core/context.hpp"

#include <array>
#include <string>
#include <utility>

#include "core/names.hpp"
#include "core/validate.hpp"

namespace epigemm {
namespace {

// alpha = 0 never reads A and B for the product, as in BLAS (docs/conventions.md, "alpha = 0"):
// acc = beta D_old, the empty product, which every backend runs as gemm_k = 0 (NaN or Inf in A or B
// then reach nothing). BGRADB and BGRADA read an operand for its sum and keep gemm_k; each backend
// leaves their product out itself. `storage` holds the changed call where there is one.
const GemmCall& without_product_where_alpha_is_zero(const GemmCall& call, GemmCall* storage) {
  if (call.alpha != 0.0f || call.gemm_k == 0) return call;
  switch (call.parts().bias_grad) {
    case BiasGradPart::columns_of_b:
    case BiasGradPart::rows_of_a: return call;
    case BiasGradPart::none:
    case BiasGradPart::rows_of_gradient: break;
  }
  *storage = call;
  storage->gemm_k = 0;
  return *storage;
}

}  // namespace

Context::Context() : backends_(create_backends()) {}

Backend* Context::find(epigemm_backend_t id) const {
  for (const auto& backend : backends_) {
    if (backend->id() == id) return backend.get();
  }
  return nullptr;
}

bool Context::usable(epigemm_backend_t id) const {
  const Backend* backend = find(id);
  return backend != nullptr && backend->usable();
}

Status Context::select(const GemmCall& call, Backend** chosen, Selection* why) const {
  if (call.backend != EPIGEMM_BACKEND_AUTO) {
    Backend* backend = find(call.backend);
    const char* name = backend_name(call.backend);
    if (backend == nullptr) {
      return error(EPIGEMM_STATUS_NOT_SUPPORTED, "backend ", name,
                   " is not compiled into this build; expected one of the usable backends or auto");
    }
    if (!backend->usable()) {
      return error(EPIGEMM_STATUS_NOT_SUPPORTED, "backend ", name,
                   " cannot run on this machine (no usable device); expected a usable backend or auto");
    }
    const Support support = backend->supports(call);
    if (!support.supported) {
      return error(EPIGEMM_STATUS_NOT_SUPPORTED, "backend ", name, " declines this call: ",
                   support.reason);
    }
    *chosen = backend;
    why->backend = call.backend;
    why->requested = true;
    why->priority = 0;
    why->declined.clear();
    return Status();
  }

  // The usable backends in the order of their priority for this call (ties in registration
  // order), asked in that order: the first that supports the call runs it. The same choice as
  // asking every backend, without paying the support questions of the backends below the chosen
  // one on every call (CUTLASS's can_implement, a cuBLASLt plan lookup).
  // A fixed array, not a vector: this runs on every AUTO call. The registry creates at most one
  // backend per epigemm_backend_t value (backend_registry.cpp).
  struct Candidate {
    Backend* backend;
    int priority;
  };
  constexpr size_t kMaxBackends = 8;
  static_assert(EPIGEMM_BACKEND_CUTLASS < kMaxBackends, "one candidate slot per backend value");
  std::array<Candidate, kMaxBackends> candidates{};
  size_t count = 0;
  for (const auto& backend : backends_) {
    if (backend->usable() && count < kMaxBackends) {
      candidates[count++] = Candidate{backend.get(), backend->auto_priority(call)};
    }
  }
  // Highest priority first, ties kept in registration order: an insertion sort of the few
  // candidates (std::stable_sort would allocate a temporary buffer on every call).
  for (size_t i = 1; i < count; ++i) {
    const Candidate next = candidates[i];
    size_t j = i;
    for (; j > 0 && candidates[j - 1].priority < next.priority; --j) candidates[j] = candidates[j - 1];
    candidates[j] = next;
  }
  Backend* best = nullptr;
  int best_priority = 0;
  why->declined.clear();
  for (size_t i = 0; i < count; ++i) {
    const Candidate& candidate = candidates[i];
    const Support support = candidate.backend->supports(call);
    if (!support.supported) {
      why->declined += std::string("; ") + backend_name(candidate.backend->id()) + " declined (" +
                       support.reason + ")";
      continue;
    }
    best = candidate.backend;
    best_priority = candidate.priority;
    break;
  }
  if (best == nullptr) {
    return error(EPIGEMM_STATUS_NOT_SUPPORTED, "no usable backend supports this call", why->declined);
  }
  *chosen = best;
  why->backend = best->id();
  why->requested = false;
  why->priority = best_priority;
  return Status();
}

std::string Selection::text() const {
  if (backend == EPIGEMM_BACKEND_AUTO) return "";  // no call has succeeded yet
  if (requested) return std::string("requested: ") + backend_name(backend);
  return std::string("auto: ") + backend_name(backend) + " has the highest priority (" +
         std::to_string(priority) + ") among the backends that support the call" + declined;
}

Status Context::workspace_bytes(const GemmCall& call, size_t* bytes) const {
  Backend* backend = nullptr;
  Selection why;
  GemmCall storage;
  GemmCall query = without_product_where_alpha_is_zero(call, &storage);
  query.sizing_workspace = true;
  EPIGEMM_RETURN_IF_ERROR(select(query, &backend, &why));
  *bytes = backend->workspace_bytes(query);
  return Status();
}

Status Context::execute(const GemmCall& given) {
  EPIGEMM_RETURN_IF_ERROR(validate_gemm_call(given));
  GemmCall storage;
  const GemmCall& call = without_product_where_alpha_is_zero(given, &storage);
  Backend* backend = nullptr;
  // The choice goes into a scratch record first: a call that fails leaves the last successful
  // call's choice in place. The record's string keeps its capacity across calls.
  EPIGEMM_RETURN_IF_ERROR(select(call, &backend, &scratch_selection_));
  const size_t needed = backend->workspace_bytes(call);
  if (call.workspace_bytes < needed || (needed > 0 && call.workspace == nullptr)) {
    const std::string given = call.workspace == nullptr && call.workspace_bytes > 0
                                  ? "workspace is NULL with workspace_bytes = " + std::to_string(call.workspace_bytes)
                                  : "workspace has " + std::to_string(call.workspace == nullptr ? size_t(0)
                                                                                                 : call.workspace_bytes) +
                                        " bytes";
    return error(EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE, given, "; backend ", backend_name(backend->id()), " needs ",
                 needed, " bytes for this call (ask ", call.names.workspace_query, ")");
  }
  EPIGEMM_RETURN_IF_ERROR(backend->run(call));
  std::swap(last_selection, scratch_selection_);
  return Status();
}

}  // namespace epigemm
