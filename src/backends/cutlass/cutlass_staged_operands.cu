// The copies of cutlass_staged_operands.hpp. A bandwidth-bound copy: each thread writes one 16-byte
// piece of the copy (8 elements), reading its 8 source elements one by one (the source's vectors
// start at any 2-byte address); the 32 threads of a warp read and write 512 contiguous bytes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cutlass/cutlass_staged_operands.hpp"

namespace epigemm {
namespace cutlass_backend {
namespace {

constexpr int kPieceElements = 8;   // 16 bytes of 2-byte elements
constexpr int kPiecesPerBlockX = 32;
constexpr int kVectorsPerBlockY = 8;
constexpr int64_t kMaxGridY = 65535;

__global__ void operand_copy_kernel(const uint16_t* __restrict__ source, int64_t source_ld, int64_t inner,
                                    int64_t outer, uint16_t* __restrict__ copy, int64_t copy_ld,
                                    int64_t outer_padded) {
  const int64_t first = (int64_t(blockIdx.x) * kPiecesPerBlockX + threadIdx.x) * kPieceElements;
  if (first >= copy_ld) return;
  for (int64_t o = int64_t(blockIdx.y) * kVectorsPerBlockY + threadIdx.y; o < outer_padded;
       o += int64_t(gridDim.y) * kVectorsPerBlockY) {
    uint16_t values[kPieceElements];
#pragma unroll
    for (int j = 0; j < kPieceElements; ++j) {
      const int64_t i = first + j;
      values[j] = (o < outer && i < inner) ? __ldg(source + o * source_ld + i) : uint16_t(0);
    }
    uint4 piece;
    piece.x = uint32_t(values[0]) | (uint32_t(values[1]) << 16);
    piece.y = uint32_t(values[2]) | (uint32_t(values[3]) << 16);
    piece.z = uint32_t(values[4]) | (uint32_t(values[5]) << 16);
    piece.w = uint32_t(values[6]) | (uint32_t(values[7]) << 16);
    *reinterpret_cast<uint4*>(copy + o * copy_ld + first) = piece;
  }
}

}  // namespace

Status launch_operand_copy(const OperandCopy& c, void* stream) {
  const int64_t pieces = c.copy_ld / kPieceElements;
  const dim3 block(kPiecesPerBlockX, kVectorsPerBlockY);
  const dim3 grid(unsigned((pieces + kPiecesPerBlockX - 1) / kPiecesPerBlockX),
                  unsigned(std::min<int64_t>((c.outer_padded + kVectorsPerBlockY - 1) / kVectorsPerBlockY, kMaxGridY)));
  operand_copy_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint16_t*>(c.source), c.source_ld, c.inner, c.outer, static_cast<uint16_t*>(c.copy),
      c.copy_ld, c.outer_padded);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return EPIGEMM_BACKEND_ERROR("launch of the copy of an operand for TMA (", c.outer, " x ", c.inner,
                                 " elements, leading dimension ", c.source_ld, " -> ", c.copy_ld,
                                 "): ", cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace cutlass_backend
}  // namespace epigemm
