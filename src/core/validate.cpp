// Checks of docs/conventions.md "Errors": each failure names the argument, the value given and
// the value expected, and happens before any output is touched.
#include "core/validate.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>

#include "core/epilogue_math.hpp"
#include "core/epilogue_parts.hpp"
#include "core/names.hpp"
#include "core/numeric.hpp"

namespace epigemm {
namespace {

bool memory_valid(epigemm_memory_t m) {
  return m == EPIGEMM_MEMORY_HOST || m == EPIGEMM_MEMORY_DEVICE;
}
bool op_valid(epigemm_op_t op) { return op == EPIGEMM_OP_N || op == EPIGEMM_OP_T; }

const char* memory_name(epigemm_memory_t m) {
  return m == EPIGEMM_MEMORY_DEVICE ? "device" : "host";
}

// Largest byte extent we accept for one operand: keeps every offset computation in int64.
constexpr int64_t kMaxBytes = int64_t(1) << 60;

// The bytes a column-major matrix spans from its first element: ((cols-1) ld + rows) * size.
// 0 when it has no elements. Only called on matrices that passed check_matrix.
int64_t matrix_span_bytes(const Matrix& m) {
  if (m.rows == 0 || m.cols == 0) return 0;
  return ((m.cols - 1) * m.ld + m.rows) * int64_t(dtype_size(m.dtype));
}

Status check_matrix(const Matrix& m, const char* name) {
  EPIGEMM_RETURN_IF_ERROR(check_dtype_and_memory(name, m.dtype, m.memory));
  if (m.rows < 0) return invalid(name, " has ", m.rows, " rows; expected rows >= 0");
  if (m.cols < 0) return invalid(name, " has ", m.cols, " columns; expected columns >= 0");
  const int64_t min_ld = std::max<int64_t>(1, m.rows);
  if (m.ld < min_ld) {
    return invalid(name, " has ld = ", m.ld, "; expected ld >= max(1, rows) = ", min_ld);
  }
  if (m.rows > 0 && m.cols > 0) {
    if (m.data == nullptr) {
      return invalid(name, " has data = NULL; expected a pointer to ", m.rows, " x ", m.cols,
                     " elements");
    }
    EPIGEMM_RETURN_IF_ERROR(check_span(name, m.rows, m.cols, m.ld, "ld", m.dtype));
  }
  return Status();
}

Status check_vector(const Vector& v, const char* name) {
  EPIGEMM_RETURN_IF_ERROR(check_dtype_and_memory(name, v.dtype, v.memory));
  if (v.length < 0) return invalid(name, " has length ", v.length, "; expected length >= 0");
  const int64_t max_length = kMaxBytes / int64_t(dtype_size(v.dtype));
  if (v.length > max_length) {
    return invalid(name, " has length ", v.length, "; expected at most 2^60 bytes = ", max_length,
                   " elements of ", dtype_name(v.dtype));
  }
  if (v.length > 0 && v.data == nullptr) {
    return invalid(name, " has data = NULL; expected a pointer to ", v.length, " elements");
  }
  return Status();
}

// Where an expected extent comes from, as a message puts it: " (the columns of A, transa = N)";
// nothing where `dimension` is null. Streamed only into a message, so a call that passes its
// checks builds no string (validate_gemm_call runs on every call).
struct ExtentSource {
  const char* dimension = nullptr;  // "rows" or "columns"
  const char* operand = nullptr;
  const char* why = nullptr;  // "transa = N"
};
std::ostream& operator<<(std::ostream& out, const ExtentSource& source) {
  if (source.dimension != nullptr) {
    out << " (the " << source.dimension << " of " << source.operand << ", " << source.why << ")";
  }
  return out;
}

// The epilogue's label in a message ("GELU_AUX_BIAS", "ACT_BIAS(silu)"), built only when one is.
struct EpilogueName {
  epigemm_epilogue_t epilogue;
  epigemm_activation_t activation;
};
std::ostream& operator<<(std::ostream& out, const EpilogueName& name) {
  return out << epilogue_label(name.epilogue, name.activation);
}

// "B has 8 rows; transb = N needs gemm_k = 7 (the columns of A, transa = N)". `why` is anything
// a message can stream (a string, an EpilogueName).
template <typename Why>
Status check_extent(const char* name, const char* what, int64_t given, int64_t expected,
                    const char* expected_name, const Why& why, const ExtentSource& source = ExtentSource()) {
  if (given != expected) {
    return invalid(name, " has ", given, " ", what, "; ", why, " needs ", expected_name, " = ",
                   expected, source);
  }
  return Status();
}

struct Span {
  const char* name;
  uintptr_t begin;
  uintptr_t end;  // one past the last byte
};

Span span_of(const Matrix& m, const char* name) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(m.data);
  return Span{name, begin, begin + uintptr_t(matrix_span_bytes(m))};
}
Span span_of(const Vector& v, const char* name) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(v.data);
  return Span{name, begin, begin + uintptr_t(v.length) * dtype_size(v.dtype)};
}
// "[0x7f..00, +468 bytes)"
std::string describe(const Span& s) {
  std::ostringstream out;
  out << "[0x" << std::hex << s.begin << std::dec << ", +" << (s.end - s.begin) << " bytes)";
  return out.str();
}
bool overlap(const Span& x, const Span& y) {
  return x.begin < x.end && y.begin < y.end && x.begin < y.end && y.begin < x.end;
}

}  // namespace

Status check_dtype_and_memory(const char* name, epigemm_dtype_t dtype, epigemm_memory_t memory) {
  if (!dtype_valid(dtype)) return invalid(name, " has dtype value ", int(dtype), "; expected f32 (0), f16 (1) or bf16 (2)");
  if (!memory_valid(memory)) return invalid(name, " has memory value ", int(memory), "; expected host (0) or device (1)");
  return Status();
}

Status check_span(const char* name, int64_t inner, int64_t outer, int64_t stride,
                  const char* stride_name, epigemm_dtype_t dtype) {
  if (inner <= 0 || outer <= 0) return Status();
  const int64_t size = int64_t(dtype_size(dtype));
  // ((outer - 1) * stride + inner) * size <= 2^60, evaluated without overflow (stride >= inner).
  const int64_t max_elements = kMaxBytes / size;
  if (inner > max_elements || outer - 1 > (max_elements - inner) / stride) {
    return invalid(name, " spans ((", outer, " - 1) * ", stride_name, " ", stride, " + ", inner,
                   ") elements of ", size, " bytes; expected at most 2^60 = ", kMaxBytes,
                   " bytes");
  }
  return Status();
}

void gemm_dims_from_operands(GemmCall* call) {
  const bool ta = call->transa == EPIGEMM_OP_T, tb = call->transb == EPIGEMM_OP_T;
  call->gemm_m = ta ? call->a.cols : call->a.rows;
  call->gemm_k = ta ? call->a.rows : call->a.cols;
  call->gemm_n = tb ? call->b.rows : call->b.cols;
}

Status check_activation(epigemm_activation_t activation) {
  if (activation_value_valid(activation)) return Status();
  // "0 (identity) .. 4 (silu)": the registry's first and last entries.
  int first = -1, last = -1;
  const char* first_name = "";
  const char* last_name = "";
#define EPIGEMM_ACTIVATION_RANGE(value, functor, name) \
  if (first < 0) first = int(value), first_name = name; \
  last = int(value), last_name = name;
  EPIGEMM_FOR_EACH_ACTIVATION(EPIGEMM_ACTIVATION_RANGE)
#undef EPIGEMM_ACTIVATION_RANGE
  return invalid("activation has value ", int(activation), "; expected ", first, " (", first_name, ") .. ",
                 last, " (", last_name, ")");
}

Status validate_enums(const GemmCall& call) {
  if (!op_valid(call.transa)) return invalid("transa has value ", int(call.transa), "; expected N (0) or T (1)");
  if (!op_valid(call.transb)) return invalid("transb has value ", int(call.transb), "; expected N (0) or T (1)");
  if (!epilogue_value_valid(call.epilogue)) {
    return invalid("epilogue has value ", int(call.epilogue), "; expected 0 (DEFAULT) .. 9 (ACT_BIAS)");
  }
  EPIGEMM_RETURN_IF_ERROR(check_activation(call.activation));
  if (int(call.backend) < EPIGEMM_BACKEND_AUTO || int(call.backend) > EPIGEMM_BACKEND_CUTLASS) {
    return invalid("backend has value ", int(call.backend), "; expected 0 (auto) .. 5 (cutlass)");
  }
  return Status();
}

Status validate_gemm_call(const GemmCall& call) {
  EPIGEMM_RETURN_IF_ERROR(validate_enums(call));
  const OperandNames& n = call.names;
  EPIGEMM_RETURN_IF_ERROR(check_matrix(call.a, n.a));
  EPIGEMM_RETURN_IF_ERROR(check_matrix(call.b, n.b));
  EPIGEMM_RETURN_IF_ERROR(check_matrix(call.d, n.d));

  // Shapes (docs/conventions.md, "Layout"): op(A) gemm_m x gemm_k, op(B) gemm_k x gemm_n.
  // gemm_m and gemm_k come from A, gemm_n from B, so a mismatch names where each came from.
  const bool ta = call.transa == EPIGEMM_OP_T, tb = call.transb == EPIGEMM_OP_T;
  const char* a_why = ta ? "transa = T" : "transa = N";
  const char* b_why = tb ? "transb = T" : "transb = N";
  const ExtentSource from_m{ta ? "columns" : "rows", n.a, a_why};
  const ExtentSource from_k{ta ? "rows" : "columns", n.a, a_why};
  const ExtentSource from_n{tb ? "rows" : "columns", n.b, b_why};
  EPIGEMM_RETURN_IF_ERROR(check_extent(n.a, "rows", call.a.rows, ta ? call.gemm_k : call.gemm_m,
                                       ta ? "gemm_k" : "gemm_m", a_why));
  EPIGEMM_RETURN_IF_ERROR(check_extent(n.a, "columns", call.a.cols, ta ? call.gemm_m : call.gemm_k,
                                       ta ? "gemm_m" : "gemm_k", a_why));
  EPIGEMM_RETURN_IF_ERROR(check_extent(n.b, "rows", call.b.rows, tb ? call.gemm_n : call.gemm_k,
                                       tb ? "gemm_n" : "gemm_k", b_why, tb ? ExtentSource() : from_k));
  EPIGEMM_RETURN_IF_ERROR(check_extent(n.b, "columns", call.b.cols, tb ? call.gemm_k : call.gemm_n,
                                       tb ? "gemm_k" : "gemm_n", b_why, tb ? from_k : ExtentSource()));
  EPIGEMM_RETURN_IF_ERROR(check_extent(n.d, "rows", call.d.rows, call.gemm_m, "gemm_m",
                                       "the product", from_m));
  EPIGEMM_RETURN_IF_ERROR(check_extent(n.d, "columns", call.d.cols, call.gemm_n, "gemm_n",
                                       "the product", from_n));

  // Dtypes (docs/conventions.md, "Data types").
  if (call.b.dtype != call.a.dtype) {
    return invalid(n.b, " has dtype ", dtype_name(call.b.dtype), "; expected ",
                   dtype_name(call.a.dtype), " (the dtype of ", n.a, ")");
  }
  if (call.d.dtype != EPIGEMM_DTYPE_F32 && call.d.dtype != call.a.dtype) {
    return call.a.dtype == EPIGEMM_DTYPE_F32
               ? invalid(n.d, " has dtype ", dtype_name(call.d.dtype), "; expected f32 (the dtype of ",
                         n.a, ")")
               : invalid(n.d, " has dtype ", dtype_name(call.d.dtype), "; expected f32 or ",
                         dtype_name(call.a.dtype), " (the dtype of ", n.a, ")");
  }

  // The operands the epilogue's parts use, and no others (epilogue_parts.hpp).
  const EpilogueParts parts = call.parts();
  const EpilogueName ename{call.epilogue, call.activation};
  if (parts.reads_bias() != call.has_bias) {
    return call.has_bias
               ? invalid(n.bias, " is set; epilogue ", ename, " does not read a bias (expected none)")
               : invalid(n.bias, " is missing; epilogue ", ename, " needs a bias of length gemm_m = ", call.gemm_m);
  }
  if (parts.uses_aux() != call.has_aux) {
    return call.has_aux
               ? invalid(n.aux, " is set; epilogue ", ename, " does not use aux (expected none)")
               : invalid(n.aux, " is missing; epilogue ", ename, " needs aux of ", call.gemm_m,
                         " x ", call.gemm_n, parts.writes_aux() ? " (out)" : " (in)");
  }
  if (parts.writes_bias_grad() != call.has_bias_grad) {
    return call.has_bias_grad
               ? invalid(n.bias_grad, " is set; epilogue ", ename, " does not write a bias gradient (expected none)")
               : invalid(n.bias_grad, " is missing; epilogue ", ename, " needs bias_grad of length ",
                         parts.bias_grad_dimension(), " = ", call.bias_grad_length());
  }
  if (call.has_bias) {
    EPIGEMM_RETURN_IF_ERROR(check_vector(call.bias, n.bias));
    EPIGEMM_RETURN_IF_ERROR(check_extent(n.bias, "elements", call.bias.length, call.gemm_m, "gemm_m", ename));
  }
  if (call.has_aux) {
    EPIGEMM_RETURN_IF_ERROR(check_matrix(call.aux, n.aux));
    EPIGEMM_RETURN_IF_ERROR(check_extent(n.aux, "rows", call.aux.rows, call.gemm_m, "gemm_m", ename));
    EPIGEMM_RETURN_IF_ERROR(check_extent(n.aux, "columns", call.aux.cols, call.gemm_n, "gemm_n", ename));
  }
  if (call.has_bias_grad) {
    EPIGEMM_RETURN_IF_ERROR(check_vector(call.bias_grad, n.bias_grad));
    EPIGEMM_RETURN_IF_ERROR(check_extent(n.bias_grad, "elements", call.bias_grad.length,
                                         call.bias_grad_length(), parts.bias_grad_dimension(), ename));
  }

  // One memory space for every operand.
  const epigemm_memory_t mem = call.d.memory;
  struct Placed { const char* name; epigemm_memory_t memory; bool present; };
  const Placed placed[] = {{n.a, call.a.memory, true},
                           {n.b, call.b.memory, true},
                           {n.bias, call.bias.memory, call.has_bias},
                           {n.aux, call.aux.memory, call.has_aux},
                           {n.bias_grad, call.bias_grad.memory, call.has_bias_grad}};
  for (const Placed& p : placed) {
    if (p.present && p.memory != mem) {
      return invalid(p.name, " is in ", memory_name(p.memory), " memory; expected ",
                     memory_name(mem), " memory like ", n.d);
    }
  }

  // Outputs overlap neither the inputs nor each other (by address range, conservatively).
  Span outputs[3];
  int output_count = 0;
  outputs[output_count++] = span_of(call.d, n.d);
  if (call.has_aux && parts.writes_aux()) outputs[output_count++] = span_of(call.aux, n.aux);
  if (call.has_bias_grad) outputs[output_count++] = span_of(call.bias_grad, n.bias_grad);
  Span inputs[4];
  int input_count = 0;
  inputs[input_count++] = span_of(call.a, n.a);
  inputs[input_count++] = span_of(call.b, n.b);
  if (call.has_bias) inputs[input_count++] = span_of(call.bias, n.bias);
  if (call.has_aux && parts.reads_aux()) inputs[input_count++] = span_of(call.aux, n.aux);
  for (int i = 0; i < output_count; ++i) {
    for (int j = 0; j < input_count; ++j) {
      if (overlap(outputs[i], inputs[j])) {
        return invalid(outputs[i].name, " (output) ", describe(outputs[i]), " overlaps ",
                       inputs[j].name, " (input) ", describe(inputs[j]),
                       "; expected disjoint buffers");
      }
    }
    for (int j = i + 1; j < output_count; ++j) {
      if (overlap(outputs[i], outputs[j])) {
        return invalid(outputs[i].name, " (output) ", describe(outputs[i]), " overlaps ",
                       outputs[j].name, " (output) ", describe(outputs[j]),
                       "; expected disjoint output buffers");
      }
    }
  }

  // The workspace is scratch the backend writes: it overlaps no operand either.
  if (call.workspace != nullptr && call.workspace_bytes > 0) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(call.workspace);
    const uintptr_t room = std::numeric_limits<uintptr_t>::max() - begin;
    const Span scratch{"workspace", begin, begin + std::min<uintptr_t>(call.workspace_bytes, room)};
    for (int i = 0; i < output_count + input_count; ++i) {
      const bool is_output = i < output_count;
      const Span& other = is_output ? outputs[i] : inputs[i - output_count];
      if (overlap(scratch, other)) {
        return invalid("workspace (scratch) ", describe(scratch), " overlaps ", other.name,
                       is_output ? " (output) " : " (input) ", describe(other),
                       "; expected disjoint buffers");
      }
    }
  }
  return Status();
}

std::string operand_off_its_element_size(const GemmCall& call) {
  struct Placed {
    const char* name;
    const void* data;
    epigemm_dtype_t dtype;
    bool present;
  };
  const Placed operands[] = {{call.names.a, call.a.data, call.a.dtype, true},
                             {call.names.b, call.b.data, call.b.dtype, true},
                             {call.names.d, call.d.data, call.d.dtype, true},
                             {call.names.bias, call.bias.data, call.bias.dtype, call.has_bias},
                             {call.names.aux, call.aux.data, call.aux.dtype, call.has_aux},
                             {call.names.bias_grad, call.bias_grad.data, call.bias_grad.dtype,
                              call.has_bias_grad}};
  for (const Placed& operand : operands) {
    const size_t size = dtype_size(operand.dtype);
    const uintptr_t address = reinterpret_cast<uintptr_t>(operand.data);
    if (operand.present && address % size != 0) {
      std::ostringstream why;
      why << operand.name << " (" << dtype_name(operand.dtype) << ") is at 0x" << std::hex << address
          << std::dec << ", not a multiple of its element size " << size;
      return why.str();
    }
  }
  return std::string();
}

}  // namespace epigemm
