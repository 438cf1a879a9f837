// The validity oracle (validity_oracle.hpp), rule by rule from docs/conventions.md. Each rule
// that refuses a call returns at once with the rule's text; the order does not matter, since every
// refusal of §4 is the same status (INVALID_VALUE) and comes before any backend is asked.
#include "validity_oracle.hpp"

#include <algorithm>
#include <cstdint>

namespace epigemm_fuzz {
namespace {

constexpr int64_t kMaxSpanBytes = int64_t(1) << 60;  // §4: one operand spans at most 2^60 bytes

// Enumerator values of epigemm.h (§3, §2, §6).
bool dtype_known(int dtype) { return dtype >= 0 && dtype <= 2; }
bool memory_known(int memory) { return memory == 0 || memory == 1; }
int64_t element_size(int dtype) { return dtype == EPIGEMM_DTYPE_F32 ? 4 : 2; }

Prediction refused(const std::string& why) { return Prediction{Verdict::invalid, why}; }
Prediction fine() { return Prediction{Verdict::runs, ""}; }

// The span rule for `outer` runs of `inner` elements `stride` apart: -1 beyond 2^60 bytes.
// Meaningful for sizes >= 0 and stride >= inner (checked before it is asked).
int64_t strided_span(int64_t inner, int64_t outer, int64_t stride, int dtype) {
  if (inner <= 0 || outer <= 0) return 0;
  const __int128 elements = (__int128(outer) - 1) * stride + inner;  // < 2^127
  if (elements > kMaxSpanBytes) return -1;
  const __int128 bytes = elements * element_size(dtype);
  return bytes > kMaxSpanBytes ? -1 : int64_t(bytes);
}

// §1 and §4 for one column-major matrix: dtype, memory, sizes, ld >= max(1, rows), data when it
// has elements, at most 2^60 bytes.
Prediction check_matrix(const epigemm_matrix_t& m, const char* name) {
  const std::string n = name;
  if (!dtype_known(int(m.dtype))) return refused(n + ": dtype not f32/f16/bf16");
  if (!memory_known(int(m.memory))) return refused(n + ": memory not host/device");
  if (m.rows < 0 || m.cols < 0) return refused(n + ": negative size");
  if (m.ld < std::max<int64_t>(1, m.rows)) return refused(n + ": ld < max(1, rows)");
  if (m.rows > 0 && m.cols > 0 && m.data == nullptr) return refused(n + ": NULL data with elements");
  if (span_bytes(m) < 0) return refused(n + ": spans more than 2^60 bytes");
  return fine();
}

Prediction check_vector(const epigemm_vector_t& v, const char* name) {
  const std::string n = name;
  if (!dtype_known(int(v.dtype))) return refused(n + ": dtype not f32/f16/bf16");
  if (!memory_known(int(v.memory))) return refused(n + ": memory not host/device");
  if (v.length < 0) return refused(n + ": negative length");
  if (span_bytes(v) < 0) return refused(n + ": spans more than 2^60 bytes");
  if (v.length > 0 && v.data == nullptr) return refused(n + ": NULL data with elements");
  return fine();
}

// §1 for one row-major tensor, in its own terms: row_stride >= max(1, cols).
Prediction check_tensor(const epigemm_tensor_t* t, const char* name) {
  const std::string n = name;
  if (t == nullptr) return refused(n + ": NULL descriptor");
  if (!dtype_known(int(t->dtype))) return refused(n + ": dtype not f32/f16/bf16");
  if (!memory_known(int(t->memory))) return refused(n + ": memory not host/device");
  if (t->rows < 0 || t->cols < 0) return refused(n + ": negative size");
  if (t->row_stride < std::max<int64_t>(1, t->cols)) return refused(n + ": row_stride < max(1, cols)");
  if (t->rows > 0 && t->cols > 0 && t->data == nullptr) return refused(n + ": NULL data with elements");
  if (strided_span(t->cols, t->rows, t->row_stride, int(t->dtype)) < 0) {
    return refused(n + ": spans more than 2^60 bytes");
  }
  return fine();
}

// §1: a row-major [r, c] tensor with row stride s is the column-major c x r matrix with ld s.
epigemm_matrix_t column_major(const epigemm_tensor_t& t) {
  return epigemm_matrix_t{t.data, t.dtype, t.cols, t.rows, t.row_stride, t.memory};
}

struct Range {
  uintptr_t begin, end;
};
Range range_of(const void* data, int64_t span) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  return Range{begin, begin + uintptr_t(span)};
}
bool overlap(const Range& x, const Range& y) {
  return x.begin < x.end && y.begin < y.end && x.begin < y.end && y.begin < x.end;
}

// §6: which backend can run a valid call on this machine.
Prediction backend_verdict(int backend, int memory, const Machine& machine) {
  const bool device = memory == EPIGEMM_MEMORY_DEVICE;
  if (backend == EPIGEMM_BACKEND_AUTO) {
    const bool any = device ? machine.usable[EPIGEMM_BACKEND_CUDA] || machine.usable[EPIGEMM_BACKEND_CUBLASLT] ||
                                  machine.usable[EPIGEMM_BACKEND_CUTLASS]
                            : machine.usable[EPIGEMM_BACKEND_REFERENCE] || machine.usable[EPIGEMM_BACKEND_CPU];
    return any ? fine() : Prediction{Verdict::not_supported, "auto: no usable backend for this memory"};
  }
  if (!machine.usable[backend]) return Prediction{Verdict::not_supported, "requested backend not usable here"};
  const bool device_backend = backend == EPIGEMM_BACKEND_CUDA || backend == EPIGEMM_BACKEND_CUBLASLT ||
                              backend == EPIGEMM_BACKEND_CUTLASS;
  if (device_backend != device) return Prediction{Verdict::not_supported, "requested backend runs on the other memory"};
  return fine();
}

}  // namespace

EpilogueParts epilogue_parts(int e) {
  // conventions.md §2: the epilogue table read as parts. Indexed by value (epigemm.h): DEFAULT,
  // BIAS, ACT_AUX (GELU_AUX), ACT_AUX_BIAS, DACT (DGELU), DACT_BGRAD, BGRADB, BGRADA, ACT, ACT_BIAS.
  //   bias  activation  aux  backward  bias_grad
  static const EpilogueParts kParts[10] = {
      {false, false, AuxPart::none, false, BiasGradPart::none},
      {true, false, AuxPart::none, false, BiasGradPart::none},
      {false, true, AuxPart::written, false, BiasGradPart::none},
      {true, true, AuxPart::written, false, BiasGradPart::none},
      {false, true, AuxPart::read, true, BiasGradPart::none},
      {false, true, AuxPart::read, true, BiasGradPart::rows_of_g},
      {false, false, AuxPart::none, false, BiasGradPart::columns_of_op_b},
      {false, false, AuxPart::none, false, BiasGradPart::rows_of_op_a},
      {false, true, AuxPart::none, false, BiasGradPart::none},
      {true, true, AuxPart::none, false, BiasGradPart::none},
  };
  return e >= 0 && e < 10 ? kParts[e] : EpilogueParts{};
}

bool writes_aux(int e) { return epilogue_parts(e).aux == AuxPart::written; }
bool reads_aux(int e) { return epilogue_parts(e).aux == AuxPart::read; }
bool reads_bias(int e) { return epilogue_parts(e).bias; }
bool writes_bias_grad(int e) { return epilogue_parts(e).bias_grad != BiasGradPart::none; }
int64_t bias_grad_length(int e, int64_t gemm_m, int64_t gemm_n) {
  return epilogue_parts(e).bias_grad == BiasGradPart::columns_of_op_b ? gemm_n : gemm_m;
}

int64_t span_bytes(const epigemm_matrix_t& m) {
  return strided_span(m.rows, m.cols, m.ld, int(m.dtype));
}
int64_t span_bytes(const epigemm_vector_t& v) {
  if (v.length <= 0) return 0;
  const __int128 bytes = __int128(v.length) * element_size(int(v.dtype));
  return bytes > kMaxSpanBytes ? -1 : int64_t(bytes);
}

Prediction check_gemm(GemmMeaning* c, const Machine& machine) {
  // Enumerator values (§4: "enum" is a bad argument).
  if (c->transa != 0 && c->transa != 1) return refused("transa not N/T");
  if (c->transb != 0 && c->transb != 1) return refused("transb not N/T");
  if (c->epilogue < 0 || c->epilogue > 9) return refused("epilogue not 0..9");
  // §2, "Activations": the description's activation is checked whatever the epilogue.
  if (c->activation < 0 || c->activation > 4) return refused("activation not 0..4");
  if (c->backend < 0 || c->backend > 5) return refused("backend not 0..5");
  for (const auto& [m, name] : {std::pair{&c->a, "A"}, std::pair{&c->b, "B"}, std::pair{&c->d, "D"}}) {
    const Prediction p = check_matrix(*m, name);
    if (p.verdict == Verdict::invalid) return p;
  }
  // §1: A is gemm_m x gemm_k (N) or gemm_k x gemm_m (T); B gemm_k x gemm_n (N) or gemm_n x gemm_k.
  const bool ta = c->transa == 1, tb = c->transb == 1;
  c->gemm_m = ta ? c->a.cols : c->a.rows;
  c->gemm_k = ta ? c->a.rows : c->a.cols;
  c->gemm_n = tb ? c->b.rows : c->b.cols;
  if ((tb ? c->b.cols : c->b.rows) != c->gemm_k) return refused("B's gemm_k side differs from A's");
  if (c->d.rows != c->gemm_m || c->d.cols != c->gemm_n) return refused("D is not gemm_m x gemm_n");
  // §3.
  if (c->b.dtype != c->a.dtype) return refused("B's dtype differs from A's");
  if (c->d.dtype != EPIGEMM_DTYPE_F32 && c->d.dtype != c->a.dtype) return refused("D neither f32 nor A's dtype");
  // §2: exactly the operands the epilogue uses.
  const int e = c->epilogue;
  if (reads_bias(e) != c->has_bias) return refused("bias given / missing against the epilogue");
  if ((reads_aux(e) || writes_aux(e)) != c->has_aux) return refused("aux given / missing against the epilogue");
  if (writes_bias_grad(e) != c->has_bias_grad) return refused("bias_grad given / missing against the epilogue");
  if (c->has_bias) {
    const Prediction p = check_vector(c->bias, "bias");
    if (p.verdict == Verdict::invalid) return p;
    if (c->bias.length != c->gemm_m) return refused("bias length != gemm_m");
  }
  if (c->has_aux) {
    const Prediction p = check_matrix(c->aux, "aux");
    if (p.verdict == Verdict::invalid) return p;
    if (c->aux.rows != c->gemm_m || c->aux.cols != c->gemm_n) return refused("aux is not gemm_m x gemm_n");
  }
  if (c->has_bias_grad) {
    const Prediction p = check_vector(c->bias_grad, "bias_grad");
    if (p.verdict == Verdict::invalid) return p;
    if (c->bias_grad.length != bias_grad_length(e, c->gemm_m, c->gemm_n)) {
      return refused("bias_grad length != gemm_n (BGRADB) / gemm_m (DACT_BGRAD, BGRADA)");
    }
  }
  // §4: one memory for every operand.
  const int memory = int(c->d.memory);
  if (int(c->a.memory) != memory || int(c->b.memory) != memory ||
      (c->has_bias && int(c->bias.memory) != memory) || (c->has_aux && int(c->aux.memory) != memory) ||
      (c->has_bias_grad && int(c->bias_grad.memory) != memory)) {
    return refused("operands in different memories");
  }
  // §4: outputs overlap neither an input nor each other; the workspace overlaps no operand.
  Range outputs[3], inputs[4];
  int output_count = 0, input_count = 0;
  outputs[output_count++] = range_of(c->d.data, span_bytes(c->d));
  if (c->has_aux && writes_aux(e)) outputs[output_count++] = range_of(c->aux.data, span_bytes(c->aux));
  if (c->has_bias_grad) outputs[output_count++] = range_of(c->bias_grad.data, span_bytes(c->bias_grad));
  inputs[input_count++] = range_of(c->a.data, span_bytes(c->a));
  inputs[input_count++] = range_of(c->b.data, span_bytes(c->b));
  if (c->has_bias) inputs[input_count++] = range_of(c->bias.data, span_bytes(c->bias));
  if (c->has_aux && reads_aux(e)) inputs[input_count++] = range_of(c->aux.data, span_bytes(c->aux));
  for (int i = 0; i < output_count; ++i) {
    for (int j = 0; j < input_count; ++j) {
      if (overlap(outputs[i], inputs[j])) return refused("an output overlaps an input");
    }
    for (int j = i + 1; j < output_count; ++j) {
      if (overlap(outputs[i], outputs[j])) return refused("two outputs overlap");
    }
  }
  if (c->workspace != nullptr && c->workspace_bytes > 0) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(c->workspace);
    const Range scratch{begin, begin + std::min<uintptr_t>(c->workspace_bytes, UINTPTR_MAX - begin)};
    for (int i = 0; i < output_count; ++i) {
      if (overlap(scratch, outputs[i])) return refused("the workspace overlaps an output");
    }
    for (int j = 0; j < input_count; ++j) {
      if (overlap(scratch, inputs[j])) return refused("the workspace overlaps an input");
    }
  }
  return backend_verdict(c->backend, memory, machine);
}

GemmMeaning classic_meaning(const epigemm_matrix_t& A, const epigemm_matrix_t& B,
                            const epigemm_matrix_t& D, const epigemm_vector_t* bias,
                            const epigemm_matrix_t* pre_gelu_out, int transa, int transb, int grad,
                            int accumulate, int backend) {
  GemmMeaning c;
  c.a = A;
  c.b = B;
  c.d = D;
  c.transa = transa;
  c.transb = transb;
  c.alpha = 1.0f;
  c.beta = accumulate ? 1.0f : 0.0f;
  c.backend = backend;
  c.activation = EPIGEMM_ACTIVATION_GELU_TANH;
  // "Given" is a non-NULL descriptor with non-NULL data.
  const bool with_bias = bias != nullptr && bias->data != nullptr;
  const bool with_pre = pre_gelu_out != nullptr && pre_gelu_out->data != nullptr;
  const bool g = grad != 0;
  if (!with_bias && !with_pre) c.epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  if (with_bias && !with_pre) c.epilogue = g ? EPIGEMM_EPILOGUE_BGRADB : EPIGEMM_EPILOGUE_BIAS;
  if (!with_bias && with_pre) c.epilogue = g ? EPIGEMM_EPILOGUE_DGELU : EPIGEMM_EPILOGUE_GELU_AUX;
  if (with_bias && with_pre) c.epilogue = g ? EPIGEMM_EPILOGUE_DGELU_BGRAD : EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
  if (with_bias) {
    if (writes_bias_grad(c.epilogue)) {  // with grad the bias is the bias gradient, an output
      c.has_bias_grad = true;
      c.bias_grad = *bias;
    } else {
      c.has_bias = true;
      c.bias = *bias;
    }
  }
  if (with_pre) {
    c.has_aux = true;
    c.aux = *pre_gelu_out;
  }
  return c;
}

Prediction check_layer(const LayerArgs& l, const Machine& machine, GemmMeaning* c) {
  *c = GemmMeaning();
  c->backend = l.backend;
  c->workspace = l.workspace;
  c->workspace_bytes = l.workspace_bytes;
  // §2, "The layer calls": the _act calls take the activation (any int: §4 refuses what the header
  // does not define); epigemm_linear_fprop applies gelu_tanh when pre_gelu is given and the
  // identity otherwise, epigemm_linear_dgrad gelu_tanh'.
  if (l.with_activation) {
    if (l.activation < 0 || l.activation > 4) return refused("activation not 0..4");
    c->activation = l.activation;
  } else {
    c->activation = l.pass == Pass::fprop && l.pre_act == nullptr ? EPIGEMM_ACTIVATION_IDENTITY
                                                                  : EPIGEMM_ACTIVATION_GELU_TANH;
  }
  auto check = [](const epigemm_tensor_t* t, const char* name) { return check_tensor(t, name); };
  switch (l.pass) {
    case Pass::fprop: {
      for (const auto& [t, name] : {std::pair{l.x, "X"}, std::pair{l.w, "W"}, std::pair{l.out, "Y"}}) {
        const Prediction p = check(t, name);
        if (p.verdict == Verdict::invalid) return p;
      }
      const int64_t tokens = l.x->rows, in = l.x->cols, out = l.w->rows;
      if (l.w->cols != in) return refused("fprop: W's columns != in_features");
      if (l.out->rows != tokens || l.out->cols != out) return refused("fprop: Y is not [tokens, out]");
      if (l.bias != nullptr && l.bias->length != out) return refused("fprop: bias length != out_features");
      if (l.pre_act != nullptr) {
        const Prediction p = check(l.pre_act, "pre_act");
        if (p.verdict == Verdict::invalid) return p;
        if (l.pre_act->rows != tokens || l.pre_act->cols != out) return refused("fprop: pre_act is not [tokens, out]");
      }
      // fprop: A = W (T), B = X (N), D = Y; gemm_m = out, gemm_n = tokens, gemm_k = in.
      c->a = column_major(*l.w);
      c->transa = EPIGEMM_OP_T;
      c->b = column_major(*l.x);
      c->transb = EPIGEMM_OP_N;
      c->d = column_major(*l.out);
      // With pre_act ACT_AUX(_BIAS); without, ACT(_BIAS), which is DEFAULT / BIAS for the identity.
      const bool bias = l.bias != nullptr;
      if (l.pre_act != nullptr) {
        c->epilogue = bias ? EPIGEMM_EPILOGUE_ACT_AUX_BIAS : EPIGEMM_EPILOGUE_ACT_AUX;
      } else if (c->activation == EPIGEMM_ACTIVATION_IDENTITY) {
        c->epilogue = bias ? EPIGEMM_EPILOGUE_BIAS : EPIGEMM_EPILOGUE_DEFAULT;
      } else {
        c->epilogue = bias ? EPIGEMM_EPILOGUE_ACT_BIAS : EPIGEMM_EPILOGUE_ACT;
      }
      if (bias) {
        c->has_bias = true;
        c->bias = *l.bias;
      }
      break;
    }
    case Pass::dgrad: {
      if (l.with_activation && l.pre_act == nullptr) return refused("dgrad_act: pre_act is NULL (required)");
      for (const auto& [t, name] : {std::pair{l.dy, "dY"}, std::pair{l.w, "W"}, std::pair{l.out, "dX"}}) {
        const Prediction p = check(t, name);
        if (p.verdict == Verdict::invalid) return p;
      }
      const int64_t tokens = l.dy->rows, out = l.dy->cols, in = l.w->cols;
      if (l.w->rows != out) return refused("dgrad: W's rows != out_features");
      if (l.out->rows != tokens || l.out->cols != in) return refused("dgrad: dX is not [tokens, in]");
      if (l.bias_grad != nullptr && l.pre_act == nullptr) return refused("dgrad: bias_grad without pre_gelu");
      if (l.bias_grad != nullptr && l.bias_grad->length != in) return refused("dgrad: bias_grad length != in_features");
      if (l.pre_act != nullptr) {
        const Prediction p = check(l.pre_act, "pre_act");
        if (p.verdict == Verdict::invalid) return p;
        if (l.pre_act->rows != tokens || l.pre_act->cols != in) return refused("dgrad: pre_act is not [tokens, in]");
      }
      // dgrad: A = W (N), B = dY (N), D = dX; gemm_m = in, gemm_n = tokens, gemm_k = out.
      c->a = column_major(*l.w);
      c->transa = EPIGEMM_OP_N;
      c->b = column_major(*l.dy);
      c->transb = EPIGEMM_OP_N;
      c->d = column_major(*l.out);
      c->epilogue = l.pre_act ? (l.bias_grad ? EPIGEMM_EPILOGUE_DACT_BGRAD : EPIGEMM_EPILOGUE_DACT)
                              : EPIGEMM_EPILOGUE_DEFAULT;
      if (l.bias_grad) {
        c->has_bias_grad = true;
        c->bias_grad = *l.bias_grad;
      }
      break;
    }
    case Pass::wgrad: {
      for (const auto& [t, name] : {std::pair{l.x, "X"}, std::pair{l.dy, "dY"}, std::pair{l.out, "dW"}}) {
        const Prediction p = check(t, name);
        if (p.verdict == Verdict::invalid) return p;
      }
      const int64_t tokens = l.x->rows, in = l.x->cols, out = l.dy->cols;
      if (l.dy->rows != tokens) return refused("wgrad: dY's rows != tokens");
      if (l.out->rows != out || l.out->cols != in) return refused("wgrad: dW is not [out, in]");
      if (l.bias_grad != nullptr && l.bias_grad->length != out) return refused("wgrad: bias_grad length != out_features");
      // wgrad: A = X (N), B = dY (T), D = dW; gemm_m = in, gemm_n = out, gemm_k = tokens.
      c->a = column_major(*l.x);
      c->transa = EPIGEMM_OP_N;
      c->b = column_major(*l.dy);
      c->transb = EPIGEMM_OP_T;
      c->d = column_major(*l.out);
      c->beta = l.accumulate ? 1.0f : 0.0f;
      c->epilogue = l.bias_grad ? EPIGEMM_EPILOGUE_BGRADB : EPIGEMM_EPILOGUE_DEFAULT;
      if (l.bias_grad) {
        c->has_bias_grad = true;
        c->bias_grad = *l.bias_grad;
      }
      break;
    }
  }
  if (l.pre_act != nullptr && l.pass != Pass::wgrad) {
    c->has_aux = true;
    c->aux = column_major(*l.pre_act);
  }
  return check_gemm(c, machine);
}

Prediction check_linear_workspace_size(int64_t tokens, int64_t in, int64_t out, int dtype,
                                       int memory, int backend, const Machine& machine) {
  if (tokens < 0 || in < 0 || out < 0) return refused("negative layer size");
  if (!dtype_known(dtype)) return refused("dtype not f32/f16/bf16");
  if (!memory_known(memory)) return refused("memory not host/device");
  // The tensors of the three passes at these sizes, each dense: [rows, cols] with stride max(1, cols).
  const int64_t shapes[][2] = {{tokens, in}, {out, in}, {tokens, out}};
  for (const auto& shape : shapes) {
    if (strided_span(shape[1], shape[0], std::max<int64_t>(1, shape[1]), dtype) < 0) {
      return refused("a tensor of these sizes spans more than 2^60 bytes");
    }
  }
  // A backend asked by name that cannot run these calls needs no workspace for them (§4: the
  // query answers what the calls need; those calls will answer NOT_SUPPORTED themselves).
  if (backend != EPIGEMM_BACKEND_AUTO) return fine();
  return backend_verdict(backend, memory, machine);
}

Access accessed(const GemmMeaning& c) {
  // §4, "Degenerate sizes": the product needs gemm_m, gemm_n > 0; a bias gradient over op(B)'s
  // columns (op(A)'s rows) is still written when gemm_m (gemm_n) is 0, from B (A) when gemm_k > 0.
  Access a;
  const BiasGradPart sums = epilogue_parts(c.epilogue).bias_grad;
  const bool product = c.gemm_m > 0 && c.gemm_n > 0;
  a.a = (product && c.gemm_k > 0) || (sums == BiasGradPart::rows_of_op_a && c.gemm_m > 0 && c.gemm_k > 0);
  a.b = (product && c.gemm_k > 0) || (sums == BiasGradPart::columns_of_op_b && c.gemm_n > 0 && c.gemm_k > 0);
  a.d = product;
  a.bias = c.has_bias && product;
  a.aux = c.has_aux && product;
  a.bias_grad = c.has_bias_grad && c.bias_grad.length > 0;
  return a;
}

}  // namespace epigemm_fuzz
