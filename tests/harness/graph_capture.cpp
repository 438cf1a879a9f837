// CUDA-graph capture of library calls, shared by the GPU backends' tests (graph_capture.hpp).
#include "harness/graph_capture.hpp"

#ifdef EPIGEMM_TESTS_WITH_CUDA

#include <memory>
#include <string>

namespace epigemm_test {

void check_graph_capture_and_replay(Context& ctx, const std::vector<GemmCase>& cases, epigemm_backend_t backend,
                                    const char* seed_name) {
  struct Captured {
    GemmCase c;
    Operands ops;
    OperandViews views;
    Desc desc;
    std::unique_ptr<Workspace> workspace;
  };
  std::vector<Captured> calls;
  for (const GemmCase& c : cases) {
    Captured call;
    call.c = c;
    call.ops = Operands::make(call.c);
    call.ops.upload(call.c);
    call.views = OperandViews::of(call.c, call.ops, EPIGEMM_MEMORY_DEVICE);
    call.desc = make_desc(call.c, call.views, backend);
    size_t bytes = 0;
    ASSERT_EQ(epigemm_gemm_workspace_size(ctx, call.desc.get(), &call.views.a, &call.views.b,
                                          &call.views.d, &bytes),
              EPIGEMM_STATUS_SUCCESS)
        << epigemm_context_last_error(ctx);
    call.workspace = std::make_unique<Workspace>(bytes, EPIGEMM_MEMORY_DEVICE);
    calls.push_back(std::move(call));
  }

  Stream stream(EPIGEMM_MEMORY_DEVICE);
  const cudaStream_t s = static_cast<cudaStream_t>(stream.get());
  // One uncaptured run of each call first, as a framework warms up before capturing: CUDA loads
  // kernel modules lazily on first launch, which is not what this test is about.
  for (Captured& call : calls) {
    ASSERT_EQ(epigemm_gemm(ctx, call.desc.get(), &call.views.a, &call.views.b, &call.views.d,
                           call.workspace->data(), call.workspace->bytes(), stream.get()),
              EPIGEMM_STATUS_SUCCESS)
        << epigemm_context_last_error(ctx);
  }
  stream.synchronize();
  ASSERT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  std::vector<epigemm_status_t> statuses;
  std::vector<std::string> messages;
  for (Captured& call : calls) {
    statuses.push_back(epigemm_gemm(ctx, call.desc.get(), &call.views.a, &call.views.b,
                                    &call.views.d, call.workspace->data(), call.workspace->bytes(),
                                    stream.get()));
    messages.push_back(epigemm_context_last_error(ctx));
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(statuses[i], EPIGEMM_STATUS_SUCCESS) << calls[i].c.describe() << ": " << messages[i];
  }
  ASSERT_EQ(end, cudaSuccess) << "capture failed: " << cudaGetErrorString(end);
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));

  for (int replay = 0; replay < 2; ++replay) {
    std::vector<Operands> before;
    for (Captured& call : calls) {
      // Fresh inputs in the same buffers, poisoned outputs.
      Rng rng(case_seed(seed_name, uint64_t(replay) * 100 + uint64_t(call.c.epilogue)));
      call.ops.a.fill_uniform(rng, -1.0, 1.0);
      call.ops.b.fill_uniform(rng, -1.0, 1.0);
      call.ops.d.fill_poison();
      if (call.c.has_bias()) call.ops.bias.fill_uniform(rng, -1.0, 1.0);
      if (call.c.has_aux()) {
        if (call.c.aux_is_output()) {
          call.ops.aux.fill_poison();
        } else {
          call.ops.aux.fill_uniform(rng, -3.0, 3.0);
        }
      }
      if (call.c.has_bias_grad()) call.ops.bias_grad.fill_poison();
      call.ops.upload(call.c);
      before.push_back(call.ops);
    }
    ASSERT_CUDA(cudaGraphLaunch(exec, s));
    stream.synchronize();
    for (size_t i = 0; i < calls.size(); ++i) {
      SCOPED_TRACE("replay " + std::to_string(replay) + ": " + calls[i].c.describe());
      CaseRun run;
      run.ok = true;
      run.ran = backend;
      run.before = before[i];
      calls[i].ops.download(calls[i].c, stream.get());
      run.after = calls[i].ops;
      check_case(ctx, calls[i].c, run);
    }
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace epigemm_test

#endif  // EPIGEMM_TESTS_WITH_CUDA
