// The CUDA data type of a dtype (the last column of EPIGEMM_FOR_EACH_DTYPE), for the CUDA
// backends' library calls (cuBLAS, cuBLASLt).
#pragma once

#include <library_types.h>

#include "core/dtype.hpp"

namespace epigemm {

inline cudaDataType_t cuda_data_type(epigemm_dtype_t dtype) {
#define EPIGEMM_DTYPE_CUDA(value, name, bytes, storage, cuda) \
  case value: return cuda;
  switch (dtype) { EPIGEMM_FOR_EACH_DTYPE(EPIGEMM_DTYPE_CUDA) }
#undef EPIGEMM_DTYPE_CUDA
  return CUDA_R_32F;  // not reached: validation refuses values outside the table
}

}  // namespace epigemm
