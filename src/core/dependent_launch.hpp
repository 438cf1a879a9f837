// The launch configuration of a kernel that is, with dependent_launch, a programmatic dependent of
// the kernel before it on the stream (programmatic stream serialization, a feature of Hopper and
// later GPUs; only Hopper GPUs have run it): its launch may begin before that kernel has completed, so
// the kernel's first instruction is griddepcontrol.wait, which waits for that kernel's completion
// and the visibility of its writes. Stream order and CUDA graph capture are kept.
#pragma once

#include <cuda_runtime.h>

namespace epigemm {

// The result points to *attribute, which must outlive the launch that uses it.
inline cudaLaunchConfig_t dependent_launch_config(dim3 grid, dim3 block, cudaStream_t stream, bool dependent_launch,
                                                  cudaLaunchAttribute* attribute) {
  attribute->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute->val.programmaticStreamSerializationAllowed = dependent_launch ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

}  // namespace epigemm
