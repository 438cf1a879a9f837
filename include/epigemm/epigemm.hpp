// epigemm.hpp - a thin C++17 layer over epigemm.h: RAII handles, and errors as exceptions
// (epigemm::Error carries the status and the context's message). It adds no meaning of its own;
// docs/conventions.md is the contract. Header-only, so no exception ever crosses the C library.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "epigemm/epigemm.h"

namespace epigemm {

class Error : public std::runtime_error {
 public:
  Error(epigemm_status_t status, const std::string& message)
      : std::runtime_error(std::string(epigemm_status_name(status)) + ": " + message),
        status_(status) {}
  epigemm_status_t status() const { return status_; }

 private:
  epigemm_status_t status_;
};

// A context; one per thread (docs/conventions.md, "Threads").
class Handle {
 public:
  Handle() {
    const epigemm_status_t s = epigemm_context_create(&ctx_);
    if (s != EPIGEMM_STATUS_SUCCESS) throw Error(s, "epigemm_context_create failed");
  }
  ~Handle() { epigemm_context_destroy(ctx_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    std::swap(ctx_, other.ctx_);
    return *this;
  }

  epigemm_context_t get() const { return ctx_; }

  // Throws epigemm::Error with the context's last message when status is not SUCCESS.
  void check(epigemm_status_t status) const {
    if (status != EPIGEMM_STATUS_SUCCESS) throw Error(status, epigemm_context_last_error(ctx_));
  }

  void set_backend(epigemm_backend_t backend) { check(epigemm_context_set_backend(ctx_, backend)); }
  void set_allow_tf32(bool allow) { check(epigemm_context_set_allow_tf32(ctx_, allow ? 1 : 0)); }
  bool usable(epigemm_backend_t backend) const { return epigemm_backend_usable(ctx_, backend) != 0; }
  // What the backend runs on (epigemm_backend_description); throws when it is not compiled in.
  std::string description(epigemm_backend_t backend) const {
    const char* text = nullptr;
    check(epigemm_backend_description(ctx_, backend, &text));
    return text;
  }

  // The backend that ran the last call and the dispatcher's reason.
  std::pair<epigemm_backend_t, std::string> last_backend() const {
    epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
    const char* reason = nullptr;
    check(epigemm_context_last_backend(ctx_, &backend, &reason));
    return {backend, reason ? reason : ""};
  }

  void linear_fprop(const epigemm_tensor_t& X, const epigemm_tensor_t& W, const epigemm_vector_t* bias,
                    const epigemm_tensor_t* pre_gelu, const epigemm_tensor_t& Y, void* workspace = nullptr,
                    size_t workspace_bytes = 0, void* stream = nullptr) {
    check(epigemm_linear_fprop(ctx_, &X, &W, bias, pre_gelu, &Y, workspace, workspace_bytes, stream));
  }
  void linear_dgrad(const epigemm_tensor_t& dY, const epigemm_tensor_t& W, const epigemm_tensor_t* pre_gelu,
                    const epigemm_vector_t* bias_grad, const epigemm_tensor_t& dX, void* workspace = nullptr,
                    size_t workspace_bytes = 0, void* stream = nullptr) {
    check(epigemm_linear_dgrad(ctx_, &dY, &W, pre_gelu, bias_grad, &dX, workspace, workspace_bytes, stream));
  }
  // Y = act(X W^T + b); pre_act (optional) receives X W^T + b (epigemm_linear_fprop_act).
  void linear_fprop_act(const epigemm_tensor_t& X, const epigemm_tensor_t& W, const epigemm_vector_t* bias,
                        epigemm_activation_t activation, const epigemm_tensor_t* pre_act,
                        const epigemm_tensor_t& Y, void* workspace = nullptr, size_t workspace_bytes = 0,
                        void* stream = nullptr) {
    check(epigemm_linear_fprop_act(ctx_, &X, &W, bias, activation, pre_act, &Y, workspace, workspace_bytes,
                                   stream));
  }
  // dX = (dY W) * act'(pre_act); bias_grad (optional) = sum over tokens of dX
  // (epigemm_linear_dgrad_act; pre_act is required).
  void linear_dgrad_act(const epigemm_tensor_t& dY, const epigemm_tensor_t& W, epigemm_activation_t activation,
                        const epigemm_tensor_t& pre_act, const epigemm_vector_t* bias_grad,
                        const epigemm_tensor_t& dX, void* workspace = nullptr, size_t workspace_bytes = 0,
                        void* stream = nullptr) {
    check(epigemm_linear_dgrad_act(ctx_, &dY, &W, activation, &pre_act, bias_grad, &dX, workspace,
                                   workspace_bytes, stream));
  }
  void linear_wgrad(const epigemm_tensor_t& X, const epigemm_tensor_t& dY, const epigemm_tensor_t& dW,
                    bool accumulate, const epigemm_vector_t* bias_grad, void* workspace = nullptr,
                    size_t workspace_bytes = 0, void* stream = nullptr) {
    check(epigemm_linear_wgrad(ctx_, &X, &dY, &dW, accumulate ? 1 : 0, bias_grad, workspace,
                               workspace_bytes, stream));
  }
  size_t linear_workspace_size(int64_t tokens, int64_t in_features, int64_t out_features,
                               epigemm_dtype_t dtype, epigemm_memory_t memory) const {
    size_t bytes = 0;
    check(epigemm_linear_workspace_size(ctx_, tokens, in_features, out_features, dtype, memory, &bytes));
    return bytes;
  }
  // The same for the calls of one pass, the weight gradient's with accumulate as given (the layer's
  // answer is the largest of them; docs/conventions.md).
  size_t linear_fprop_workspace_size(int64_t tokens, int64_t in_features, int64_t out_features,
                                     epigemm_dtype_t dtype, epigemm_memory_t memory) const {
    size_t bytes = 0;
    check(epigemm_linear_fprop_workspace_size(ctx_, tokens, in_features, out_features, dtype, memory, &bytes));
    return bytes;
  }
  size_t linear_dgrad_workspace_size(int64_t tokens, int64_t in_features, int64_t out_features,
                                     epigemm_dtype_t dtype, epigemm_memory_t memory) const {
    size_t bytes = 0;
    check(epigemm_linear_dgrad_workspace_size(ctx_, tokens, in_features, out_features, dtype, memory, &bytes));
    return bytes;
  }
  size_t linear_wgrad_workspace_size(int64_t tokens, int64_t in_features, int64_t out_features,
                                     epigemm_dtype_t dtype, epigemm_memory_t memory, bool accumulate) const {
    size_t bytes = 0;
    check(epigemm_linear_wgrad_workspace_size(ctx_, tokens, in_features, out_features, dtype, memory,
                                              accumulate ? 1 : 0, &bytes));
    return bytes;
  }

 private:
  epigemm_context_t ctx_ = nullptr;
};

// A GEMM description (the configuration object), with chainable setters. The C setters fail only
// for a dead description, which this class never holds; they store values, and the call that uses
// the description checks them (epigemm::gemm throws with the message).
class GemmDesc {
 public:
  GemmDesc() {
    const epigemm_status_t s = epigemm_gemm_desc_create(&desc_);
    if (s != EPIGEMM_STATUS_SUCCESS) throw Error(s, "epigemm_gemm_desc_create failed");
  }
  ~GemmDesc() { epigemm_gemm_desc_destroy(desc_); }
  GemmDesc(const GemmDesc&) = delete;
  GemmDesc& operator=(const GemmDesc&) = delete;

  GemmDesc& transpose(epigemm_op_t transa, epigemm_op_t transb) {
    epigemm_gemm_desc_set_transpose(desc_, transa, transb);
    return *this;
  }
  GemmDesc& scalars(float alpha, float beta) {
    epigemm_gemm_desc_set_scalars(desc_, alpha, beta);
    return *this;
  }
  GemmDesc& epilogue(epigemm_epilogue_t e) {
    epigemm_gemm_desc_set_epilogue(desc_, e);
    return *this;
  }
  // The activation of the ACT* / DACT* epilogues (gelu_tanh unless set).
  GemmDesc& activation(epigemm_activation_t a) {
    epigemm_gemm_desc_set_activation(desc_, a);
    return *this;
  }
  GemmDesc& bias(const epigemm_vector_t* v) {
    epigemm_gemm_desc_set_bias(desc_, v);
    return *this;
  }
  GemmDesc& aux(const epigemm_matrix_t* m) {
    epigemm_gemm_desc_set_aux(desc_, m);
    return *this;
  }
  GemmDesc& bias_grad(const epigemm_vector_t* v) {
    epigemm_gemm_desc_set_bias_grad(desc_, v);
    return *this;
  }
  GemmDesc& allow_tf32(bool allow) {
    epigemm_gemm_desc_set_allow_tf32(desc_, allow ? 1 : 0);
    return *this;
  }
  GemmDesc& backend(epigemm_backend_t b) {
    epigemm_gemm_desc_set_backend(desc_, b);
    return *this;
  }
  epigemm_gemm_desc_t get() const { return desc_; }

 private:
  epigemm_gemm_desc_t desc_ = nullptr;
};

inline size_t gemm_workspace_size(const Handle& h, const GemmDesc& desc, const epigemm_matrix_t& A,
                                  const epigemm_matrix_t& B, const epigemm_matrix_t& D) {
  size_t bytes = 0;
  h.check(epigemm_gemm_workspace_size(h.get(), desc.get(), &A, &B, &D, &bytes));
  return bytes;
}

inline void gemm(const Handle& h, const GemmDesc& desc, const epigemm_matrix_t& A,
                 const epigemm_matrix_t& B, const epigemm_matrix_t& D, void* workspace = nullptr,
                 size_t workspace_bytes = 0, void* stream = nullptr) {
  h.check(epigemm_gemm(h.get(), desc.get(), &A, &B, &D, workspace, workspace_bytes, stream));
}

}  // namespace epigemm
