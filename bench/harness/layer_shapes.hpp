// The layer shapes (tokens, in_features, out_features) the GPU benchmark programs run: the five
// public shapes of the benchmark and the generalization set, one list for the benchmark
// (bench/epigemm_bench_gpu.cu) and the kernel labs (dev/cuda/), so that a rule fitted in a lab is
// fitted to the same shapes the benchmark checks it on. Header-only.
#pragma once

#include <cstdint>

namespace epigemm_bench {

struct Shape {
  int64_t tokens, in, out;
};
inline constexpr Shape kPublicShapes[] = {
    {8192, 4096, 16384}, {8192, 16384, 4096}, {4096, 1024, 4096}, {16384, 8192, 28672}, {2048, 768, 3072}};
// The generalization set: layer shapes of transformer models outside the public five,
// 256 to 16384 tokens, hidden sizes 768 to 16384, odd token counts, and feature counts whose rows
// are not a multiple of 16 bytes (1022 -> 4094, and GPT-2's output layers onto its 50257-word
// vocabulary). A rule derived from measurements (the dispatch table, a tile choice) may be fitted
// to the public shapes and the `derive` part; the `heldout` part only checks it
// (scripts/make_dispatch_table.py refuses its rows; the CSV's shape_set column says which part a
// row is from). The four shapes before each part's last ones were added on 2026-12-02
// (docs/dispatch.md): grids whose activation gradients' last wave of 128 x 128 tiles is 77-87%
// full, where the cutlass rule's threshold lies, and the vocabulary layers. The last ones (two
// derive, one held out) on 2026-12-04: an MLP's second layer (tokens, hidden, in), whose data
// gradient carries the activation's gradient with gemm_k = the MLP's width, 768-1024, shorter than
// any other layer's here (epigemm.torch.MLP's backward runs DACT_BGRAD there).
inline constexpr Shape kDeriveShapes[] = {
    {256, 768, 3072},     {512, 1024, 4096},   {1000, 768, 3072},   {1024, 2048, 8192},
    {1536, 5120, 5120},   {2048, 2560, 10240}, {2048, 4096, 12288}, {3000, 1536, 6144},
    {4096, 4096, 11008},  {4096, 11008, 4096}, {512, 8192, 8192},   {6144, 3072, 12288},
    {8192, 5120, 13824},  {8192, 13824, 5120}, {12288, 2048, 8192}, {16384, 1024, 4096},
    {2048, 768, 50257},   {1024, 1600, 50257}, {1792, 5120, 13824}, {2304, 1536, 6144},
    {4096, 4096, 1024},   {2048, 3072, 768}};
inline constexpr Shape kHeldOutShapes[] = {
    {384, 16384, 16384}, {768, 4096, 14336},   {1536, 2048, 5632},  {2500, 5120, 5120},
    {3001, 1022, 4094},  {6144, 14336, 4096},  {12288, 3072, 8192}, {16384, 2048, 2048},
    {2304, 4096, 11008}, {2176, 3072, 8192},   {384, 14336, 4096},  {512, 1280, 50257},
    {6144, 2816, 1024}};

inline bool same_shape(const Shape& a, const Shape& b) { return a.tokens == b.tokens && a.in == b.in && a.out == b.out; }

}  // namespace epigemm_bench
