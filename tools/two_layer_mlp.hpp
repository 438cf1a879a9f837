// A two-layer MLP, prediction = fc2(act(fc1(x))) with act any of the library's activations
// (gelu_tanh by default), trained with MSE loss, whose linear layers are computed only by
// epigemm's layer-level calls with their epilogues:
//   forward   fc1 fprop  ACT_AUX_BIAS   Z1 = X W1^T + b1 (saved), H = act(Z1)
//             fc2 fprop  BIAS           P = H W2^T + b2
//   loss      L = mean over tokens x out of (P - T)^2,  dP = 2 (P - T) / (tokens * out)   (device)
//   backward  fc2 dgrad  DACT_BGRAD     dZ1 = (dP W2) * act'(Z1), db1 = sum over tokens of dZ1
//                        (or DACT: the same dZ1, and db1 from fc1's wgrad below)
//             fc2 wgrad  BGRADB         dW2 = dP^T H,  db2 = sum over tokens of dP
//             fc1 wgrad  BGRADB         dW1 = dZ1^T X, sum over tokens of dZ1 (db1 again)
//   update    W -= lr dW, b -= lr db on fp32 master copies                               (device)
// Shapes (row-major, layer coordinates): X [tokens, in], W1 [hidden, in], b1 [hidden],
// Z1, H, dZ1 [tokens, hidden], W2 [out, hidden], b2 [out], P, T, dP [tokens, out].
//
// Storage: parameters, their gradients and P are fp32. With activation dtype bf16, X, H, Z1,
// dP, dZ1 and the weights the GEMMs read are bf16 (a bf16 working copy of each fp32 master
// weight, refreshed by the SGD update); biases stay fp32 (epigemm reads each bias in its own
// dtype). This is the usual mixed-precision recipe: bf16 GEMM inputs, fp32 accumulation and
// fp32 master weights.
#pragma once

#include <string>
#include <vector>

#include "compute_device.hpp"
#include "epigemm/epigemm.hpp"

namespace epigemm_cli {

struct MlpShape {
  int64_t tokens = 0;  // rows of one batch
  int64_t in_features = 0;
  int64_t hidden_features = 0;
  int64_t out_features = 0;
};

// Host fp32 values of the four parameter tensors (or of their gradients), row-major as above.
struct MlpTensors {
  std::vector<float> w1, b1, w2, b2;
};

// fc2's dgrad epilogue: DACT_BGRAD (db1 with dZ1) or DACT (db1 from fc1's wgrad).
enum class DgradEpilogue { dact, dact_bgrad };

// Which backend ran one library call, and the dispatcher's reason.
struct CallRecord {
  std::string call;  // "fc1 fprop ACT_AUX_BIAS(gelu_tanh)"
  epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
  std::string reason;
};

class TwoLayerMlp {
 public:
  TwoLayerMlp(ComputeDevice& device, epigemm::Handle& handle, MlpShape shape,
              epigemm_dtype_t activation_dtype, epigemm_activation_t activation,
              DgradEpilogue dgrad_epilogue);

  void set_parameters(const MlpTensors& host_parameters);
  // x: [tokens, in] in the activation dtype, in the device's memory.
  void forward(const void* x);
  // After forward(): *loss (device memory) = MSE against target [tokens, out] f32, and dP.
  void loss_and_gradient(const float* target, float* loss);
  void loss_only(const float* target, float* loss);
  // After loss_and_gradient(): the parameter gradients for the same x.
  void backward(const void* x);
  void sgd_update(float learning_rate);

  MlpTensors download_gradients() const;
  // The fc1 bias gradient as fc1's wgrad computed it (BGRADB), next to the one of
  // download_gradients() (from DACT_BGRAD under that option; the same buffer under DACT).
  std::vector<float> download_fc1_bias_grad_from_wgrad() const;
  // One record per library call of the last forward + backward, in call order.
  const std::vector<CallRecord>& calls() const { return calls_; }
  DgradEpilogue dgrad_epilogue() const { return dgrad_epilogue_; }

 private:
  epigemm_tensor_t tensor(const DeviceBuffer& buffer, int64_t rows, int64_t cols) const;
  epigemm_tensor_t tensor(const void* data, epigemm_dtype_t dtype, int64_t rows, int64_t cols) const;
  epigemm_vector_t vector(const DeviceBuffer& buffer) const;
  void record(const std::string& call);

  ComputeDevice& device_;
  epigemm::Handle& handle_;
  MlpShape shape_;
  epigemm_dtype_t activation_dtype_;
  epigemm_activation_t activation_;
  DgradEpilogue dgrad_epilogue_;

  // fp32 masters and, for bf16, the working copies the GEMMs read.
  DeviceBuffer w1_master_, w2_master_, b1_, b2_;
  DeviceBuffer w1_working_, w2_working_;
  DeviceBuffer pre_act1_, hidden_, prediction_, prediction_grad_, pre_act1_grad_;
  DeviceBuffer w1_grad_, b1_grad_, b1_grad_from_wgrad_, w2_grad_, b2_grad_;
  DeviceBuffer workspace_;
  std::vector<CallRecord> calls_;
};

}  // namespace epigemm_cli
