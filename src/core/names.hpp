// Printable names of the public enums (the C API's epigemm_*_name call these).
#pragma once

#include "core/dtype.hpp"
#include "core/epilogue_math.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {

inline const char* epilogue_name(epigemm_epilogue_t e) {
  switch (e) {
    case EPIGEMM_EPILOGUE_DEFAULT: return "DEFAULT";
    case EPIGEMM_EPILOGUE_BIAS: return "BIAS";
    case EPIGEMM_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case EPIGEMM_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case EPIGEMM_EPILOGUE_DGELU: return "DGELU";
    case EPIGEMM_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case EPIGEMM_EPILOGUE_BGRADB: return "BGRADB";
    case EPIGEMM_EPILOGUE_BGRADA: return "BGRADA";
    case EPIGEMM_EPILOGUE_ACT: return "ACT";
    case EPIGEMM_EPILOGUE_ACT_BIAS: return "ACT_BIAS";
  }
  return "invalid epilogue";
}

inline const char* activation_name(epigemm_activation_t a) {
#define EPIGEMM_ACTIVATION_NAME(value, functor, name) \
  case value: return name;
  switch (a) { EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_ACTIVATION_NAME) }
#undef EPIGEMM_ACTIVATION_NAME
  return "invalid activation";
}

inline const char* backend_name(epigemm_backend_t b) {
  switch (b) {
    case EPIGEMM_BACKEND_AUTO: return "auto";
    case EPIGEMM_BACKEND_REFERENCE: return "reference";
    case EPIGEMM_BACKEND_CPU: return "cpu";
    case EPIGEMM_BACKEND_CUDA: return "cuda";
    case EPIGEMM_BACKEND_CUBLASLT: return "cublaslt";
    case EPIGEMM_BACKEND_CUTLASS: return "cutlass";
  }
  return "invalid backend";
}

inline const char* status_name(epigemm_status_t s) {
  switch (s) {
    case EPIGEMM_STATUS_SUCCESS: return "success";
    case EPIGEMM_STATUS_INVALID_VALUE: return "invalid value";
    case EPIGEMM_STATUS_NOT_SUPPORTED: return "not supported";
    case EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE: return "insufficient workspace";
    case EPIGEMM_STATUS_BACKEND_ERROR: return "backend error";
    case EPIGEMM_STATUS_OUT_OF_MEMORY: return "out of memory";
    case EPIGEMM_STATUS_INTERNAL_ERROR: return "internal error";
  }
  return "invalid status";
}

}  // namespace epigemm
