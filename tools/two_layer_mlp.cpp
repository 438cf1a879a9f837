#include "two_layer_mlp.hpp"

#include <algorithm>
#include <string>

namespace epigemm_cli {

TwoLayerMlp::TwoLayerMlp(ComputeDevice& device, epigemm::Handle& handle, MlpShape shape,
                         epigemm_dtype_t activation_dtype, epigemm_activation_t activation,
                         DgradEpilogue dgrad_epilogue)
    : device_(device), handle_(handle), shape_(shape), activation_dtype_(activation_dtype),
      activation_(activation), dgrad_epilogue_(dgrad_epilogue) {
  const int64_t tok = shape.tokens, in = shape.in_features, hid = shape.hidden_features,
                out = shape.out_features;
  const epigemm_dtype_t act = activation_dtype;
  w1_master_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, hid * in);
  w2_master_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, out * hid);
  b1_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, hid);
  b2_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, out);
  if (act != EPIGEMM_DTYPE_F32) {
    w1_working_ = DeviceBuffer(device, act, hid * in);
    w2_working_ = DeviceBuffer(device, act, out * hid);
  }
  pre_act1_ = DeviceBuffer(device, act, tok * hid);
  hidden_ = DeviceBuffer(device, act, tok * hid);
  prediction_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, tok * out);
  prediction_grad_ = DeviceBuffer(device, act, tok * out);
  pre_act1_grad_ = DeviceBuffer(device, act, tok * hid);
  w1_grad_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, hid * in);
  b1_grad_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, hid);
  b1_grad_from_wgrad_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, hid);
  w2_grad_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, out * hid);
  b2_grad_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, out);

  // One workspace for every call: the most any layer call of either layer asks for, with the
  // activation dtype and with fp32 (the dtype of P and of the weight gradients).
  size_t workspace_bytes = 0;
  for (const epigemm_dtype_t dtype : {act, EPIGEMM_DTYPE_F32}) {
    workspace_bytes = std::max(workspace_bytes,
                               handle.linear_workspace_size(tok, in, hid, dtype, device.memory()));
    workspace_bytes = std::max(workspace_bytes,
                               handle.linear_workspace_size(tok, hid, out, dtype, device.memory()));
  }
  if (workspace_bytes > 0) {
    workspace_ = DeviceBuffer(device, EPIGEMM_DTYPE_F32, int64_t((workspace_bytes + 3) / 4));
  }
}

epigemm_tensor_t TwoLayerMlp::tensor(const void* data, epigemm_dtype_t dtype, int64_t rows,
                                     int64_t cols) const {
  return epigemm_tensor_t{const_cast<void*>(data), dtype, rows, cols, cols, device_.memory()};
}

epigemm_tensor_t TwoLayerMlp::tensor(const DeviceBuffer& buffer, int64_t rows, int64_t cols) const {
  return tensor(buffer.data(), buffer.dtype(), rows, cols);
}

epigemm_vector_t TwoLayerMlp::vector(const DeviceBuffer& buffer) const {
  return epigemm_vector_t{buffer.data(), buffer.dtype(), buffer.count(), device_.memory()};
}

void TwoLayerMlp::record(const std::string& call) {
  const auto last = handle_.last_backend();
  calls_.push_back(CallRecord{call, last.first, last.second});
}

void TwoLayerMlp::set_parameters(const MlpTensors& p) {
  device_.copy_from_host(w1_master_.data(), p.w1.data(), w1_master_.bytes());
  device_.copy_from_host(w2_master_.data(), p.w2.data(), w2_master_.bytes());
  device_.copy_from_host(b1_.data(), p.b1.data(), b1_.bytes());
  device_.copy_from_host(b2_.data(), p.b2.data(), b2_.bytes());
  if (activation_dtype_ != EPIGEMM_DTYPE_F32) {
    // The working copies are the masters rounded: an SGD step with a zero learning rate.
    device_.sgd_update(w1_master_.f32(), w1_master_.f32(), w1_master_.count(), 0.0f,
                       w1_working_.data(), activation_dtype_);
    device_.sgd_update(w2_master_.f32(), w2_master_.f32(), w2_master_.count(), 0.0f,
                       w2_working_.data(), activation_dtype_);
  }
}

void TwoLayerMlp::forward(const void* x) {
  const int64_t tok = shape_.tokens, in = shape_.in_features, hid = shape_.hidden_features,
                out = shape_.out_features;
  const DeviceBuffer& w1 = activation_dtype_ == EPIGEMM_DTYPE_F32 ? w1_master_ : w1_working_;
  const DeviceBuffer& w2 = activation_dtype_ == EPIGEMM_DTYPE_F32 ? w2_master_ : w2_working_;
  calls_.clear();

  // fc1, ACT_AUX_BIAS: Z1 [tok, hid] = X [tok, in] W1 [hid, in]^T + b1 [hid]; H = act(Z1).
  const epigemm_vector_t b1 = vector(b1_);
  const epigemm_tensor_t pre_act1 = tensor(pre_act1_, tok, hid);
  handle_.linear_fprop_act(tensor(x, activation_dtype_, tok, in), tensor(w1, hid, in), &b1, activation_,
                           &pre_act1, tensor(hidden_, tok, hid), workspace_.data(), workspace_.bytes(),
                           device_.stream());
  record(std::string("fc1 fprop ACT_AUX_BIAS(") + epigemm_activation_name(activation_) + ")");

  // fc2, BIAS: P [tok, out] (fp32) = H [tok, hid] W2 [out, hid]^T + b2 [out].
  const epigemm_vector_t b2 = vector(b2_);
  handle_.linear_fprop(tensor(hidden_, tok, hid), tensor(w2, out, hid), &b2, nullptr,
                       tensor(prediction_, tok, out), workspace_.data(), workspace_.bytes(),
                       device_.stream());
  record("fc2 fprop BIAS");
}

void TwoLayerMlp::loss_and_gradient(const float* target, float* loss) {
  const int64_t count = shape_.tokens * shape_.out_features;
  device_.mse_loss_gradient(prediction_.f32(), target, count, 2.0f / float(count),
                            prediction_grad_.data(), activation_dtype_, loss);
}

void TwoLayerMlp::loss_only(const float* target, float* loss) {
  const int64_t count = shape_.tokens * shape_.out_features;
  device_.mse_loss_gradient(prediction_.f32(), target, count, 0.0f, nullptr, activation_dtype_, loss);
}

void TwoLayerMlp::backward(const void* x) {
  const int64_t tok = shape_.tokens, in = shape_.in_features, hid = shape_.hidden_features,
                out = shape_.out_features;
  const DeviceBuffer& w2 = activation_dtype_ == EPIGEMM_DTYPE_F32 ? w2_master_ : w2_working_;
  const bool bgrad_in_dgrad = dgrad_epilogue_ == DgradEpilogue::dact_bgrad;

  // fc2 dgrad through fc1's activation: dZ1 [tok, hid] = (dP [tok, out] W2 [out, hid]) * act'(Z1);
  // with DACT_BGRAD also db1 [hid] = sum over tokens of dZ1.
  const epigemm_tensor_t pre_act1 = tensor(pre_act1_, tok, hid);
  const epigemm_vector_t b1_grad = vector(b1_grad_);
  handle_.linear_dgrad_act(tensor(prediction_grad_, tok, out), tensor(w2, out, hid), activation_, pre_act1,
                           bgrad_in_dgrad ? &b1_grad : nullptr, tensor(pre_act1_grad_, tok, hid),
                           workspace_.data(), workspace_.bytes(), device_.stream());
  record(std::string(bgrad_in_dgrad ? "fc2 dgrad DACT_BGRAD(" : "fc2 dgrad DACT(") +
         epigemm_activation_name(activation_) + ")");

  // fc2 wgrad: dW2 [out, hid] = dP^T H; db2 [out] = sum over tokens of dP.
  const epigemm_vector_t b2_grad = vector(b2_grad_);
  handle_.linear_wgrad(tensor(hidden_, tok, hid), tensor(prediction_grad_, tok, out),
                       tensor(w2_grad_, out, hid), false, &b2_grad, workspace_.data(),
                       workspace_.bytes(), device_.stream());
  record("fc2 wgrad BGRADB");

  // fc1 wgrad: dW1 [hid, in] = dZ1^T X; its BGRADB sum over tokens of dZ1 is db1 under DACT,
  // and a second computation of db1 under DACT_BGRAD.
  const epigemm_vector_t b1_grad_from_wgrad = vector(bgrad_in_dgrad ? b1_grad_from_wgrad_ : b1_grad_);
  handle_.linear_wgrad(tensor(x, activation_dtype_, tok, in), tensor(pre_act1_grad_, tok, hid),
                       tensor(w1_grad_, hid, in), false, &b1_grad_from_wgrad, workspace_.data(),
                       workspace_.bytes(), device_.stream());
  record("fc1 wgrad BGRADB");
}

void TwoLayerMlp::sgd_update(float learning_rate) {
  void* w1_copy = activation_dtype_ == EPIGEMM_DTYPE_F32 ? nullptr : w1_working_.data();
  void* w2_copy = activation_dtype_ == EPIGEMM_DTYPE_F32 ? nullptr : w2_working_.data();
  device_.sgd_update(w1_master_.f32(), w1_grad_.f32(), w1_master_.count(), learning_rate, w1_copy,
                     activation_dtype_);
  device_.sgd_update(b1_.f32(), b1_grad_.f32(), b1_.count(), learning_rate, nullptr, EPIGEMM_DTYPE_F32);
  device_.sgd_update(w2_master_.f32(), w2_grad_.f32(), w2_master_.count(), learning_rate, w2_copy,
                     activation_dtype_);
  device_.sgd_update(b2_.f32(), b2_grad_.f32(), b2_.count(), learning_rate, nullptr, EPIGEMM_DTYPE_F32);
}

MlpTensors TwoLayerMlp::download_gradients() const {
  MlpTensors g;
  g.w1.resize(size_t(w1_grad_.count()));
  g.b1.resize(size_t(b1_grad_.count()));
  g.w2.resize(size_t(w2_grad_.count()));
  g.b2.resize(size_t(b2_grad_.count()));
  device_.copy_to_host(g.w1.data(), w1_grad_.data(), w1_grad_.bytes());
  device_.copy_to_host(g.b1.data(), b1_grad_.data(), b1_grad_.bytes());
  device_.copy_to_host(g.w2.data(), w2_grad_.data(), w2_grad_.bytes());
  device_.copy_to_host(g.b2.data(), b2_grad_.data(), b2_grad_.bytes());
  return g;
}

std::vector<float> TwoLayerMlp::download_fc1_bias_grad_from_wgrad() const {
  const DeviceBuffer& source =
      dgrad_epilogue_ == DgradEpilogue::dact_bgrad ? b1_grad_from_wgrad_ : b1_grad_;
  std::vector<float> values(size_t(source.count()));
  device_.copy_to_host(values.data(), source.data(), source.bytes());
  return values;
}

}  // namespace epigemm_cli
