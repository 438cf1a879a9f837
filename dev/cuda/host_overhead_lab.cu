// Where a small call's time goes: for each device backend (and cuBLAS's plain GEMM, the floor of
// the benchmark), on a few small layer shapes, the host time per call (200 calls enqueued
// back to back, no synchronization in between: what the CPU spends in the library, the vendor
// library and the launches), the time per call when the GPU runs them as they are enqueued
// (events around the same loop: the benchmark's measure), and the time per call of the same
// calls replayed from a CUDA graph (the GPU's own time, no host in the way). Where the second is
// the first, the call is host-bound, and a faster kernel would not show.
//
//   epigemm_host_overhead_lab        (no arguments; a few seconds)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "epigemm/epigemm.h"
#include "lab_check.hpp"


namespace {

constexpr int kCalls = 200;

__global__ void empty_kernel() {}

bool launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError() == cudaSuccess;
}

struct Times {
  double host_us, enqueued_us, graph_us;
};

// Host, enqueued and graph-replayed microseconds per call of `call` on `stream`.
Times time_calls(const std::function<bool()>& call, cudaStream_t stream) {
  for (int i = 0; i < 20; ++i) call();  // warm-up: plans, heuristics, first launches
  LAB_CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  LAB_CHECK(cudaEventCreate(&start));
  LAB_CHECK(cudaEventCreate(&stop));
  Times t{};
  LAB_CHECK(cudaEventRecord(start, stream));
  const auto host_start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) call();
  const auto host_stop = std::chrono::steady_clock::now();
  LAB_CHECK(cudaEventRecord(stop, stream));
  LAB_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  LAB_CHECK(cudaEventElapsedTime(&ms, start, stop));
  t.host_us = std::chrono::duration<double, std::micro>(host_stop - host_start).count() / kCalls;
  t.enqueued_us = 1000.0 * ms / kCalls;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  LAB_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kCalls; ++i) call();
  LAB_CHECK(cudaStreamEndCapture(stream, &graph));
  LAB_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  LAB_CHECK(cudaGraphLaunch(exec, stream));
  LAB_CHECK(cudaStreamSynchronize(stream));
  LAB_CHECK(cudaEventRecord(start, stream));
  LAB_CHECK(cudaGraphLaunch(exec, stream));
  LAB_CHECK(cudaEventRecord(stop, stream));
  LAB_CHECK(cudaEventSynchronize(stop));
  LAB_CHECK(cudaEventElapsedTime(&ms, start, stop));
  t.graph_us = 1000.0 * ms / kCalls;
  LAB_CHECK(cudaGraphExecDestroy(exec));
  LAB_CHECK(cudaGraphDestroy(graph));
  LAB_CHECK(cudaEventDestroy(start));
  LAB_CHECK(cudaEventDestroy(stop));
  return t;
}

}  // namespace

int main() {
  struct Layer {
    int64_t tokens, in, out;
  };
  const Layer layers[] = {{256, 768, 3072}, {512, 1024, 4096}, {2048, 768, 3072}, {4096, 1024, 4096}};
  struct Case {
    const char* pass;
    epigemm_epilogue_t epilogue;
  };
  const Case cases[] = {{"fprop", EPIGEMM_EPILOGUE_GELU_AUX_BIAS}, {"fprop", EPIGEMM_EPILOGUE_BIAS},
                        {"dgrad", EPIGEMM_EPILOGUE_DGELU_BGRAD}};
  const epigemm_backend_t backends[] = {EPIGEMM_BACKEND_AUTO, EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT,
                                        EPIGEMM_BACKEND_CUTLASS};
  epigemm_context_t ctx;
  LAB_CHECK(epigemm_context_create(&ctx));
  cublasHandle_t blas;
  LAB_CHECK(cublasCreate(&blas));
  cudaStream_t stream;
  LAB_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t workspace_bytes = size_t(256) << 20;
  void* workspace;
  LAB_CHECK(cudaMalloc(&workspace, workspace_bytes));
  std::printf("microseconds per call, bf16; host = CPU time to enqueue one call (200 back to back), enqueued = "
              "GPU time per call as enqueued (the benchmark's measure), graph = the same calls replayed from a "
              "CUDA graph\n");
  // What the pieces of a call cost the host by themselves: a kernel launch, cuBLAS's stream and
  // workspace setters (the cuda backend calls them only when they change), and cuBLAS's GEMM with
  // both set once (the lab's floor rows below set the stream on every call, as a caller would).
  {
    void *a, *b, *d;
    LAB_CHECK(cudaMalloc(&a, size_t(3072) * 768 * 2));
    LAB_CHECK(cudaMalloc(&b, size_t(768) * 256 * 2));
    LAB_CHECK(cudaMalloc(&d, size_t(3072) * 256 * 2));
    LAB_CHECK(cudaMemset(a, 0, size_t(3072) * 768 * 2));
    LAB_CHECK(cudaMemset(b, 0, size_t(768) * 256 * 2));
    const float one = 1.0f, zero = 0.0f;
    const Times launch = time_calls([&] { return launch_empty_kernel(stream); }, stream);
    const Times setters = time_calls(
        [&] {
          return cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS &&
                 cublasSetWorkspace(blas, workspace, size_t(32) << 20) == CUBLAS_STATUS_SUCCESS;
        },
        stream);
    LAB_CHECK(cublasSetStream(blas, stream));
    const Times gemm = time_calls(
        [&] {
          return cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, 3072, 256, 768, &one, a, CUDA_R_16BF, 768, b,
                              CUDA_R_16BF, 768, &zero, d, CUDA_R_16BF, 3072, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
        },
        stream);
    std::printf("pieces, host / enqueued / graph microseconds per call: an empty kernel's launch %.2f / %.2f / %.2f; "
                "cublasSetStream + cublasSetWorkspace %.2f; cublasGemmEx 256,768,3072 fprop without them "
                "%.2f / %.2f / %.2f\n",
                launch.host_us, launch.enqueued_us, launch.graph_us, setters.host_us, gemm.host_us, gemm.enqueued_us,
                gemm.graph_us);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
  }
  std::printf("%-16s %-5s %-14s %-9s %8s %9s %7s\n", "layer", "pass", "epilogue", "backend", "host", "enqueued",
              "graph");
  for (const Layer& layer : layers) {
    for (const Case& c : cases) {
      const bool fprop = c.epilogue != EPIGEMM_EPILOGUE_DGELU_BGRAD;
      // fprop: D[out x tokens] = W^T-stored (in x out, transa T) times X (in x tokens, transb N);
      // dgrad: D[in x tokens] = W (in x out, N) times dY (out x tokens, N).
      const int64_t m = fprop ? layer.out : layer.in, n = layer.tokens, k = fprop ? layer.in : layer.out;
      void *a, *b, *d, *aux, *vec;
      LAB_CHECK(cudaMalloc(&a, size_t(m) * k * 2));
      LAB_CHECK(cudaMalloc(&b, size_t(k) * n * 2));
      LAB_CHECK(cudaMalloc(&d, size_t(m) * n * 2));
      LAB_CHECK(cudaMalloc(&aux, size_t(m) * n * 2));
      LAB_CHECK(cudaMalloc(&vec, size_t(m) * 2));
      LAB_CHECK(cudaMemset(a, 0, size_t(m) * k * 2));
      LAB_CHECK(cudaMemset(b, 0, size_t(k) * n * 2));
      LAB_CHECK(cudaMemset(aux, 0, size_t(m) * n * 2));
      LAB_CHECK(cudaMemset(vec, 0, size_t(m) * 2));
      const epigemm_matrix_t A{a, EPIGEMM_DTYPE_BF16, fprop ? k : m, fprop ? m : k, fprop ? k : m,
                               EPIGEMM_MEMORY_DEVICE};
      const epigemm_matrix_t B{b, EPIGEMM_DTYPE_BF16, k, n, k, EPIGEMM_MEMORY_DEVICE};
      const epigemm_matrix_t D{d, EPIGEMM_DTYPE_BF16, m, n, m, EPIGEMM_MEMORY_DEVICE};
      const epigemm_matrix_t Aux{aux, EPIGEMM_DTYPE_BF16, m, n, m, EPIGEMM_MEMORY_DEVICE};
      const epigemm_vector_t V{vec, EPIGEMM_DTYPE_BF16, m, EPIGEMM_MEMORY_DEVICE};
      char layer_text[32];
      std::snprintf(layer_text, sizeof layer_text, "%lld,%lld,%lld", (long long)layer.tokens, (long long)layer.in,
                    (long long)layer.out);
      const float one = 1.0f, zero = 0.0f;
      const Times floor = time_calls(
          [&] {
            cublasSetStream(blas, stream);
            return cublasGemmEx(blas, fprop ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(m), int(n), int(k), &one,
                                a, CUDA_R_16BF, int(A.ld), b, CUDA_R_16BF, int(k), &zero, d, CUDA_R_16BF, int(m),
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
          },
          stream);
      std::printf("%-16s %-5s %-14s %-9s %8.2f %9.2f %7.2f\n", layer_text, c.pass, "DEFAULT", "cuBLAS", floor.host_us,
                  floor.enqueued_us, floor.graph_us);
      for (epigemm_backend_t backend : backends) {
        epigemm_gemm_desc_t desc;
        LAB_CHECK(epigemm_gemm_desc_create(&desc));
        LAB_CHECK(epigemm_gemm_desc_set_transpose(desc, fprop ? EPIGEMM_OP_T : EPIGEMM_OP_N, EPIGEMM_OP_N));
        LAB_CHECK(epigemm_gemm_desc_set_epilogue(desc, c.epilogue));
        LAB_CHECK(epigemm_gemm_desc_set_backend(desc, backend));
        if (c.epilogue != EPIGEMM_EPILOGUE_DGELU_BGRAD) LAB_CHECK(epigemm_gemm_desc_set_bias(desc, &V));
        if (c.epilogue != EPIGEMM_EPILOGUE_BIAS) LAB_CHECK(epigemm_gemm_desc_set_aux(desc, &Aux));
        if (c.epilogue == EPIGEMM_EPILOGUE_DGELU_BGRAD) LAB_CHECK(epigemm_gemm_desc_set_bias_grad(desc, &V));
        bool ok = true;
        const Times t = time_calls(
            [&] {
              const bool ran =
                  epigemm_gemm(ctx, desc, &A, &B, &D, workspace, workspace_bytes, stream) == EPIGEMM_STATUS_SUCCESS;
              ok = ok && ran;
              return ran;
            },
            stream);
        if (ok) {
          std::printf("%-16s %-5s %-14s %-9s %8.2f %9.2f %7.2f\n", layer_text, c.pass,
                      epigemm_epilogue_name(c.epilogue), epigemm_backend_name(backend), t.host_us, t.enqueued_us,
                      t.graph_us);
        } else {
          std::printf("%-16s %-5s %-14s %-9s declined: %s\n", layer_text, c.pass, epigemm_epilogue_name(c.epilogue),
                      epigemm_backend_name(backend), epigemm_context_last_error(ctx));
        }
        LAB_CHECK(epigemm_gemm_desc_destroy(desc));
      }
      cudaFree(a);
      cudaFree(b);
      cudaFree(d);
      cudaFree(aux);
      cudaFree(vec);
    }
  }
  cudaFree(workspace);
  cudaStreamDestroy(stream);
  cublasDestroy(blas);
  epigemm_context_destroy(ctx);
  return 0;
}
