// A libFuzzer target for the C API (epigemm.h), built with clang, AddressSanitizer and
// UndefinedBehaviorSanitizer (-DEPIGEMM_FUZZ=ON -DEPIGEMM_SANITIZE=address,undefined;
// scripts/sanitize.sh). Each input is one call:
//   - an entry point: epigemm_gemm or its workspace query, the classic call or its query, a layer
//     call (fprop, dgrad, wgrad, and fprop_act / dgrad_act with an activation), the layer
//     workspace query, or a handle misused (destroyed, of the other kind, garbage);
//   - for epigemm_gemm every epilogue (0..9) and activation (0..4, or left at the description's
//     default), each sometimes given as any int;
//   - shapes built to fit most of the time (small sizes, sometimes huge ones beside an empty
//     dimension), then a few fields broken: sizes, leading dimensions, dtypes, memory, enums given
//     as any int, NULL data, data shifted off its element alignment, an output placed inside
//     another operand, the workspace short, missing or overlapping;
//   - every buffer in its own allocation with guard bytes on both sides; inputs hold small exact
//     values, outputs a NaN poison.
// The validity oracle (validity_oracle.cpp, written from docs/conventions.md alone) predicts the
// status; the target then checks:
//   - the status is the predicted one (INVALID_VALUE / NOT_SUPPORTED / SUCCESS, or
//     INSUFFICIENT_WORKSPACE for a workspace below what the size query answered, which must
//     agree with the call);
//   - a call that fails changed no byte of any buffer, guards included;
//   - a call that succeeds changed no input, no guard and no padding between columns, wrote every
//     output element, and matches the same GEMM recomputed on the reference backend (restored
//     inputs, the oracle's mapping of the call to GEMM coordinates) within a tolerance from the
//     dtypes and the magnitude of each element's terms.
// A mismatch prints the call and aborts, which libFuzzer reports with the input that caused it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "epigemm/epigemm.h"
#include "validity_oracle.hpp"

namespace epigemm_fuzz {
namespace {

// ---- reading the input ------------------------------------------------------------------------

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  // One of `count` choices; 0 once the input is used up.
  int pick(int count) { return byte() % count; }
  bool one_in(int n) { return pick(n) == 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// A size: mostly 0..9; sometimes a value at a boundary (2^31, 2^62, negative, ...).
int64_t size_value(Input& in) {
  const uint8_t b = in.byte();
  if (b < 224) return b % 10;
  static const int64_t kEdges[] = {-1, -7, int64_t(1) << 31, (int64_t(1) << 31) - 1,
                                   (int64_t(1) << 32) + 3, int64_t(1) << 40, int64_t(1) << 57,
                                   int64_t(1) << 61, int64_t(1) << 62, INT64_MAX, INT64_MIN, 11,
                                   16, 17, 33, 64};
  return kEdges[b % 16];
}

// An enum argument: mostly one of its `count` values, sometimes any int.
int enum_value(Input& in, int count) {
  const uint8_t b = in.byte();
  if (b < 240) return b % count;
  static const int kOdd[] = {-1, count, count + 1, 99, INT32_MAX, INT32_MIN, 7, 1000};
  return kOdd[b % 8];
}

// a + b, held at the int64 range's ends (the sizes here reach INT64_MAX).
int64_t add(int64_t a, int64_t b) {
  int64_t sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

float scalar_value(Input& in) {
  static const float kScalars[] = {1.0f, 0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -0.25f, 3.0f};
  return kScalars[in.pick(8)];
}

// ---- guarded buffers --------------------------------------------------------------------------

constexpr size_t kGuardBytes = 32;
constexpr uint8_t kGuardByte = 0xa7;
constexpr int64_t kMaxBufferBytes = int64_t(1) << 20;  // larger spans get an address never touched
constexpr uint8_t kPoisonByte = 0xff;                  // f32, f16 and bf16 NaN

int64_t element_size(int dtype) { return dtype == EPIGEMM_DTYPE_F32 ? 4 : 2; }

// Encodes v (a multiple of 1/32 in [-4, 4]: exact in every dtype) as element `index`.
void store(void* data, int dtype, int64_t index, double v) {
  const float f = float(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  unsigned char* p = static_cast<unsigned char*>(data);
  if (dtype == EPIGEMM_DTYPE_F16) {
    // Exact: |v| <= 4 with at most 7 significant bits, normal in f16.
    uint16_t h = 0;
    if (f != 0.0f) {
      const int exponent = int((bits >> 23) & 0xff) - 127 + 15;
      h = uint16_t(((bits >> 16) & 0x8000u) | uint32_t(exponent << 10) | ((bits >> 13) & 0x3ffu));
    } else {
      h = uint16_t((bits >> 16) & 0x8000u);
    }
    std::memcpy(p + index * 2, &h, 2);
  } else if (dtype == EPIGEMM_DTYPE_BF16) {
    const uint16_t h = uint16_t(bits >> 16);
    std::memcpy(p + index * 2, &h, 2);
  } else {
    std::memcpy(p + index * 4, &f, 4);
  }
}

double load(const void* data, int dtype, int64_t index) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  if (dtype == EPIGEMM_DTYPE_F32) {
    float f;
    std::memcpy(&f, p + index * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + index * 2, 2);
  if (dtype == EPIGEMM_DTYPE_BF16) {
    const uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(double(mantissa), -24);
  return sign * std::ldexp(double(mantissa | 0x400), exponent - 25);
}

// One operand's storage: its own allocation, guard bytes before and after the span, and an offset
// of 0..3 bytes off its element alignment when asked. A span beyond kMaxBufferBytes gets no
// storage but a non-canonical address (any access faults); the target runs such a call only when
// the oracle says that operand is not touched.
class Buffer {
 public:
  Buffer() = default;
  Buffer(int64_t span, int shift, int slot) : span_(span) {
    if (span < 0 || span > kMaxBufferBytes) {
      data_ = reinterpret_cast<unsigned char*>(uintptr_t(slot + 1) << 60);  // 2^60 apart: disjoint
      fake_ = true;
      return;
    }
    storage_.assign(size_t(kGuardBytes + size_t(shift) + size_t(span) + kGuardBytes), kGuardByte);
    data_ = storage_.data() + kGuardBytes + shift;
  }
  void* data() const { return data_; }
  bool fake() const { return fake_; }
  int64_t span() const { return span_; }
  const std::vector<unsigned char>& bytes() const { return storage_; }
  std::vector<unsigned char>& bytes() { return storage_; }
  void fill(uint8_t byte) {
    if (!fake_ && span_ > 0) std::memset(data_, byte, size_t(span_));
  }

 private:
  std::vector<unsigned char> storage_;
  unsigned char* data_ = nullptr;
  int64_t span_ = 0;
  bool fake_ = false;
};

// ---- one call ---------------------------------------------------------------------------------

enum class Entry {
  gemm, gemm_size, classic, classic_size, fprop, dgrad, wgrad, linear_size, handles, fprop_act, dgrad_act, count
};
enum Slot { kSlotA, kSlotB, kSlotD, kSlotAux, kSlotBias, kSlotBiasGrad, kSlotWorkspace, kSlots };
const char* const kSlotNames[kSlots] = {"A", "B", "D", "aux", "bias", "bias_grad", "workspace"};

[[noreturn]] void finding(const std::string& what, const std::string& call) {
  std::fprintf(stderr, "\n==== epigemm fuzz finding: %s\n     call: %s\n", what.c_str(), call.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string describe_matrix(const char* name, const epigemm_matrix_t& m) {
  char text[256];
  std::snprintf(text, sizeof text, " %s{%p dtype=%d %lldx%lld ld=%lld mem=%d}", name, m.data, int(m.dtype),
                static_cast<long long>(m.rows), static_cast<long long>(m.cols),
                static_cast<long long>(m.ld), int(m.memory));
  return text;
}
std::string describe_vector(const char* name, const epigemm_vector_t& v) {
  char text[160];
  std::snprintf(text, sizeof text, " %s{%p dtype=%d len=%lld mem=%d}", name, v.data, int(v.dtype),
                static_cast<long long>(v.length), int(v.memory));
  return text;
}
std::string describe(const GemmMeaning& c) {
  char head[200];
  std::snprintf(head, sizeof head,
                "transa=%d transb=%d epilogue=%d activation=%d backend=%d alpha=%g beta=%g ws=%p+%zu",
                c.transa, c.transb, c.epilogue, c.activation, c.backend, double(c.alpha), double(c.beta),
                c.workspace, c.workspace_bytes);
  std::string s = head;
  s += describe_matrix("A", c.a) + describe_matrix("B", c.b) + describe_matrix("D", c.d);
  if (c.has_aux) s += describe_matrix("aux", c.aux);
  if (c.has_bias) s += describe_vector("bias", c.bias);
  if (c.has_bias_grad) s += describe_vector("bias_grad", c.bias_grad);
  return s;
}

// The process-wide state: one context per run of the target (a context is cheap, but creating
// one per input would dominate the run time), its default backend tracked here.
struct Process {
  epigemm_context_t ctx = nullptr;
  Machine machine;
  Process() {
    if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) std::abort();
    for (int b = 0; b < 6; ++b) machine.usable[b] = epigemm_backend_usable(ctx, epigemm_backend_t(b)) != 0;
  }
};

Process& process() {
  static Process p;
  return p;
}

// The operands of one call, as matrices and vectors in GEMM coordinates (layer tensors are kept
// beside them), with their buffers.
struct Call {
  Entry entry = Entry::gemm;
  GemmMeaning g;  // what is passed (GEMM level) or what the oracle maps it to (classic, layer)
  // Layer level: tensors as passed.
  epigemm_tensor_t x{}, w{}, dy{}, out{}, pre{};
  bool with_x = true, with_w = true, with_dy = true, with_out = true;
  bool with_pre = false, with_bias = false, with_bias_grad = false;
  Pass pass = Pass::fprop;
  bool layer_activation = false;  // fprop_act / dgrad_act; the activation is g.activation
  // epigemm_gemm: whether set_activation is called (else the description's default, gelu_tanh).
  bool activation_set = true;
  int grad = 0, accumulate = 0;
  Buffer buffers[kSlots];
  std::vector<unsigned char> before[kSlots];
  std::string text;
  // The workspace offered (possibly inside the buffer of an operand the call does not take):
  // scratch the backend may write.
  const void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// A matrix of rows x cols with a padded ld, dtype and memory as drawn.
epigemm_matrix_t make_matrix(Input& in, int64_t rows, int64_t cols, int dtype) {
  const int64_t pad = in.one_in(3) ? in.pick(3) : 0;
  const int64_t ld = add(rows < 1 ? 1 : rows, pad);
  return epigemm_matrix_t{nullptr, epigemm_dtype_t(dtype), rows, cols, ld, EPIGEMM_MEMORY_HOST};
}

// Breaks one field of one operand.
void mutate_matrix(Input& in, epigemm_matrix_t* m) {
  switch (in.pick(7)) {
    case 0: m->rows = size_value(in); break;
    case 1: m->cols = size_value(in); break;
    case 2: m->ld = size_value(in); break;
    case 3: m->dtype = epigemm_dtype_t(enum_value(in, 3)); break;
    case 4: m->memory = epigemm_memory_t(enum_value(in, 2)); break;
    case 5: m->ld = add(m->rows, 1 + in.pick(4)); break;
    default: m->rows = add(m->rows, 1); break;
  }
}
void mutate_vector(Input& in, epigemm_vector_t* v) {
  switch (in.pick(4)) {
    case 0: v->length = size_value(in); break;
    case 1: v->dtype = epigemm_dtype_t(enum_value(in, 3)); break;
    case 2: v->memory = epigemm_memory_t(enum_value(in, 2)); break;
    default: v->length = add(v->length, 1); break;
  }
}

// Input values k/32, k in [-128, 128]: exact in every dtype, small enough that no result of these
// sizes overflows.
void fill_values(void* data, int64_t span, int dtype, uint32_t seed) {
  if (span <= 0) return;
  uint32_t state = seed | 1u;
  for (int64_t i = 0; i < span / element_size(dtype); ++i) {
    state = state * 1664525u + 1013904223u;
    store(data, dtype, i, double(int((state >> 16) % 257) - 128) / 32.0);
  }
}

// Allocates the buffer of a slot for a matrix / vector, and points its data there: NULL
// sometimes, shifted 1..3 bytes sometimes.
void place(Input& in, Call& call, Slot slot, void** data, int64_t span, int dtype) {
  const int mode = in.pick(16);
  const int shift = mode == 1 ? 1 + in.pick(3) : 0;
  call.buffers[slot] = Buffer(span, shift, slot);
  *data = mode == 0 ? nullptr : call.buffers[slot].data();
  // Inputs: values k/32 in [-4, 4]; outputs get the poison afterwards.
  Buffer& b = call.buffers[slot];
  if (!b.fake() && *data != nullptr) fill_values(b.data(), span, dtype, in.u32());
}

// The bytes to allocate for an operand: its span when its sizes make sense, else none.
int64_t matrix_span_or_zero(const epigemm_matrix_t& m) {
  if (m.rows < 0 || m.cols < 0 || m.ld < m.rows || m.ld < 1 || int(m.dtype) < 0 || int(m.dtype) > 2) return 0;
  return span_bytes(m);
}
int64_t vector_span_or_zero(const epigemm_vector_t& v) {
  return v.length < 0 || int(v.dtype) < 0 || int(v.dtype) > 2 ? 0 : span_bytes(v);
}

// The output buffers get the poison (their elements must all be written by a call that runs).
void poison_outputs(Call& call, const GemmMeaning& g) {
  if (g.beta == 0.0f) call.buffers[kSlotD].fill(kPoisonByte);  // else D is read: it keeps its values
  if (g.has_aux && writes_aux(g.epilogue)) call.buffers[kSlotAux].fill(kPoisonByte);
  if (g.has_bias_grad) call.buffers[kSlotBiasGrad].fill(kPoisonByte);
}

// Puts an output's data inside another operand's buffer (an overlap the call must refuse).
void maybe_overlap(Input& in, Call& call, void** output_data, int64_t output_span) {
  if (!in.one_in(24) || output_span <= 0) return;
  const Slot target = Slot(in.pick(kSlotBiasGrad + 1));
  const Buffer& b = call.buffers[target];
  if (b.fake() || b.span() <= 0 || b.data() == *output_data) return;
  *output_data = static_cast<unsigned char*>(b.data()) + in.pick(int(b.span() < 64 ? b.span() : 64));
}

// ---- building the calls -----------------------------------------------------------------------

void build_gemm_level(Input& in, Call& call) {
  GemmMeaning& g = call.g;
  const int64_t m = size_value(in), n = size_value(in), k = size_value(in);
  g.transa = enum_value(in, 2);
  g.transb = enum_value(in, 2);
  g.epilogue = enum_value(in, 10);
  g.backend = enum_value(in, 3);  // auto, reference, cpu mostly; cuda / cublaslt / cutlass / any int rarely
  // The activation: left at the default sometimes; any int sometimes, refused whatever the epilogue.
  call.activation_set = !in.one_in(4);
  g.activation = call.activation_set ? enum_value(in, 5) : EPIGEMM_ACTIVATION_GELU_TANH;
  g.alpha = scalar_value(in);
  g.beta = in.one_in(3) ? scalar_value(in) : 0.0f;
  const int ab = in.pick(3);
  const int d_dtype = in.one_in(2) ? EPIGEMM_DTYPE_F32 : ab;
  const bool ta = g.transa == 1, tb = g.transb == 1;
  g.a = ta ? make_matrix(in, k, m, ab) : make_matrix(in, m, k, ab);
  g.b = tb ? make_matrix(in, n, k, ab) : make_matrix(in, k, n, ab);
  g.d = make_matrix(in, m, n, d_dtype);
  const int e = g.epilogue;
  g.has_bias = reads_bias(e) != in.one_in(40);
  g.has_aux = (reads_aux(e) || writes_aux(e)) != in.one_in(40);
  g.has_bias_grad = writes_bias_grad(e) != in.one_in(40);
  g.aux = make_matrix(in, m, n, in.pick(3));
  g.bias = epigemm_vector_t{nullptr, epigemm_dtype_t(in.pick(3)), m, EPIGEMM_MEMORY_HOST};
  g.bias_grad = epigemm_vector_t{nullptr, epigemm_dtype_t(in.pick(3)), bias_grad_length(e, m, n), EPIGEMM_MEMORY_HOST};
  if (in.one_in(20)) {
    // Everything on the device: valid, and only a device backend can run it.
    g.a.memory = g.b.memory = g.d.memory = g.aux.memory = EPIGEMM_MEMORY_DEVICE;
    g.bias.memory = g.bias_grad.memory = EPIGEMM_MEMORY_DEVICE;
  }
  for (int mutations = in.pick(8) < 5 ? 0 : 1 + in.pick(2); mutations > 0; --mutations) {
    switch (in.pick(6)) {
      case 0: mutate_matrix(in, &g.a); break;
      case 1: mutate_matrix(in, &g.b); break;
      case 2: mutate_matrix(in, &g.d); break;
      case 3: mutate_matrix(in, &g.aux); break;
      case 4: mutate_vector(in, &g.bias); break;
      default: mutate_vector(in, &g.bias_grad); break;
    }
  }
  place(in, call, kSlotA, &g.a.data, matrix_span_or_zero(g.a), int(g.a.dtype));
  place(in, call, kSlotB, &g.b.data, matrix_span_or_zero(g.b), int(g.b.dtype));
  place(in, call, kSlotD, &g.d.data, matrix_span_or_zero(g.d), int(g.d.dtype));
  place(in, call, kSlotAux, &g.aux.data, matrix_span_or_zero(g.aux), int(g.aux.dtype));
  place(in, call, kSlotBias, &g.bias.data, vector_span_or_zero(g.bias), int(g.bias.dtype));
  place(in, call, kSlotBiasGrad, &g.bias_grad.data, vector_span_or_zero(g.bias_grad), int(g.bias_grad.dtype));
  maybe_overlap(in, call, &g.d.data, matrix_span_or_zero(g.d));
  if (writes_aux(e)) maybe_overlap(in, call, &g.aux.data, matrix_span_or_zero(g.aux));
  maybe_overlap(in, call, &g.bias_grad.data, vector_span_or_zero(g.bias_grad));
  poison_outputs(call, g);
}

epigemm_tensor_t make_tensor(Input& in, int64_t rows, int64_t cols, int dtype) {
  const int64_t pad = in.one_in(3) ? in.pick(3) : 0;
  return epigemm_tensor_t{nullptr, epigemm_dtype_t(dtype), rows, cols, add(cols < 1 ? 1 : cols, pad),
                          EPIGEMM_MEMORY_HOST};
}
void mutate_tensor(Input& in, epigemm_tensor_t* t) {
  switch (in.pick(6)) {
    case 0: t->rows = size_value(in); break;
    case 1: t->cols = size_value(in); break;
    case 2: t->row_stride = size_value(in); break;
    case 3: t->dtype = epigemm_dtype_t(enum_value(in, 3)); break;
    case 4: t->memory = epigemm_memory_t(enum_value(in, 2)); break;
    default: t->cols = add(t->cols, 1); break;
  }
}
int64_t tensor_span_or_zero(const epigemm_tensor_t& t) {
  return matrix_span_or_zero(epigemm_matrix_t{t.data, t.dtype, t.cols, t.rows, t.row_stride, t.memory});
}

void build_layer(Input& in, Call& call) {
  const int64_t tokens = size_value(in), in_features = size_value(in), out_features = size_value(in);
  const int dtype = in.pick(3);
  const int out_dtype = in.one_in(2) ? EPIGEMM_DTYPE_F32 : dtype;
  // The _act calls take an activation (any int sometimes); dgrad_act requires pre_act, which is
  // left out only sometimes, to see it refused.
  if (call.layer_activation) call.g.activation = enum_value(in, 5);
  call.with_pre = call.layer_activation && call.pass == Pass::dgrad ? !in.one_in(8) : in.one_in(2);
  const bool vector = in.one_in(2);
  // Tensors of the pass (conventions.md §1): fprop X, W, Y, pre_gelu / pre_act [tokens, out];
  // dgrad dY, W, dX, pre_gelu / pre_act [tokens, in]; wgrad X, dY, dW.
  call.x = make_tensor(in, tokens, in_features, dtype);
  call.w = make_tensor(in, out_features, in_features, dtype);
  call.dy = make_tensor(in, tokens, out_features, dtype);
  switch (call.pass) {
    case Pass::fprop:
      call.out = make_tensor(in, tokens, out_features, out_dtype);
      call.pre = make_tensor(in, tokens, out_features, in.pick(3));
      call.with_bias = vector;
      break;
    case Pass::dgrad:
      call.out = make_tensor(in, tokens, in_features, out_dtype);
      call.pre = make_tensor(in, tokens, in_features, in.pick(3));
      call.with_bias_grad = vector && (call.with_pre || in.one_in(8));
      break;
    case Pass::wgrad:
      call.out = make_tensor(in, out_features, in_features, out_dtype);
      call.with_pre = false;
      call.with_bias_grad = vector;
      call.accumulate = in.one_in(3);
      break;
  }
  epigemm_vector_t& bias = call.g.bias;
  epigemm_vector_t& bias_grad = call.g.bias_grad;
  bias = epigemm_vector_t{nullptr, epigemm_dtype_t(in.pick(3)), out_features, EPIGEMM_MEMORY_HOST};
  bias_grad = epigemm_vector_t{nullptr, epigemm_dtype_t(in.pick(3)),
                               call.pass == Pass::dgrad ? in_features : out_features, EPIGEMM_MEMORY_HOST};
  if (in.one_in(20)) {
    call.x.memory = call.w.memory = call.dy.memory = call.out.memory = call.pre.memory = EPIGEMM_MEMORY_DEVICE;
    bias.memory = bias_grad.memory = EPIGEMM_MEMORY_DEVICE;
  }
  for (int mutations = in.pick(8) < 5 ? 0 : 1 + in.pick(2); mutations > 0; --mutations) {
    switch (in.pick(8)) {
      case 0: mutate_tensor(in, &call.x); break;
      case 1: mutate_tensor(in, &call.w); break;
      case 2: mutate_tensor(in, &call.dy); break;
      case 3: mutate_tensor(in, &call.out); break;
      case 4: mutate_tensor(in, &call.pre); break;
      case 5: mutate_vector(in, &bias); break;
      case 6: mutate_vector(in, &bias_grad); break;
      default: {
        const int which = in.pick(4);
        (which == 0 ? call.with_x : which == 1 ? call.with_w : which == 2 ? call.with_dy : call.with_out) = false;
        break;
      }
    }
  }
  // Slots: the GEMM operand each tensor becomes (A, B, D, aux), so the checks speak of one set.
  epigemm_tensor_t* a_tensor = call.pass == Pass::wgrad ? &call.x : &call.w;
  epigemm_tensor_t* b_tensor = call.pass == Pass::fprop ? &call.x : &call.dy;
  place(in, call, kSlotA, &a_tensor->data, tensor_span_or_zero(*a_tensor), int(a_tensor->dtype));
  place(in, call, kSlotB, &b_tensor->data, tensor_span_or_zero(*b_tensor), int(b_tensor->dtype));
  place(in, call, kSlotD, &call.out.data, tensor_span_or_zero(call.out), int(call.out.dtype));
  place(in, call, kSlotAux, &call.pre.data, tensor_span_or_zero(call.pre), int(call.pre.dtype));
  place(in, call, kSlotBias, &bias.data, vector_span_or_zero(bias), int(bias.dtype));
  place(in, call, kSlotBiasGrad, &bias_grad.data, vector_span_or_zero(bias_grad), int(bias_grad.dtype));
  maybe_overlap(in, call, &call.out.data, tensor_span_or_zero(call.out));
  if (call.pass == Pass::fprop && call.with_pre) maybe_overlap(in, call, &call.pre.data, tensor_span_or_zero(call.pre));
  if (call.with_bias_grad) maybe_overlap(in, call, &bias_grad.data, vector_span_or_zero(bias_grad));
  call.buffers[kSlotD].fill(kPoisonByte);
  if (call.pass == Pass::wgrad && call.accumulate && !call.buffers[kSlotD].fake()) {
    fill_values(call.buffers[kSlotD].data(), call.buffers[kSlotD].span(), int(call.out.dtype), 12345);  // dW is read
  }
  if (call.pass == Pass::fprop && call.with_pre) call.buffers[kSlotAux].fill(kPoisonByte);
  if (call.with_bias_grad) call.buffers[kSlotBiasGrad].fill(kPoisonByte);
}

LayerArgs layer_args(const Call& call, int backend, const void* workspace, size_t workspace_bytes) {
  LayerArgs l;
  l.pass = call.pass;
  l.with_activation = call.layer_activation;
  l.activation = call.g.activation;
  l.x = call.with_x ? &call.x : nullptr;
  l.w = call.with_w ? &call.w : nullptr;
  l.dy = call.with_dy ? &call.dy : nullptr;
  l.out = call.with_out ? &call.out : nullptr;
  l.pre_act = call.with_pre ? &call.pre : nullptr;
  l.bias = call.with_bias ? &call.g.bias : nullptr;
  l.bias_grad = call.with_bias_grad ? &call.g.bias_grad : nullptr;
  l.accumulate = call.accumulate;
  l.backend = backend;
  l.workspace = workspace;
  l.workspace_bytes = workspace_bytes;
  return l;
}

// ---- the checks -------------------------------------------------------------------------------

// The slot whose storage holds `data` (outputs are placed in any operand's buffer sometimes).
int slot_of(const Call& call, const void* data) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (int s = 0; s < kSlots; ++s) {
    const std::vector<unsigned char>& bytes = call.buffers[s].bytes();
    if (!bytes.empty() && p >= bytes.data() && p < bytes.data() + bytes.size()) return s;
  }
  return -1;
}

// [data, data + span) lies in one buffer's storage, before its back guard (span >= 0).
bool in_storage(const Call& call, const void* data, int64_t span) {
  const int slot = slot_of(call, data);
  if (slot < 0 || span < 0) return false;
  const std::vector<unsigned char>& bytes = call.buffers[slot].bytes();
  return span <= bytes.data() + bytes.size() - kGuardBytes - static_cast<const unsigned char*>(data);
}

// The operands as the call reads them: the inputs it reads (A, B, bias, aux for DGELU, D when
// beta != 0) hold values, the outputs it writes the poison. Done once the GEMM the call means is
// known, on the final pointers: an operand may sit in another one's buffer (a poisoned output the
// call does not take), and an input read from there would be NaN, which could come out with the
// poison's bits and look unwritten.
void prepare_operands(Call& call, const GemmMeaning& g) {
  auto values = [&](const void* data, int64_t span, int dtype, uint32_t seed) {
    if (in_storage(call, data, span)) fill_values(const_cast<void*>(data), span, dtype, seed);
  };
  auto poison = [&](const void* data, int64_t span) {
    if (in_storage(call, data, span) && span > 0) std::memset(const_cast<void*>(data), kPoisonByte, size_t(span));
  };
  if (g.has_bias_grad) poison(g.bias_grad.data, span_bytes(g.bias_grad));
  if (g.has_aux && writes_aux(g.epilogue)) poison(g.aux.data, span_bytes(g.aux));
  if (g.beta == 0.0f) poison(g.d.data, span_bytes(g.d));
  values(g.a.data, span_bytes(g.a), int(g.a.dtype), 71);
  values(g.b.data, span_bytes(g.b), int(g.b.dtype), 72);
  if (g.beta != 0.0f) values(g.d.data, span_bytes(g.d), int(g.d.dtype), 73);
  if (g.has_bias) values(g.bias.data, span_bytes(g.bias), int(g.bias.dtype), 77);
  if (g.has_aux && reads_aux(g.epilogue)) values(g.aux.data, span_bytes(g.aux), int(g.aux.dtype), 78);
}

void snapshot(Call& call) {
  for (int s = 0; s < kSlots; ++s) call.before[s] = call.buffers[s].bytes();
}

void expect_untouched(const Call& call, const char* why) {
  for (int s = 0; s < kSlots; ++s) {
    if (call.buffers[s].bytes() != call.before[s]) {
      finding(std::string(why) + ": the buffer of " + kSlotNames[s] + " changed", call.text);
    }
  }
}

// Byte offsets (from the start of the buffer that holds it) of a matrix's elements, marked in
// that buffer's mask.
void mark_matrix(const Call& call, const epigemm_matrix_t& m, std::vector<bool>* masks) {
  const int slot = slot_of(call, m.data);
  if (slot < 0 || m.rows <= 0 || m.cols <= 0) return;
  std::vector<bool>* mask = &masks[slot];
  const unsigned char* base = call.buffers[slot].bytes().data();
  const int64_t offset = static_cast<const unsigned char*>(m.data) - base;
  const int64_t size = element_size(int(m.dtype));
  for (int64_t j = 0; j < m.cols; ++j) {
    for (int64_t i = 0; i < m.rows; ++i) {
      for (int64_t byte = 0; byte < size; ++byte) (*mask)[size_t(offset + (i + j * m.ld) * size + byte)] = true;
    }
  }
}

// |out - ref| within what the dtypes allow for an element whose terms add up to `magnitude` in
// absolute value (fp32 accumulation over gemm_k, the activation's fp32 evaluation, one rounding to
// the output dtype either way of a boundary).
bool close(double out, double ref, double magnitude, int dtype, int64_t k) {
  if (std::isnan(ref)) return std::isnan(out);
  const double unit = dtype == EPIGEMM_DTYPE_F32 ? 0x1p-23 : dtype == EPIGEMM_DTYPE_F16 ? 0x1p-10 : 0x1p-7;
  const double floor = dtype == EPIGEMM_DTYPE_F16 ? 0x1p-24 : 0x1p-126;
  const double tolerance = 8.0 * double(k + 8) * 0x1p-24 * magnitude + 2.0 * unit * std::fabs(ref) + 2.0 * floor;
  return std::fabs(out - ref) <= tolerance;
}

// A description of the GEMM g means, on `backend`; its activation left at the default (gelu_tanh)
// unless set_activation. *refusal: the first setter that did not answer SUCCESS, and its status.
// The contract refuses a bad value when the call is made (conventions.md §4); a setter that
// refuses it at once is tolerated for a call the oracle refuses (run_gemm), never for one it
// accepts.
struct SetterRefusal {
  const char* setter = nullptr;
  epigemm_status_t status = EPIGEMM_STATUS_SUCCESS;
};
epigemm_gemm_desc_t make_description(const GemmMeaning& g, int backend, bool set_activation,
                                     SetterRefusal* refusal) {
  epigemm_gemm_desc_t desc = nullptr;
  if (epigemm_gemm_desc_create(&desc) != EPIGEMM_STATUS_SUCCESS) std::abort();
  auto note = [&](const char* setter, epigemm_status_t status) {
    if (status != EPIGEMM_STATUS_SUCCESS && refusal->setter == nullptr) *refusal = SetterRefusal{setter, status};
  };
  note("set_transpose", epigemm_gemm_desc_set_transpose(desc, epigemm_op_t(g.transa), epigemm_op_t(g.transb)));
  note("set_scalars", epigemm_gemm_desc_set_scalars(desc, g.alpha, g.beta));
  note("set_epilogue", epigemm_gemm_desc_set_epilogue(desc, epigemm_epilogue_t(g.epilogue)));
  if (set_activation) note("set_activation", epigemm_gemm_desc_set_activation(desc, epigemm_activation_t(g.activation)));
  note("set_bias", epigemm_gemm_desc_set_bias(desc, g.has_bias ? &g.bias : nullptr));
  note("set_aux", epigemm_gemm_desc_set_aux(desc, g.has_aux ? &g.aux : nullptr));
  note("set_bias_grad", epigemm_gemm_desc_set_bias_grad(desc, g.has_bias_grad ? &g.bias_grad : nullptr));
  note("set_backend", epigemm_gemm_desc_set_backend(desc, epigemm_backend_t(backend)));
  return desc;
}

// After a call that ran on a backend other than the reference: the outputs are compared with the
// reference backend's on the same (restored) inputs.
void compare_with_reference(Call& call, const GemmMeaning& g) {
  epigemm_context_t ctx = process().ctx;
  std::vector<unsigned char> after[kSlots];
  for (int s = 0; s < kSlots; ++s) after[s] = call.buffers[s].bytes();
  for (int s = 0; s < kSlots; ++s) call.buffers[s].bytes() = call.before[s];
  // Magnitudes of each element's terms, from the restored inputs (D_old too: before the reference
  // call overwrites D).
  // Loops over D's elements only when it has some: gemm_n may be 2^62 beside gemm_m = 0.
  const bool product = g.gemm_m > 0 && g.gemm_n > 0;
  const int64_t m = product ? g.gemm_m : 0, n = product ? g.gemm_n : 0, k = g.gemm_k;
  auto element = [](const epigemm_matrix_t& x, int64_t r, int64_t c) { return load(x.data, int(x.dtype), r + c * x.ld); };
  auto op_a = [&](int64_t i, int64_t p) { return g.transa == 1 ? element(g.a, p, i) : element(g.a, i, p); };
  auto op_b = [&](int64_t p, int64_t j) { return g.transb == 1 ? element(g.b, j, p) : element(g.b, p, j); };
  std::vector<double> acc_magnitude(size_t(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) sum += std::fabs(op_a(i, p) * op_b(p, j));
      double magnitude = std::fabs(double(g.alpha)) * sum;
      if (g.beta != 0.0f) magnitude += std::fabs(double(g.beta) * element(g.d, i, j));
      if (g.has_bias) magnitude += std::fabs(load(g.bias.data, int(g.bias.dtype), i));
      // |act(z)| <= |z| for every activation; act' is at most 1.13 (gelu_tanh, gelu_erf), 1.1
      // (silu), 1 (identity, relu).
      acc_magnitude[size_t(i + j * m)] = 1.2 * magnitude;
    }
  }
  SetterRefusal refusal;
  epigemm_gemm_desc_t desc = make_description(g, EPIGEMM_BACKEND_REFERENCE, true, &refusal);
  const epigemm_status_t status = epigemm_gemm(ctx, desc, &g.a, &g.b, &g.d, nullptr, 0, nullptr);
  epigemm_gemm_desc_destroy(desc);
  if (refusal.setter != nullptr) {
    finding(std::string("epigemm_gemm_desc_") + refusal.setter + " refused a value of a call that ran", call.text);
  }
  if (status != EPIGEMM_STATUS_SUCCESS) {
    finding(std::string("the reference backend refused the GEMM of a call that ran: ") +
                epigemm_context_last_error(ctx), call.text);
  }
  std::vector<unsigned char> reference[kSlots];
  for (int s = 0; s < kSlots; ++s) reference[s] = call.buffers[s].bytes();
  // Compare the outputs element by element: `after` (the backend) against `reference`.
  auto value_in = [&](std::vector<unsigned char>* state, const void* data, int dtype, int64_t index) {
    const int slot = slot_of(call, data);
    const int64_t offset = static_cast<const unsigned char*>(data) - call.buffers[slot].bytes().data();
    return load(state[slot].data() + offset, dtype, index);
  };
  auto check_matrix = [&](const epigemm_matrix_t& x, const char* name) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        const double got = value_in(after, x.data, int(x.dtype), i + j * x.ld);
        const double want = value_in(reference, x.data, int(x.dtype), i + j * x.ld);
        if (!close(got, want, acc_magnitude[size_t(i + j * m)], int(x.dtype), k)) {
          char text[200];
          std::snprintf(text, sizeof text, "%s(%lld, %lld) = %.9g, the reference backend gives %.9g (terms %.3g)",
                        name, static_cast<long long>(i), static_cast<long long>(j), got, want,
                        acc_magnitude[size_t(i + j * m)]);
          finding(text, call.text);
        }
      }
    }
  };
  check_matrix(g.d, "D");
  if (g.has_aux && writes_aux(g.epilogue)) check_matrix(g.aux, "aux");
  if (g.has_bias_grad) {
    for (int64_t i = 0; i < g.bias_grad.length; ++i) {
      // The terms of bias_grad[i] (conventions.md §2) in absolute value, and how many.
      double magnitude = 0.0;
      int64_t terms = 0;
      switch (epilogue_parts(g.epilogue).bias_grad) {
        case BiasGradPart::rows_of_g:  // Σ_j g[i,j]
          for (int64_t j = 0; j < n; ++j) magnitude += acc_magnitude[size_t(i + j * m)];
          terms = n;
          break;
        case BiasGradPart::columns_of_op_b:  // Σ_p op(B)[p,i]
          for (int64_t p = 0; p < k; ++p) magnitude += std::fabs(op_b(p, i));
          terms = k;
          break;
        case BiasGradPart::rows_of_op_a:  // Σ_p op(A)[i,p]
          for (int64_t p = 0; p < k; ++p) magnitude += std::fabs(op_a(i, p));
          terms = k;
          break;
        case BiasGradPart::none:
          finding("a call that ran wrote a bias gradient its epilogue does not have", call.text);
      }
      const double got = value_in(after, g.bias_grad.data, int(g.bias_grad.dtype), i);
      const double want = value_in(reference, g.bias_grad.data, int(g.bias_grad.dtype), i);
      if (!close(got, want, magnitude, int(g.bias_grad.dtype), terms)) {
        char text[200];
        std::snprintf(text, sizeof text, "bias_grad[%lld] = %.9g, the reference backend gives %.9g",
                      static_cast<long long>(i), got, want);
        finding(text, call.text);
      }
    }
  }
  for (int s = 0; s < kSlots; ++s) call.buffers[s].bytes() = after[s];
}

// After a call that succeeded: inputs, guards and padding unchanged; every output element
// written (not the poison); then the comparison with the reference backend.
void check_success(Call& call, const GemmMeaning& g, epigemm_backend_t ran) {
  std::vector<bool> written[kSlots];
  for (int s = 0; s < kSlots; ++s) written[s].assign(call.buffers[s].bytes().size(), false);
  const Access touched = accessed(g);
  if (touched.d) mark_matrix(call, g.d, written);
  if (touched.aux && writes_aux(g.epilogue)) mark_matrix(call, g.aux, written);
  if (touched.bias_grad) {
    const epigemm_matrix_t as_column{g.bias_grad.data, g.bias_grad.dtype, g.bias_grad.length, 1,
                                     g.bias_grad.length, g.bias_grad.memory};
    mark_matrix(call, as_column, written);
  }
  if (call.workspace != nullptr) {
    const int slot = slot_of(call, call.workspace);
    if (slot >= 0) {
      const size_t first = size_t(static_cast<const unsigned char*>(call.workspace) - call.buffers[slot].bytes().data());
      for (size_t i = first; i < first + call.workspace_bytes && i < written[slot].size(); ++i) written[slot][i] = true;
    }
  }
  for (int s = 0; s < kSlotWorkspace; ++s) {  // the workspace's own buffer is scratch
    const std::vector<unsigned char>& now = call.buffers[s].bytes();
    for (size_t i = 0; i < now.size(); ++i) {
      if (!written[s][i] && now[i] != call.before[s][i]) {
        finding(std::string("a byte outside the outputs' elements changed in the buffer of ") + kSlotNames[s] +
                    " at offset " + std::to_string(i), call.text);
      }
    }
  }
  // Every element written: the poison (0xff bytes, NaN in every dtype) is gone. Inputs are finite
  // multiples of 1/32, so no result is that NaN.
  auto all_written = [&](const epigemm_matrix_t& x, const char* name) {
    const int64_t size = element_size(int(x.dtype));
    for (int64_t j = 0; j < x.cols; ++j) {
      for (int64_t i = 0; i < x.rows; ++i) {
        const unsigned char* p = static_cast<const unsigned char*>(x.data) + (i + j * x.ld) * size;
        bool poison = true;
        for (int64_t b = 0; b < size; ++b) poison = poison && p[b] == kPoisonByte;
        if (poison) finding(std::string(name) + " has an element the call did not write", call.text);
      }
    }
  };
  if (touched.d && g.beta == 0.0f) all_written(g.d, "D");
  if (touched.aux && writes_aux(g.epilogue)) all_written(g.aux, "aux");
  if (touched.bias_grad) {
    all_written(epigemm_matrix_t{g.bias_grad.data, g.bias_grad.dtype, g.bias_grad.length, 1,
                                                g.bias_grad.length, g.bias_grad.memory}, "bias_grad");
  }
  if (ran != EPIGEMM_BACKEND_REFERENCE) compare_with_reference(call, g);
}

// A call the oracle says runs reads and writes the elements of the operands it accesses (and no
// others: a call with nothing to compute touches nothing). Those must lie in a buffer; an
// operand with no storage (a huge span) or placed where its span runs past its buffer's end (an
// output moved into an operand the call does not take) is outside what this target can give
// memory for, and the input is skipped.
bool needs_missing_storage(const Call& call, const GemmMeaning& g) {
  const Access a = accessed(g);
  struct Operand {
    bool needed;
    const void* data;
    int64_t span;
  };
  const Operand operands[] = {{a.a, g.a.data, span_bytes(g.a)},
                              {a.b, g.b.data, span_bytes(g.b)},
                              {a.d, g.d.data, span_bytes(g.d)},
                              {a.aux, g.aux.data, span_bytes(g.aux)},
                              {a.bias, g.bias.data, span_bytes(g.bias)},
                              {a.bias_grad, g.bias_grad.data, span_bytes(g.bias_grad)}};
  for (const Operand& operand : operands) {
    if (operand.needed && !in_storage(call, operand.data, operand.span)) return true;
  }
  return false;
}

const char* status_text(epigemm_status_t s) { return epigemm_status_name(s); }

// EPIGEMM_FUZZ_VERBOSE=1: every call printed before it is made (to replay one input), and its
// status and the oracle's verdict after it (to see which paths a corpus reaches).
bool verbose() {
  static const bool on = std::getenv("EPIGEMM_FUZZ_VERBOSE") != nullptr;
  return on;
}
// The operation calls made (gemm, classic, the linear passes; each after its workspace query),
// printed when the process exits: a run's size in calls, beside libFuzzer's count of inputs.
struct CallCounter {
  unsigned long long calls = 0;
  ~CallCounter() { std::fprintf(stderr, "epigemm fuzz: %llu operation calls\n", calls); }
};
CallCounter& call_counter() {
  static CallCounter counter;
  return counter;
}
void announce(const Call& call, const void* workspace, size_t workspace_bytes) {
  ++call_counter().calls;
  if (verbose()) std::fprintf(stderr, "call: %s; offered workspace %p + %zu\n", call.text.c_str(), workspace, workspace_bytes);
}

// The status a call must return for the oracle's verdict: `sized` is what the matching workspace
// query answered (its bytes in `needed`).
// workspace_short: the call was offered less than the size query answered. For the layer calls
// that answer is an upper bound over every call of those sizes (upper_bound), so less may still
// be enough for this one.
void expect_status(Call& call, const Prediction& p, epigemm_status_t got, int backend,
                   bool workspace_short, bool upper_bound = false) {
  const bool named_host_backend = backend == EPIGEMM_BACKEND_CPU;
  switch (p.verdict) {
    case Verdict::invalid:
      if (got != EPIGEMM_STATUS_INVALID_VALUE) {
        finding(std::string("expected INVALID_VALUE (") + p.why + "), got " + status_text(got), call.text);
      }
      return;
    case Verdict::not_supported:
      if (got != EPIGEMM_STATUS_NOT_SUPPORTED) {
        finding(std::string("expected NOT_SUPPORTED (") + p.why + "), got " + status_text(got), call.text);
      }
      return;
    case Verdict::runs: {
      const epigemm_status_t want = workspace_short ? EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE : EPIGEMM_STATUS_SUCCESS;
      if (got == want) return;
      if (got == EPIGEMM_STATUS_NOT_SUPPORTED && named_host_backend) return;  // may decline (§6)
      if (got == EPIGEMM_STATUS_SUCCESS && workspace_short && upper_bound) return;
      finding(std::string("expected ") + status_text(want) + ", got " + status_text(got) + ": " +
                  epigemm_context_last_error(process().ctx), call.text);
    }
  }
}

// ---- the entry points -------------------------------------------------------------------------

// The workspace the call is offered, from the size query's answer.
struct Offer {
  void* data = nullptr;
  size_t bytes = 0;
  bool short_of_needed = false;
};
Offer choose_workspace(Input& in, Call& call, size_t needed) {
  Offer o;
  switch (in.pick(8)) {
    case 0:  // less than needed
      if (needed > 0) {
        call.buffers[kSlotWorkspace] = Buffer(int64_t(needed - 1), 0, kSlotWorkspace);
        o.data = call.buffers[kSlotWorkspace].data();
        o.bytes = needed - 1;
        o.short_of_needed = true;
        return o;
      }
      break;
    case 1:  // a size but no pointer
      o.bytes = needed + 8;
      o.short_of_needed = needed > 0;
      return o;
    case 2: {  // inside an operand's buffer (one the call may not take: then no overlap)
      const Buffer& b = call.buffers[in.pick(kSlotBiasGrad + 1)];
      if (!b.fake() && b.span() > 0) {
        o.data = b.data();
        o.bytes = std::min<size_t>(needed > 0 ? needed : 4, size_t(b.span()));
        o.short_of_needed = o.bytes < needed;
        return o;
      }
      break;
    }
    default:
      break;
  }
  const size_t extra = in.one_in(4) ? 13 : 0;
  call.buffers[kSlotWorkspace] = Buffer(int64_t(needed + extra), in.one_in(4) ? 1 : 0, kSlotWorkspace);
  call.buffers[kSlotWorkspace].fill(0x5c);
  o.data = (needed + extra) > 0 ? call.buffers[kSlotWorkspace].data() : nullptr;
  o.bytes = needed + extra;
  return o;
}

Offer offer_workspace(Input& in, Call& call, size_t needed) {
  const Offer o = choose_workspace(in, call, needed);
  call.workspace = o.data;
  call.workspace_bytes = o.bytes;
  return o;
}

// A workspace beyond what this target allocates (the layer query's bound can be gigabytes) has
// an address never to be touched: a call that runs with it is skipped, as an operand without
// storage is.
bool workspace_missing(const Call& call, const Prediction& p) {
  return p.verdict == Verdict::runs && call.buffers[kSlotWorkspace].fake();
}

epigemm_backend_t last_backend() {
  epigemm_backend_t ran = EPIGEMM_BACKEND_AUTO;
  if (epigemm_context_last_backend(process().ctx, &ran, nullptr) != EPIGEMM_STATUS_SUCCESS) std::abort();
  return ran;
}

// The status of a call against the oracle's prediction; then its buffers: all as they were after
// a failure; after a success inputs, guards and padding kept, every output written, and the
// outputs as the reference backend computes them.
void check_call(Call& call, const Prediction& p, epigemm_status_t status, int backend, const Offer& offer,
                const GemmMeaning& g, bool upper_bound = false) {
  expect_status(call, p, status, backend, offer.short_of_needed, upper_bound);
  if (status == EPIGEMM_STATUS_SUCCESS) {
    const epigemm_backend_t ran = last_backend();
    if (verbose()) std::fprintf(stderr, "  -> SUCCESS on %s\n", epigemm_backend_name(ran));
    check_success(call, g, ran);
  } else {
    if (verbose()) std::fprintf(stderr, "  -> %s (%s)\n", status_text(status), p.why.c_str());
    expect_untouched(call, "a call that failed");
  }
}

// The description call and its workspace query.
void run_gemm(Input& in, Call& call) {
  epigemm_context_t ctx = process().ctx;
  build_gemm_level(in, call);
  GemmMeaning g = call.g;
  g.workspace = nullptr;
  g.workspace_bytes = 0;
  SetterRefusal refusal;
  epigemm_gemm_desc_t desc = make_description(g, g.backend, call.activation_set, &refusal);
  call.text = describe(g);
  Prediction p = check_gemm(&g, process().machine);
  if (refusal.setter != nullptr) {
    if (refusal.status != EPIGEMM_STATUS_INVALID_VALUE || p.verdict != Verdict::invalid) {
      finding(std::string("epigemm_gemm_desc_") + refusal.setter + " answered " + status_text(refusal.status) +
                  " (the oracle: " + (p.verdict == Verdict::invalid ? "invalid, " + p.why : std::string("valid")) + ")",
              call.text);
    }
    epigemm_gemm_desc_destroy(desc);
    return;
  }
  // The names of the epilogue and activation, whatever the value: a static string each.
  const char* names[] = {epigemm_epilogue_name(epigemm_epilogue_t(g.epilogue)),
                         epigemm_activation_name(epigemm_activation_t(g.activation))};
  for (const char* name : names) {
    if (name == nullptr || std::strlen(name) == 0) finding("an epilogue or activation name is NULL or empty", call.text);
  }
  prepare_operands(call, g);
  if (p.verdict == Verdict::runs && needs_missing_storage(call, g)) {
    epigemm_gemm_desc_destroy(desc);
    return;
  }
  snapshot(call);
  size_t needed = 0;
  const epigemm_status_t sized = epigemm_gemm_workspace_size(ctx, desc, &g.a, &g.b, &g.d, &needed);
  expect_status(call, p, sized, g.backend, false);
  expect_untouched(call, "the workspace query");
  if (call.entry == Entry::gemm_size) {
    epigemm_gemm_desc_destroy(desc);
    return;
  }
  const Offer offer = offer_workspace(in, call, needed);
  g.workspace = offer.data;
  g.workspace_bytes = offer.bytes;
  p = check_gemm(&g, process().machine);
  call.text = describe(g);
  if (workspace_missing(call, p)) {
    epigemm_gemm_desc_destroy(desc);
    return;
  }
  snapshot(call);
  announce(call, offer.data, offer.bytes);
  const epigemm_status_t status = epigemm_gemm(ctx, desc, &g.a, &g.b, &g.d, offer.data, offer.bytes, nullptr);
  epigemm_gemm_desc_destroy(desc);
  if (p.verdict == Verdict::runs && sized != status && status != EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE) {
    finding(std::string("the workspace query answered ") + status_text(sized) + ", the call " + status_text(status), call.text);
  }
  check_call(call, p, status, g.backend, offer, g);
}

// The classic call and its workspace query: the backend is the context's default.
void run_classic(Input& in, Call& call) {
  epigemm_context_t ctx = process().ctx;
  build_gemm_level(in, call);
  const int backend = enum_value(in, 3);
  // The default backend is a context setting; set_backend refuses what is not 0..5.
  const epigemm_status_t set = epigemm_context_set_backend(ctx, epigemm_backend_t(backend));
  const bool backend_valid = backend >= 0 && backend <= 5;
  if ((set == EPIGEMM_STATUS_SUCCESS) != backend_valid) finding("set_backend answered wrongly", std::to_string(backend));
  if (!backend_valid) return;
  // Which of bias / pre_gelu_out are given: a NULL descriptor or NULL data means not given.
  const epigemm_vector_t* bias = call.g.has_bias || call.g.has_bias_grad
                                     ? (writes_bias_grad(call.g.epilogue) ? &call.g.bias_grad : &call.g.bias)
                                     : nullptr;
  const epigemm_matrix_t* pre = call.g.has_aux ? &call.g.aux : nullptr;
  const int grad = (reads_aux(call.g.epilogue) || writes_bias_grad(call.g.epilogue)) != in.one_in(16) ? 1 : 0;
  const int accumulate = call.g.beta != 0.0f ? 1 : 0;
  GemmMeaning g = classic_meaning(call.g.a, call.g.b, call.g.d, bias, pre, call.g.transa, call.g.transb,
                                  grad, accumulate, backend);
  prepare_operands(call, g);  // its grad may make the description's outputs inputs, and back
  call.text = "classic grad=" + std::to_string(grad) + " accumulate=" + std::to_string(accumulate) + ": " + describe(g);
  Prediction p = check_gemm(&g, process().machine);
  if (p.verdict == Verdict::runs && needs_missing_storage(call, g)) return;
  snapshot(call);
  size_t needed = 0;
  const epigemm_status_t sized = epigemm_classic_gemm_workspace_size(
      ctx, &call.g.a, &call.g.b, &call.g.d, bias, pre, epigemm_op_t(call.g.transa),
      epigemm_op_t(call.g.transb), grad, accumulate, &needed);
  expect_status(call, p, sized, backend, false);
  expect_untouched(call, "the classic workspace query");
  if (call.entry == Entry::classic_size) return;
  const Offer offer = offer_workspace(in, call, needed);
  g.workspace = offer.data;
  g.workspace_bytes = offer.bytes;
  p = check_gemm(&g, process().machine);
  if (workspace_missing(call, p)) return;
  snapshot(call);
  announce(call, offer.data, offer.bytes);
  const epigemm_status_t status = epigemm_classic_gemm(
      ctx, &call.g.a, &call.g.b, &call.g.d, bias, pre, epigemm_op_t(call.g.transa),
      epigemm_op_t(call.g.transb), grad, offer.data, offer.bytes, accumulate, nullptr);
  check_call(call, p, status, backend, offer, g);
}

void run_layer(Input& in, Call& call) {
  epigemm_context_t ctx = process().ctx;
  const int backend = in.pick(3);  // auto, reference, cpu
  if (epigemm_context_set_backend(ctx, epigemm_backend_t(backend)) != EPIGEMM_STATUS_SUCCESS) std::abort();
  build_layer(in, call);
  GemmMeaning g;
  Prediction p = check_layer(layer_args(call, backend, nullptr, 0), process().machine, &g);
  if (p.verdict != Verdict::invalid) prepare_operands(call, g);  // g is the mapped GEMM then
  call.text = std::string(call.pass == Pass::fprop ? "fprop" : call.pass == Pass::dgrad ? "dgrad" : "wgrad") +
              (call.layer_activation ? "_act(activation " + std::to_string(call.g.activation) + ")" : "") +
              (call.with_pre ? " with pre_act" : "") + " as " + describe(g);
  if (p.verdict == Verdict::runs && needs_missing_storage(call, g)) return;
  // The layer workspace query for these sizes promises enough for any layer call of them.
  size_t needed = 0;
  if (p.verdict == Verdict::runs) {
    const int64_t tokens = call.pass == Pass::wgrad ? call.x.rows : call.pass == Pass::fprop ? call.x.rows : call.dy.rows;
    const int64_t in_features = call.pass == Pass::dgrad ? call.w.cols : call.x.cols;
    const int64_t out_features = call.pass == Pass::fprop ? call.w.rows : call.dy.cols;
    const int dtype = call.pass == Pass::dgrad ? int(call.dy.dtype) : int(call.x.dtype);
    if (epigemm_linear_workspace_size(ctx, tokens, in_features, out_features, epigemm_dtype_t(dtype),
                                      call.out.memory, &needed) != EPIGEMM_STATUS_SUCCESS) {
      finding(std::string("epigemm_linear_workspace_size refused the sizes of a valid layer call: ") +
                  epigemm_context_last_error(ctx), call.text);
    }
  }
  const Offer offer = offer_workspace(in, call, needed);
  const LayerArgs args = layer_args(call, backend, offer.data, offer.bytes);
  p = check_layer(args, process().machine, &g);
  if (workspace_missing(call, p)) return;
  snapshot(call);
  announce(call, offer.data, offer.bytes);
  epigemm_status_t status = EPIGEMM_STATUS_INTERNAL_ERROR;
  switch (call.pass) {
    case Pass::fprop:
      status = call.layer_activation
                   ? epigemm_linear_fprop_act(ctx, args.x, args.w, args.bias, epigemm_activation_t(args.activation),
                                              args.pre_act, args.out, offer.data, offer.bytes, nullptr)
                   : epigemm_linear_fprop(ctx, args.x, args.w, args.bias, args.pre_act, args.out, offer.data,
                                          offer.bytes, nullptr);
      break;
    case Pass::dgrad:
      status = call.layer_activation
                   ? epigemm_linear_dgrad_act(ctx, args.dy, args.w, epigemm_activation_t(args.activation),
                                              args.pre_act, args.bias_grad, args.out, offer.data, offer.bytes,
                                              nullptr)
                   : epigemm_linear_dgrad(ctx, args.dy, args.w, args.pre_act, args.bias_grad, args.out,
                                          offer.data, offer.bytes, nullptr);
      break;
    case Pass::wgrad:
      status = epigemm_linear_wgrad(ctx, args.x, args.dy, args.out, args.accumulate, args.bias_grad, offer.data,
                                    offer.bytes, nullptr);
      break;
  }
  check_call(call, p, status, backend, offer, g, true);
}

void run_linear_size(Input& in) {
  epigemm_context_t ctx = process().ctx;
  const int backend = enum_value(in, 5);
  if (backend < 0 || backend > 5) return;
  if (epigemm_context_set_backend(ctx, epigemm_backend_t(backend)) != EPIGEMM_STATUS_SUCCESS) std::abort();
  const int64_t tokens = size_value(in), in_features = size_value(in), out_features = size_value(in);
  const int dtype = enum_value(in, 3), memory = enum_value(in, 2);
  const Prediction p = check_linear_workspace_size(tokens, in_features, out_features, dtype, memory, backend,
                                                   process().machine);
  size_t bytes = 0;
  const epigemm_status_t status = epigemm_linear_workspace_size(ctx, tokens, in_features, out_features,
                                                                epigemm_dtype_t(dtype), epigemm_memory_t(memory), &bytes);
  Call call;
  char text[160];
  std::snprintf(text, sizeof text, "linear_workspace_size(%lld, %lld, %lld, dtype %d, memory %d) backend %d",
                static_cast<long long>(tokens), static_cast<long long>(in_features),
                static_cast<long long>(out_features), dtype, memory, backend);
  call.text = text;
  expect_status(call, p, status, EPIGEMM_BACKEND_AUTO, false);
}

// Handles that are not what they claim: destroyed, of the other kind, never created, NULL. Every
// use must answer INVALID_VALUE (0 for the int queries) and touch nothing.
void run_handles(Input& in) {
  epigemm_context_t ctx = nullptr;
  epigemm_gemm_desc_t desc = nullptr;
  if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) std::abort();
  if (epigemm_gemm_desc_create(&desc) != EPIGEMM_STATUS_SUCCESS) std::abort();
  epigemm_context_t bad_ctx = nullptr;
  epigemm_gemm_desc_t bad_desc = nullptr;
  int kind = in.pick(4);
  switch (kind) {
    case 0:  // destroyed
      epigemm_context_destroy(ctx);
      epigemm_gemm_desc_destroy(desc);
      bad_ctx = ctx;
      bad_desc = desc;
      ctx = nullptr;
      desc = nullptr;
      break;
    case 1:  // of the other kind
      bad_ctx = reinterpret_cast<epigemm_context_t>(desc);
      bad_desc = reinterpret_cast<epigemm_gemm_desc_t>(ctx);
      break;
    case 2:  // never created: an arbitrary value
      bad_ctx = reinterpret_cast<epigemm_context_t>(uintptr_t(in.u32()) * 16 + 0x1000);
      bad_desc = reinterpret_cast<epigemm_gemm_desc_t>(uintptr_t(in.u32()) * 16 + 0x1000);
      break;
    default:  // a stack address
      bad_ctx = reinterpret_cast<epigemm_context_t>(&kind);
      bad_desc = reinterpret_cast<epigemm_gemm_desc_t>(&kind);
      break;
  }
  const std::string text = "handle misuse, kind " + std::to_string(kind);
  float d[4] = {1, 2, 3, 4};
  const epigemm_matrix_t m{d, EPIGEMM_DTYPE_F32, 2, 2, 2, EPIGEMM_MEMORY_HOST};
  epigemm_backend_t backend_out = EPIGEMM_BACKEND_CPU;
  size_t bytes = 7;
  const epigemm_tensor_t t{nullptr, EPIGEMM_DTYPE_F32, 0, 0, 1, EPIGEMM_MEMORY_HOST};
  for (int op = in.pick(4) + 1; op > 0; --op) {
    epigemm_status_t s = EPIGEMM_STATUS_SUCCESS;
    switch (in.pick(15)) {
      case 0: s = epigemm_context_destroy(bad_ctx); break;
      case 1: s = epigemm_gemm_desc_destroy(bad_desc); break;
      case 2: s = epigemm_context_set_backend(bad_ctx, EPIGEMM_BACKEND_REFERENCE); break;
      case 3: s = epigemm_context_last_backend(bad_ctx, &backend_out, nullptr); break;
      case 4: s = epigemm_gemm_desc_set_epilogue(bad_desc, EPIGEMM_EPILOGUE_BIAS); break;
      case 5: s = epigemm_gemm_desc_set_scalars(bad_desc, 2.0f, 1.0f); break;
      case 6: s = epigemm_gemm(bad_ctx, desc ? desc : bad_desc, &m, &m, &m, nullptr, 0, nullptr); break;
      case 7: s = epigemm_gemm(ctx ? ctx : bad_ctx, bad_desc, &m, &m, &m, nullptr, 0, nullptr); break;
      case 8: s = epigemm_gemm_workspace_size(ctx ? ctx : bad_ctx, bad_desc, &m, &m, &m, &bytes); break;
      case 9: s = epigemm_linear_fprop(bad_ctx, &t, &t, nullptr, nullptr, &t, nullptr, 0, nullptr); break;
      case 10:
        s = epigemm_backend_usable(bad_ctx, EPIGEMM_BACKEND_REFERENCE) == 0 ? EPIGEMM_STATUS_INVALID_VALUE
                                                                           : EPIGEMM_STATUS_SUCCESS;
        break;
      case 11: s = epigemm_gemm_desc_set_activation(bad_desc, EPIGEMM_ACTIVATION_RELU); break;
      case 12:
        s = epigemm_linear_fprop_act(bad_ctx, &t, &t, nullptr, EPIGEMM_ACTIVATION_SILU, &t, &t, nullptr, 0, nullptr);
        break;
      case 13:
        s = epigemm_linear_dgrad_act(bad_ctx, &t, &t, EPIGEMM_ACTIVATION_GELU_ERF, &t, nullptr, &t, nullptr, 0,
                                     nullptr);
        break;
      default:
        if (epigemm_context_last_error(bad_ctx) == nullptr) finding("last_error returned NULL", text);
        s = EPIGEMM_STATUS_INVALID_VALUE;
        break;
    }
    if (s != EPIGEMM_STATUS_INVALID_VALUE) finding(std::string("a bad handle got ") + status_text(s), text);
  }
  if (backend_out != EPIGEMM_BACKEND_CPU || bytes != 7) finding("written through a bad handle", text);
  if (d[0] != 1 || d[1] != 2 || d[2] != 3 || d[3] != 4) finding("D written through a bad handle", text);
  if (desc != nullptr && epigemm_gemm_desc_destroy(desc) != EPIGEMM_STATUS_SUCCESS) finding("live desc refused", text);
  if (ctx != nullptr && epigemm_context_destroy(ctx) != EPIGEMM_STATUS_SUCCESS) finding("live ctx refused", text);
}

}  // namespace
}  // namespace epigemm_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace epigemm_fuzz;
  Input in(data, size);
  Call call;
  call.entry = Entry(in.pick(int(Entry::count)));
  switch (call.entry) {
    case Entry::gemm:
    case Entry::gemm_size:
      run_gemm(in, call);
      break;
    case Entry::classic:
    case Entry::classic_size:
      run_classic(in, call);
      break;
    case Entry::fprop:
    case Entry::fprop_act:
      call.pass = Pass::fprop;
      call.layer_activation = call.entry == Entry::fprop_act;
      run_layer(in, call);
      break;
    case Entry::dgrad:
    case Entry::dgrad_act:
      call.pass = Pass::dgrad;
      call.layer_activation = call.entry == Entry::dgrad_act;
      run_layer(in, call);
      break;
    case Entry::wgrad:
      call.pass = Pass::wgrad;
      run_layer(in, call);
      break;
    case Entry::linear_size:
      run_linear_size(in);
      break;
    case Entry::handles:
    case Entry::count:
      run_handles(in);
      break;
  }
  return 0;
}
