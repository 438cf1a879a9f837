// The one table of what epigemm knows about each dtype: its value, name, size, host storage type
// and CUDA data type. Every switch over epigemm_dtype_t is generated from it or lists every value
// without a `default:`, so a new dtype is a compile-time warning (-Wswitch) wherever it is missing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "epigemm/epigemm.h"

namespace epigemm {

// The bits of an fp16 / bf16 value as stored on the host (conversions: core/numeric.hpp).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// X(value, name, bytes, host storage type, CUDA data type). The CUDA type names a cudaDataType_t
// enumerator; only files that include CUDA's library_types.h expand that column
// (core/cuda_dtype.hpp).
#define EPIGEMM_FOR_EACH_DTYPE(X)                                     \
  X(EPIGEMM_DTYPE_F32, "f32", 4, float, CUDA_R_32F)                   \
  X(EPIGEMM_DTYPE_F16, "f16", 2, ::epigemm::Half, CUDA_R_16F)         \
  X(EPIGEMM_DTYPE_BF16, "bf16", 2, ::epigemm::BFloat16, CUDA_R_16BF)

inline bool dtype_valid(epigemm_dtype_t dtype) {
#define EPIGEMM_DTYPE_IS(value, name, bytes, storage, cuda) || dtype == value
  return false EPIGEMM_FOR_EACH_DTYPE(EPIGEMM_DTYPE_IS);
#undef EPIGEMM_DTYPE_IS
}

inline const char* dtype_name(epigemm_dtype_t dtype) {
#define EPIGEMM_DTYPE_NAME(value, name, bytes, storage, cuda) \
  case value: return name;
  switch (dtype) { EPIGEMM_FOR_EACH_DTYPE(EPIGEMM_DTYPE_NAME) }
#undef EPIGEMM_DTYPE_NAME
  return "invalid dtype";
}

// Bytes per element; 0 for a value outside the table (validation refuses those first).
inline size_t dtype_size(epigemm_dtype_t dtype) {
#define EPIGEMM_DTYPE_SIZE(value, name, bytes, storage, cuda) \
  case value: return bytes;
  switch (dtype) { EPIGEMM_FOR_EACH_DTYPE(EPIGEMM_DTYPE_SIZE) }
#undef EPIGEMM_DTYPE_SIZE
  return 0;
}

// Calls visitor(Storage{}) with a value of the dtype's host storage type (float, Half,
// BFloat16), for code templated on it.
template <typename Visitor>
decltype(auto) visit_dtype(epigemm_dtype_t dtype, Visitor&& visitor) {
#define EPIGEMM_DTYPE_VISIT(value, name, bytes, storage, cuda) \
  case value: return visitor(storage{});
  switch (dtype) { EPIGEMM_FOR_EACH_DTYPE(EPIGEMM_DTYPE_VISIT) }
#undef EPIGEMM_DTYPE_VISIT
  return visitor(float{});  // not reached: validation refuses values outside the table
}

}  // namespace epigemm
