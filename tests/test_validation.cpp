// Bad input through the public C API (epigemm.h only): docs/conventions.md "Errors" and SPEC §4.
// Every row of the table below is one bad call through the description call, the classic call
// or a layer call. Each asserts
//   - the exact status code,
//   - that epigemm_context_last_error names the argument (the message starts with it) and
//     contains the values given and expected (as whole numbers or words),
//   - that no buffer was touched: every operand lives in its own arena filled with a sentinel
//     byte, and every arena is compared byte for byte after the call,
//   - that a valid call on the same context right afterwards succeeds and clears the message.
// Shapes are chosen so that every number in a message is unambiguous:
//   GEMM level  gemm_m = 13, gemm_n = 11, gemm_k = 7
//   layer level tokens = 11, in_features = 7, out_features = 13
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "epigemm/epigemm.h"
#include "harness/harness.hpp"

#ifdef EPIGEMM_TESTS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace {

constexpr int64_t kM = 13, kN = 11, kK = 7;
constexpr int64_t kTokens = 11, kIn = 7, kOut = 13;
constexpr size_t kArenaBytes = size_t(1) << 16;  // any operand of any row fits, with room to spare

// ---- arenas: one per operand, filled with its own sentinel byte --------------------------------

enum Slot { kA, kB, kD, kAux, kBias, kBiasGrad, kX, kW, kY, kDY, kDX, kDW, kPreGelu, kSlots };
const char* const kSlotNames[kSlots] = {"A", "B",  "D",  "aux", "bias", "bias_grad", "X",
                                        "W", "Y",  "dY", "dX",  "dW",   "pre_gelu"};

struct Arena {
  std::vector<unsigned char> bytes;
  unsigned char fill = 0;
  void reset(unsigned char f) {
    fill = f;
    bytes.assign(kArenaBytes, f);
  }
  // Offset of the first byte that is no longer the sentinel, or -1.
  int64_t first_change() const {
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != fill) return int64_t(i);
    }
    return -1;
  }
};

// ---- one call, valid until a row's mutation breaks it ------------------------------------------

enum class Entry {
  desc,                  // epigemm_gemm with a description
  desc_workspace_size,   // epigemm_gemm_workspace_size (validates as epigemm_gemm does)
  classic,               // epigemm_classic_gemm
  classic_workspace_size,  // epigemm_classic_gemm_workspace_size (validates as the call does)
  fprop,                 // epigemm_linear_fprop
  dgrad,                 // epigemm_linear_dgrad
  fprop_act,             // epigemm_linear_fprop_act (pre_gelu is its pre_act)
  dgrad_act,             // epigemm_linear_dgrad_act (likewise)
  wgrad,                 // epigemm_linear_wgrad
  context_set_backend,   // epigemm_context_set_backend(ctx, setup.backend)
  last_backend_null,     // epigemm_context_last_backend(ctx, NULL, NULL)
};

int64_t at_least_1(int64_t v) { return v < 1 ? 1 : v; }
bool is_forward_pass(Entry e) { return e == Entry::fprop || e == Entry::fprop_act; }

struct BadCall {
  Entry entry = Entry::desc;
  std::vector<Arena> arenas = std::vector<Arena>(kSlots);

  // GEMM level.
  epigemm_op_t transa = EPIGEMM_OP_N, transb = EPIGEMM_OP_N;
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_DEFAULT;
  // The description's (set on every description) and the _act layer calls' activation.
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_GELU_TANH;
  epigemm_matrix_t A{}, B{}, D{}, aux{};
  epigemm_vector_t bias{}, bias_grad{};
  bool with_bias = false, with_aux = false, with_bias_grad = false;
  epigemm_backend_t backend = EPIGEMM_BACKEND_REFERENCE;

  // Layer level.
  epigemm_tensor_t X{}, W{}, Y{}, dY{}, dX{}, dW{}, pre_gelu{};
  bool with_pre_gelu = false;

  // Arguments passed as NULL ("ctx", "desc", "A", ...).
  std::set<std::string> null_args;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  void* base(Slot s) { return arenas[s].bytes.data(); }
  unsigned char* bytes(Slot s) { return arenas[s].bytes.data(); }

  epigemm_matrix_t matrix(Slot s, int64_t rows, int64_t cols) {
    return epigemm_matrix_t{base(s), EPIGEMM_DTYPE_F32, rows, cols, at_least_1(rows), EPIGEMM_MEMORY_HOST};
  }
  epigemm_tensor_t tensor(Slot s, int64_t rows, int64_t cols) {
    return epigemm_tensor_t{base(s), EPIGEMM_DTYPE_F32, rows, cols, at_least_1(cols), EPIGEMM_MEMORY_HOST};
  }
  epigemm_vector_t vector(Slot s, int64_t length) {
    return epigemm_vector_t{base(s), EPIGEMM_DTYPE_F32, length, EPIGEMM_MEMORY_HOST};
  }

  // A valid GEMM-level call of this epilogue and these transposes.
  void gemm(epigemm_epilogue_t e, epigemm_op_t ta = EPIGEMM_OP_N, epigemm_op_t tb = EPIGEMM_OP_N,
            int64_t m = kM, int64_t n = kN, int64_t k = kK) {
    epilogue = e;
    transa = ta;
    transb = tb;
    A = ta == EPIGEMM_OP_N ? matrix(kA, m, k) : matrix(kA, k, m);
    B = tb == EPIGEMM_OP_N ? matrix(kB, k, n) : matrix(kB, n, k);
    D = matrix(kD, m, n);
    with_bias = e == EPIGEMM_EPILOGUE_BIAS || e == EPIGEMM_EPILOGUE_ACT_BIAS ||
                e == EPIGEMM_EPILOGUE_ACT_AUX_BIAS;
    with_aux = e == EPIGEMM_EPILOGUE_ACT_AUX || e == EPIGEMM_EPILOGUE_ACT_AUX_BIAS ||
               e == EPIGEMM_EPILOGUE_DACT || e == EPIGEMM_EPILOGUE_DACT_BGRAD;
    with_bias_grad = e == EPIGEMM_EPILOGUE_DACT_BGRAD || e == EPIGEMM_EPILOGUE_BGRADB ||
                     e == EPIGEMM_EPILOGUE_BGRADA;
    aux = matrix(kAux, m, n);
    bias = vector(kBias, m);
    bias_grad = vector(kBiasGrad, e == EPIGEMM_EPILOGUE_BGRADB ? n : m);
  }

  // A valid layer-level call of this pass.
  void layer(Entry pass, bool gelu, bool bias_vector) {
    entry = pass;
    X = tensor(kX, kTokens, kIn);
    W = tensor(kW, kOut, kIn);
    Y = tensor(kY, kTokens, kOut);
    dY = tensor(kDY, kTokens, kOut);
    dX = tensor(kDX, kTokens, kIn);
    dW = tensor(kDW, kOut, kIn);
    with_pre_gelu = gelu;
    pre_gelu = tensor(kPreGelu, kTokens, is_forward_pass(pass) ? kOut : kIn);
    with_bias = is_forward_pass(pass) && bias_vector;
    with_bias_grad = !is_forward_pass(pass) && bias_vector;
    bias = vector(kBias, kOut);
    bias_grad = vector(kBiasGrad, pass == Entry::wgrad ? kOut : kIn);
  }

  BadCall() {
    // Inputs hold small finite values whatever their dtype (0x3c3c: f16 1.06, bf16 0.0115);
    // outputs hold a pattern no valid result of these inputs would produce bit for bit.
    const unsigned char fills[kSlots] = {0x3c, 0x3c, 0xa5, 0xa6, 0x3c, 0xa7, 0x3c,
                                         0x3c, 0xa8, 0x3c, 0xa9, 0xaa, 0xab};
    for (int s = 0; s < kSlots; ++s) arenas[s].reset(fills[s]);
    gemm(EPIGEMM_EPILOGUE_DEFAULT);
    layer(Entry::fprop, false, false);
    entry = Entry::desc;
  }

  bool given(const char* name) const { return null_args.count(name) == 0; }

  epigemm_status_t run(epigemm_context_t ctx) {
    epigemm_context_t c = given("ctx") ? ctx : nullptr;
    switch (entry) {
      case Entry::desc:
      case Entry::desc_workspace_size: {
        epigemm_gemm_desc_t desc = nullptr;
        EXPECT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
        EXPECT_EQ(epigemm_gemm_desc_set_transpose(desc, transa, transb), EPIGEMM_STATUS_SUCCESS);
        EXPECT_EQ(epigemm_gemm_desc_set_epilogue(desc, epilogue), EPIGEMM_STATUS_SUCCESS);
        // The setter stores any value; the call validates it.
        EXPECT_EQ(epigemm_gemm_desc_set_activation(desc, activation), EPIGEMM_STATUS_SUCCESS);
        EXPECT_EQ(epigemm_gemm_desc_set_bias(desc, with_bias ? &bias : nullptr), EPIGEMM_STATUS_SUCCESS);
        EXPECT_EQ(epigemm_gemm_desc_set_aux(desc, with_aux ? &aux : nullptr), EPIGEMM_STATUS_SUCCESS);
        EXPECT_EQ(epigemm_gemm_desc_set_bias_grad(desc, with_bias_grad ? &bias_grad : nullptr),
                  EPIGEMM_STATUS_SUCCESS);
        EXPECT_EQ(epigemm_gemm_desc_set_backend(desc, backend), EPIGEMM_STATUS_SUCCESS);
        epigemm_gemm_desc_t d = given("desc") ? desc : nullptr;
        const epigemm_matrix_t* a = given("A") ? &A : nullptr;
        const epigemm_matrix_t* b = given("B") ? &B : nullptr;
        const epigemm_matrix_t* dd = given("D") ? &D : nullptr;
        epigemm_status_t status;
        if (entry == Entry::desc) {
          status = epigemm_gemm(c, d, a, b, dd, workspace, workspace_bytes, nullptr);
        } else {
          size_t bytes = 12345;
          status = epigemm_gemm_workspace_size(c, d, a, b, dd, given("bytes") ? &bytes : nullptr);
        }
        epigemm_gemm_desc_destroy(desc);
        return status;
      }
      case Entry::classic:
      case Entry::classic_workspace_size: {
        // The classic call's bias is the bias gradient (an output) when grad is set.
        const bool grad = epilogue == EPIGEMM_EPILOGUE_DGELU ||
                          epilogue == EPIGEMM_EPILOGUE_DGELU_BGRAD ||
                          epilogue == EPIGEMM_EPILOGUE_BGRADB;
        const epigemm_vector_t* b = with_bias ? &bias : with_bias_grad ? &bias_grad : nullptr;
        EXPECT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
        const epigemm_matrix_t* a_arg = given("A") ? &A : nullptr;
        const epigemm_matrix_t* b_arg = given("B") ? &B : nullptr;
        const epigemm_matrix_t* d_arg = given("D") ? &D : nullptr;
        if (entry == Entry::classic_workspace_size) {
          size_t bytes = 12345;
          return epigemm_classic_gemm_workspace_size(c, a_arg, b_arg, d_arg, b, with_aux ? &aux : nullptr,
                                                     transa, transb, grad ? 1 : 0, 0,
                                                     given("bytes") ? &bytes : nullptr);
        }
        return epigemm_classic_gemm(c, a_arg, b_arg, d_arg, b, with_aux ? &aux : nullptr, transa,
                                    transb, grad ? 1 : 0, workspace, workspace_bytes, 0, nullptr);
      }
      case Entry::fprop:
        EXPECT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
        return epigemm_linear_fprop(c, given("X") ? &X : nullptr, given("W") ? &W : nullptr,
                                    with_bias ? &bias : nullptr, with_pre_gelu ? &pre_gelu : nullptr,
                                    given("Y") ? &Y : nullptr, workspace, workspace_bytes, nullptr);
      case Entry::dgrad:
        EXPECT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
        return epigemm_linear_dgrad(c, given("dY") ? &dY : nullptr, given("W") ? &W : nullptr,
                                    with_pre_gelu ? &pre_gelu : nullptr,
                                    with_bias_grad ? &bias_grad : nullptr,
                                    given("dX") ? &dX : nullptr, workspace, workspace_bytes, nullptr);
      case Entry::fprop_act:
        EXPECT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
        return epigemm_linear_fprop_act(c, given("X") ? &X : nullptr, given("W") ? &W : nullptr,
                                        with_bias ? &bias : nullptr, activation,
                                        with_pre_gelu ? &pre_gelu : nullptr, given("Y") ? &Y : nullptr,
                                        workspace, workspace_bytes, nullptr);
      case Entry::dgrad_act:
        EXPECT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
        return epigemm_linear_dgrad_act(c, given("dY") ? &dY : nullptr, given("W") ? &W : nullptr,
                                        activation, with_pre_gelu ? &pre_gelu : nullptr,
                                        with_bias_grad ? &bias_grad : nullptr,
                                        given("dX") ? &dX : nullptr, workspace, workspace_bytes, nullptr);
      case Entry::wgrad:
        EXPECT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
        return epigemm_linear_wgrad(c, given("X") ? &X : nullptr, given("dY") ? &dY : nullptr,
                                    given("dW") ? &dW : nullptr, 0,
                                    with_bias_grad ? &bias_grad : nullptr, workspace,
                                    workspace_bytes, nullptr);
      case Entry::context_set_backend:
        return epigemm_context_set_backend(c, backend);
      case Entry::last_backend_null:
        return epigemm_context_last_backend(c, nullptr, nullptr);
    }
    return EPIGEMM_STATUS_INTERNAL_ERROR;
  }
};

// ---- message checks ----------------------------------------------------------------------------

// `word` occurs in `text` not glued to letters, digits or '_' on either side.
bool contains_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    auto glued = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    const bool left_ok = at == 0 || !glued(text[at - 1]);
    const size_t end = at + word.size();
    const bool right_ok = end == text.size() || !glued(text[end]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

// `number` occurs as a whole number: no digit (or minus sign, for a positive one) next to it.
bool contains_number(const std::string& text, int64_t number) {
  const std::string digits = std::to_string(number);
  for (size_t at = text.find(digits); at != std::string::npos; at = text.find(digits, at + 1)) {
    const bool left_ok = at == 0 || (!std::isdigit(static_cast<unsigned char>(text[at - 1])) &&
                                     (number < 0 || text[at - 1] != '-'));
    const size_t end = at + digits.size();
    const bool right_ok = end == text.size() || !std::isdigit(static_cast<unsigned char>(text[end]));
    if (left_ok && right_ok) return true;
  }
  return false;
}

// ---- the table ---------------------------------------------------------------------------------

struct Case {
  std::string name;
  std::function<void(BadCall&)> make;  // a valid setup, then the one thing that is wrong
  epigemm_status_t status = EPIGEMM_STATUS_INVALID_VALUE;
  std::string argument;               // the message starts with it
  std::vector<std::string> words;     // ... and names these
  std::vector<int64_t> numbers;       // ... and gives these values (given and expected)
  // Returns a reason to skip this row on this machine, or "".
  std::function<std::string(epigemm_context_t)> skip_if = nullptr;
};

// gtest prints a failing parameter with this, instead of its bytes.
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

using E = epigemm_epilogue_t;
constexpr E kDefault = EPIGEMM_EPILOGUE_DEFAULT, kBiasE = EPIGEMM_EPILOGUE_BIAS,
            kGeluAux = EPIGEMM_EPILOGUE_GELU_AUX, kGeluAuxBias = EPIGEMM_EPILOGUE_GELU_AUX_BIAS,
            kDGelu = EPIGEMM_EPILOGUE_DGELU, kDGeluBgrad = EPIGEMM_EPILOGUE_DGELU_BGRAD,
            kBgradB = EPIGEMM_EPILOGUE_BGRADB, kBgradA = EPIGEMM_EPILOGUE_BGRADA,
            kAct = EPIGEMM_EPILOGUE_ACT, kActBias = EPIGEMM_EPILOGUE_ACT_BIAS,
            kActAux = EPIGEMM_EPILOGUE_ACT_AUX, kDAct = EPIGEMM_EPILOGUE_DACT,
            kDActBgrad = EPIGEMM_EPILOGUE_DACT_BGRAD;
constexpr epigemm_activation_t kGeluErf = EPIGEMM_ACTIVATION_GELU_ERF, kRelu = EPIGEMM_ACTIVATION_RELU,
                               kSilu = EPIGEMM_ACTIVATION_SILU, kIdentity = EPIGEMM_ACTIVATION_IDENTITY;
constexpr epigemm_op_t N = EPIGEMM_OP_N, T = EPIGEMM_OP_T;
constexpr int64_t kTwo58 = int64_t(1) << 58, kTwo60 = int64_t(1) << 60;

// The bytes a column-major f32 matrix spans, for overlap messages.
int64_t span_f32(const epigemm_matrix_t& m) { return ((m.cols - 1) * m.ld + m.rows) * 4; }

std::string skip_if_usable(epigemm_context_t ctx, epigemm_backend_t backend) {
  if (epigemm_backend_usable(ctx, backend)) {
    return std::string("backend ") + epigemm_backend_name(backend) +
           " is usable on this machine, so it is not a NOT_SUPPORTED case here";
  }
  return "";
}

std::vector<Case> gemm_level_cases() {
  std::vector<Case> c;
  const auto add = [&](Case x) { c.push_back(std::move(x)); };

  // -- shapes of A, B, D for each transa / transb (gemm_m, gemm_k come from A; gemm_n from B) --
  add({"desc_B_rows_NN", [](BadCall& s) { s.gemm(kDefault, N, N); s.B.rows = 8; s.B.ld = 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A"}, {8, 7}});
  add({"desc_B_rows_TN", [](BadCall& s) { s.gemm(kDefault, T, N); s.B.rows = 6; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A"}, {6, 7}});
  add({"desc_B_cols_NT", [](BadCall& s) { s.gemm(kDefault, N, T); s.B.cols = 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A"}, {8, 7}});
  add({"desc_B_cols_TT", [](BadCall& s) { s.gemm(kDefault, T, T); s.B.cols = 6; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A"}, {6, 7}});
  add({"desc_A_cols_NN", [](BadCall& s) { s.gemm(kDefault, N, N); s.A.cols = 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A", "columns"}, {7, 8}});
  add({"desc_A_rows_TN", [](BadCall& s) { s.gemm(kDefault, T, N); s.A.rows = 8; s.A.ld = 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A", "rows"}, {7, 8}});
  add({"desc_A_not_transposed_TT",
       [](BadCall& s) { s.gemm(kDefault, T, T); s.A = s.matrix(kA, kM, kK); },  // stored as for N
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A"}, {7, 13}});
  add({"desc_A_cols_NT", [](BadCall& s) { s.gemm(kDefault, N, T); s.A.cols = 6; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"gemm_k", "A"}, {7, 6}});
  add({"desc_D_rows_NN", [](BadCall& s) { s.gemm(kDefault, N, N); s.D.rows = 14; s.D.ld = 14; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"gemm_m", "A"}, {14, 13}});
  add({"desc_D_cols_NN", [](BadCall& s) { s.gemm(kDefault, N, N); s.D.cols = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"gemm_n", "B"}, {12, 11}});
  add({"desc_D_rows_TT", [](BadCall& s) { s.gemm(kDefault, T, T); s.D.rows = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"gemm_m", "A"}, {12, 13}});
  add({"desc_D_cols_NT", [](BadCall& s) { s.gemm(kDefault, N, T); s.D.cols = 10; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"gemm_n", "B"}, {10, 11}});
  add({"desc_D_transposed_TN", [](BadCall& s) { s.gemm(kDefault, T, N); s.D = s.matrix(kD, kN, kM); s.D.ld = kM; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"gemm_m"}, {11, 13}});

  // -- aux, bias, bias_grad extents (bias: gemm_m; bias_grad: gemm_m for DGELU_BGRAD, gemm_n for BGRADB)
  add({"desc_aux_rows_GELU_AUX", [](BadCall& s) { s.gemm(kGeluAux); s.aux.rows = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"GELU_AUX", "gemm_m"}, {12, 13}});
  add({"desc_aux_cols_DGELU", [](BadCall& s) { s.gemm(kDGelu); s.aux.cols = 10; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"DGELU", "gemm_n"}, {10, 11}});
  add({"desc_aux_transposed_DGELU_BGRAD_TT",
       [](BadCall& s) { s.gemm(kDGeluBgrad, T, T); s.aux = s.matrix(kAux, kN, kM); s.aux.ld = kM; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"DGELU_BGRAD", "gemm_m"}, {11, 13}});
  add({"desc_bias_length_n_for_BIAS", [](BadCall& s) { s.gemm(kBiasE); s.bias.length = kN; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BIAS", "gemm_m"}, {11, 13}});
  add({"desc_bias_length_for_GELU_AUX_BIAS_TN", [](BadCall& s) { s.gemm(kGeluAuxBias, T, N); s.bias.length = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"GELU_AUX_BIAS", "gemm_m"}, {12, 13}});
  add({"desc_bias_grad_length_n_for_DGELU_BGRAD", [](BadCall& s) { s.gemm(kDGeluBgrad); s.bias_grad.length = kN; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"DGELU_BGRAD", "gemm_m"}, {11, 13}});
  add({"desc_bias_grad_length_m_for_BGRADB", [](BadCall& s) { s.gemm(kBgradB); s.bias_grad.length = kM; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"BGRADB", "gemm_n"}, {13, 11}});
  add({"desc_bias_grad_length_k_for_BGRADB_NT", [](BadCall& s) { s.gemm(kBgradB, N, T); s.bias_grad.length = kK; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"BGRADB", "gemm_n"}, {7, 11}});
  add({"workspace_size_bias_length", [](BadCall& s) { s.gemm(kBiasE); s.bias.length = 12; s.entry = Entry::desc_workspace_size; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BIAS", "gemm_m"}, {12, 13}});

  // -- missing pointers ----------------------------------------------------------------------
  add({"desc_null_desc", [](BadCall& s) { s.null_args = {"desc"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "desc", {"NULL"}, {}});
  add({"desc_null_A", [](BadCall& s) { s.null_args = {"A"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"NULL"}, {}});
  add({"desc_null_B", [](BadCall& s) { s.null_args = {"B"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"NULL"}, {}});
  add({"desc_null_D", [](BadCall& s) { s.null_args = {"D"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"NULL"}, {}});
  add({"desc_null_A_data", [](BadCall& s) { s.A.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"NULL"}, {13, 7}});
  add({"desc_null_B_data_NT", [](BadCall& s) { s.gemm(kDefault, N, T); s.B.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"NULL"}, {11, 7}});
  add({"desc_null_D_data", [](BadCall& s) { s.D.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"NULL"}, {13, 11}});
  add({"desc_null_bias_data", [](BadCall& s) { s.gemm(kBiasE); s.bias.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"NULL"}, {13}});
  add({"desc_null_aux_data_GELU_AUX", [](BadCall& s) { s.gemm(kGeluAux); s.aux.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"NULL"}, {13, 11}});
  add({"desc_null_bias_grad_data_BGRADB", [](BadCall& s) { s.gemm(kBgradB); s.bias_grad.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"NULL"}, {11}});
  add({"workspace_size_null_bytes", [](BadCall& s) { s.entry = Entry::desc_workspace_size; s.null_args = {"bytes"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "bytes", {"NULL"}, {}});
  add({"last_backend_null_out", [](BadCall& s) { s.entry = Entry::last_backend_null; },
       EPIGEMM_STATUS_INVALID_VALUE, "backend", {"NULL"}, {}});

  // -- leading dimensions --------------------------------------------------------------------
  add({"desc_A_ld_less_than_rows", [](BadCall& s) { s.A.ld = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"ld"}, {12, 13}});
  add({"desc_B_ld_zero", [](BadCall& s) { s.B.ld = 0; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"ld"}, {0, 7}});
  add({"desc_D_ld_negative", [](BadCall& s) { s.D.ld = -13; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"ld"}, {-13, 13}});
  add({"desc_aux_ld_less_than_rows", [](BadCall& s) { s.gemm(kGeluAux); s.aux.ld = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"ld"}, {12, 13}});
  add({"desc_B_ld_zero_TT", [](BadCall& s) { s.gemm(kDefault, T, T); s.B.ld = 0; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"ld"}, {0, 11}});

  // -- negative sizes ------------------------------------------------------------------------
  add({"desc_A_rows_negative", [](BadCall& s) { s.A.rows = -13; },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"rows"}, {-13, 0}});
  add({"desc_B_cols_negative", [](BadCall& s) { s.B.cols = -11; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"columns"}, {-11, 0}});
  add({"desc_D_cols_negative", [](BadCall& s) { s.D.cols = -11; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"columns"}, {-11, 0}});
  add({"desc_aux_rows_negative", [](BadCall& s) { s.gemm(kDGelu); s.aux.rows = -13; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"rows"}, {-13, 0}});
  add({"desc_bias_length_negative", [](BadCall& s) { s.gemm(kBiasE); s.bias.length = -13; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"length"}, {-13, 0}});
  add({"desc_bias_grad_length_negative", [](BadCall& s) { s.gemm(kBgradB); s.bias_grad.length = -11; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"length"}, {-11, 0}});

  // -- enum values the header does not define ------------------------------------------------
  add({"desc_A_dtype_out_of_range", [](BadCall& s) { s.A.dtype = epigemm_dtype_t(7); },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"dtype"}, {7}});
  add({"desc_B_dtype_negative", [](BadCall& s) { s.B.dtype = epigemm_dtype_t(-1); },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"dtype"}, {-1}});
  add({"desc_D_memory_out_of_range", [](BadCall& s) { s.D.memory = epigemm_memory_t(5); },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"memory"}, {5}});
  add({"desc_bias_dtype_out_of_range", [](BadCall& s) { s.gemm(kBiasE); s.bias.dtype = epigemm_dtype_t(3); },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"dtype"}, {3}});
  add({"desc_aux_memory_out_of_range", [](BadCall& s) { s.gemm(kDGelu); s.aux.memory = epigemm_memory_t(2); },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"memory"}, {2}});
  add({"desc_bias_grad_dtype_out_of_range", [](BadCall& s) { s.gemm(kBgradB); s.bias_grad.dtype = epigemm_dtype_t(9); },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"dtype"}, {9}});
  add({"desc_transa_out_of_range", [](BadCall& s) { s.transa = epigemm_op_t(2); },
       EPIGEMM_STATUS_INVALID_VALUE, "transa", {}, {2, 0, 1}});
  add({"desc_transb_negative", [](BadCall& s) { s.transb = epigemm_op_t(-1); },
       EPIGEMM_STATUS_INVALID_VALUE, "transb", {}, {-1, 0, 1}});
  add({"desc_epilogue_out_of_range", [](BadCall& s) { s.epilogue = epigemm_epilogue_t(10); },
       EPIGEMM_STATUS_INVALID_VALUE, "epilogue", {}, {10, 0, 9}});
  add({"desc_epilogue_negative", [](BadCall& s) { s.epilogue = epigemm_epilogue_t(-1); },
       EPIGEMM_STATUS_INVALID_VALUE, "epilogue", {}, {-1, 0, 9}});
  add({"desc_backend_out_of_range", [](BadCall& s) { s.backend = epigemm_backend_t(9); },
       EPIGEMM_STATUS_INVALID_VALUE, "backend", {}, {9, 0, 5}});
  add({"context_set_backend_out_of_range",
       [](BadCall& s) { s.entry = Entry::context_set_backend; s.backend = epigemm_backend_t(6); },
       EPIGEMM_STATUS_INVALID_VALUE, "backend", {}, {6, 0, 5}});

  // -- dtype combinations (A and B alike; D f32 or A's dtype) ---------------------------------
  add({"desc_A_f16_B_bf16",
       [](BadCall& s) { s.A.dtype = EPIGEMM_DTYPE_F16; s.B.dtype = EPIGEMM_DTYPE_BF16; s.D.dtype = EPIGEMM_DTYPE_F16; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"bf16", "f16", "A"}, {}});
  add({"desc_A_f32_B_f16", [](BadCall& s) { s.B.dtype = EPIGEMM_DTYPE_F16; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"f16", "f32", "A"}, {}});
  add({"desc_D_bf16_A_f16",
       [](BadCall& s) { s.A.dtype = s.B.dtype = EPIGEMM_DTYPE_F16; s.D.dtype = EPIGEMM_DTYPE_BF16; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"bf16", "f16", "f32", "A"}, {}});
  add({"desc_D_f16_A_bf16",
       [](BadCall& s) { s.A.dtype = s.B.dtype = EPIGEMM_DTYPE_BF16; s.D.dtype = EPIGEMM_DTYPE_F16; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"f16", "bf16", "f32"}, {}});
  add({"desc_D_bf16_A_f32", [](BadCall& s) { s.D.dtype = EPIGEMM_DTYPE_BF16; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"bf16", "f32", "A"}, {}});

  // -- the epilogue does not fit the operands given -----------------------------------------
  add({"desc_bias_set_with_DEFAULT", [](BadCall& s) { s.gemm(kDefault); s.with_bias = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"DEFAULT", "set"}, {}});
  add({"desc_bias_set_with_DGELU", [](BadCall& s) { s.gemm(kDGelu); s.with_bias = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"DGELU", "set"}, {}});
  add({"desc_bias_missing_for_GELU_AUX_BIAS", [](BadCall& s) { s.gemm(kGeluAuxBias); s.with_bias = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"GELU_AUX_BIAS", "missing", "gemm_m"}, {13}});
  add({"desc_aux_missing_for_DGELU", [](BadCall& s) { s.gemm(kDGelu); s.with_aux = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"DGELU", "missing"}, {13, 11}});
  add({"desc_aux_missing_for_GELU_AUX", [](BadCall& s) { s.gemm(kGeluAux); s.with_aux = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"GELU_AUX", "missing"}, {13, 11}});
  add({"desc_aux_missing_for_DGELU_BGRAD_with_bias_grad", [](BadCall& s) { s.gemm(kDGeluBgrad); s.with_aux = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"DGELU_BGRAD", "missing"}, {13, 11}});
  add({"desc_aux_set_with_BIAS", [](BadCall& s) { s.gemm(kBiasE); s.with_aux = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"BIAS", "set"}, {}});
  add({"desc_bias_grad_set_with_BIAS", [](BadCall& s) { s.gemm(kBiasE); s.with_bias_grad = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"BIAS", "set"}, {}});
  add({"desc_bias_grad_missing_for_BGRADB", [](BadCall& s) { s.gemm(kBgradB); s.with_bias_grad = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"BGRADB", "missing"}, {11}});
  add({"desc_bias_grad_missing_for_DGELU_BGRAD", [](BadCall& s) { s.gemm(kDGeluBgrad); s.with_bias_grad = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"DGELU_BGRAD", "missing"}, {13}});

  // -- activations: the value, and the operands of ACT, ACT_BIAS, BGRADA and of the activation
  //    epilogues under other activations (the message names the epilogue with its activation) --
  add({"desc_activation_out_of_range", [](BadCall& s) { s.gemm(kAct); s.activation = epigemm_activation_t(5); },
       EPIGEMM_STATUS_INVALID_VALUE, "activation", {"identity", "silu"}, {5, 0, 4}});
  add({"desc_activation_negative", [](BadCall& s) { s.gemm(kDActBgrad); s.activation = epigemm_activation_t(-1); },
       EPIGEMM_STATUS_INVALID_VALUE, "activation", {"identity", "silu"}, {-1, 0, 4}});
  // An epilogue without an activation does not read the setting, but a value the header does not
  // define is refused all the same (never silently carried along).
  add({"desc_activation_out_of_range_with_DEFAULT",
       [](BadCall& s) { s.gemm(kDefault); s.activation = epigemm_activation_t(17); },
       EPIGEMM_STATUS_INVALID_VALUE, "activation", {}, {17, 0, 4}});
  add({"workspace_size_activation_out_of_range",
       [](BadCall& s) { s.gemm(kActBias); s.activation = epigemm_activation_t(6); s.entry = Entry::desc_workspace_size; },
       EPIGEMM_STATUS_INVALID_VALUE, "activation", {}, {6, 0, 4}});
  add({"desc_bias_set_with_ACT", [](BadCall& s) { s.gemm(kAct); s.activation = kRelu; s.with_bias = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"ACT", "relu", "set"}, {}});
  add({"desc_bias_missing_for_ACT_BIAS", [](BadCall& s) { s.gemm(kActBias); s.activation = kSilu; s.with_bias = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"ACT_BIAS", "silu", "missing", "gemm_m"}, {13}});
  add({"desc_bias_length_for_ACT_BIAS_TN",
       [](BadCall& s) { s.gemm(kActBias, T, N); s.activation = kGeluErf; s.bias.length = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"ACT_BIAS", "gelu_erf", "gemm_m"}, {12, 13}});
  add({"desc_aux_set_with_ACT", [](BadCall& s) { s.gemm(kAct); s.with_aux = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"ACT", "gelu_tanh", "set"}, {}});
  add({"desc_aux_set_with_ACT_BIAS", [](BadCall& s) { s.gemm(kActBias); s.activation = kIdentity; s.with_aux = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"ACT_BIAS", "identity", "set"}, {}});
  add({"desc_bias_grad_set_with_ACT_BIAS", [](BadCall& s) { s.gemm(kActBias); s.with_bias_grad = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"ACT_BIAS", "set"}, {}});
  add({"desc_aux_missing_for_DACT_relu", [](BadCall& s) { s.gemm(kDAct); s.activation = kRelu; s.with_aux = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"DACT", "relu", "missing"}, {13, 11}});
  add({"desc_aux_rows_ACT_AUX_silu", [](BadCall& s) { s.gemm(kActAux); s.activation = kSilu; s.aux.rows = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"ACT_AUX", "silu", "gemm_m"}, {12, 13}});
  add({"desc_bias_grad_missing_for_DACT_BGRAD_gelu_erf",
       [](BadCall& s) { s.gemm(kDActBgrad); s.activation = kGeluErf; s.with_bias_grad = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"DACT_BGRAD", "gelu_erf", "missing", "gemm_m"}, {13}});
  // BGRADA: bias_grad[i] = sum_p op(A)[i, p], length gemm_m (not gemm_n as BGRADB, nor gemm_k).
  add({"desc_bias_grad_missing_for_BGRADA", [](BadCall& s) { s.gemm(kBgradA); s.with_bias_grad = false; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"BGRADA", "missing", "gemm_m"}, {13}});
  add({"desc_bias_grad_length_n_for_BGRADA", [](BadCall& s) { s.gemm(kBgradA); s.bias_grad.length = kN; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"BGRADA", "gemm_m"}, {11, 13}});
  add({"desc_bias_grad_length_k_for_BGRADA_TT", [](BadCall& s) { s.gemm(kBgradA, T, T); s.bias_grad.length = kK; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"BGRADA", "gemm_m"}, {7, 13}});
  add({"desc_bias_set_with_BGRADA", [](BadCall& s) { s.gemm(kBgradA); s.with_bias = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BGRADA", "set"}, {}});
  add({"desc_aux_set_with_BGRADA", [](BadCall& s) { s.gemm(kBgradA); s.with_aux = true; },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"BGRADA", "set"}, {}});
  add({"desc_bias_grad_overlaps_A_BGRADA", [](BadCall& s) { s.gemm(kBgradA); s.bias_grad.data = s.bytes(kA) + 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"A", "output", "input"}, {52, 364}});

  // -- overlapping buffers (by address range; sizes in bytes appear in the message) -----------
  add({"desc_D_overlaps_A", [](BadCall& s) { s.D.data = s.bytes(kA) + 4; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"A", "output", "input"}, {572, 364}});
  add({"desc_D_overlaps_last_element_of_B",
       [](BadCall& s) { s.D.data = s.bytes(kB) + span_f32(s.B) - 4; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"B", "input"}, {572, 308}});
  add({"desc_aux_output_overlaps_D_GELU_AUX", [](BadCall& s) { s.gemm(kGeluAux); s.aux.data = s.bytes(kD) + 40; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"aux", "output"}, {572}});
  add({"desc_bias_grad_overlaps_B_BGRADB", [](BadCall& s) { s.gemm(kBgradB); s.bias_grad.data = s.bytes(kB) + 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"B", "output", "input"}, {44, 308}});
  add({"desc_D_overlaps_bias_BIAS", [](BadCall& s) { s.gemm(kBiasE); s.D.data = s.base(kBias); },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"bias", "input"}, {572, 52}});
  add({"desc_D_overlaps_aux_input_DGELU", [](BadCall& s) { s.gemm(kDGelu); s.D.data = s.bytes(kAux) + 100; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"aux", "input"}, {572}});
  add({"desc_bias_grad_overlaps_D_DGELU_BGRAD",
       [](BadCall& s) { s.gemm(kDGeluBgrad); s.bias_grad.data = s.bytes(kD) + 4 * 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"bias_grad", "output"}, {572, 52}});
  add({"desc_aux_output_overlaps_bias_GELU_AUX_BIAS",
       [](BadCall& s) { s.gemm(kGeluAuxBias); s.aux.data = s.base(kBias); },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"bias", "output", "input"}, {572, 52}});

  // The workspace is scratch the backend writes: it may overlap no operand.
  add({"desc_workspace_overlaps_D",
       [](BadCall& s) { s.workspace = s.bytes(kD) + 8; s.workspace_bytes = 64; },
       EPIGEMM_STATUS_INVALID_VALUE, "workspace", {"D", "output"}, {64, 572}});
  add({"desc_workspace_overlaps_A", [](BadCall& s) { s.workspace = s.base(kA); s.workspace_bytes = 1; },
       EPIGEMM_STATUS_INVALID_VALUE, "workspace", {"A", "input"}, {1, 364}});
  add({"desc_workspace_overlaps_aux_output_GELU_AUX",
       [](BadCall& s) { s.gemm(kGeluAux); s.workspace = s.bytes(kAux) + 568; s.workspace_bytes = 100; },
       EPIGEMM_STATUS_INVALID_VALUE, "workspace", {"aux", "output"}, {100, 572}});

  // -- memory spaces -------------------------------------------------------------------------
  add({"desc_A_device_rest_host", [](BadCall& s) { s.A.memory = EPIGEMM_MEMORY_DEVICE; },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"device", "host", "D"}, {}});
  add({"desc_D_device_rest_host", [](BadCall& s) { s.D.memory = EPIGEMM_MEMORY_DEVICE; },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"device", "host", "D"}, {}});
  add({"desc_bias_device_rest_host", [](BadCall& s) { s.gemm(kBiasE); s.bias.memory = EPIGEMM_MEMORY_DEVICE; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"device", "host"}, {}});
  add({"desc_aux_host_rest_device_on_reference",
       [](BadCall& s) {
         s.gemm(kGeluAux);
         s.A.memory = s.B.memory = s.D.memory = EPIGEMM_MEMORY_DEVICE;
       },
       EPIGEMM_STATUS_INVALID_VALUE, "aux", {"device", "host"}, {}});
  // Consistent device memory is valid; the reference backend, asked for by name, declines it.
  add({"desc_device_operands_on_reference",
       [](BadCall& s) { s.A.memory = s.B.memory = s.D.memory = EPIGEMM_MEMORY_DEVICE; },
       EPIGEMM_STATUS_NOT_SUPPORTED, "backend", {"reference", "host"}, {}});

  // -- a backend that is not compiled in or cannot run here: a status, never a crash ----------
  for (epigemm_backend_t b :
       {EPIGEMM_BACKEND_CPU, EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS}) {
    const std::string name = epigemm_backend_name(b);
    add({"desc_backend_" + name + "_not_usable", [b](BadCall& s) { s.backend = b; },
         EPIGEMM_STATUS_NOT_SUPPORTED, "backend", {name}, {},
         [b](epigemm_context_t ctx) { return skip_if_usable(ctx, b); }});
  }

  // -- operands beyond 2^60 bytes (the pointers are never dereferenced) -----------------------
  add({"desc_A_ld_spans_beyond_2p60", [](BadCall& s) { s.A.ld = kTwo58; },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"ld", "spans"}, {kTwo58, kTwo60}});
  add({"desc_single_column_beyond_2p60",
       [](BadCall& s) {  // ((1 - 1) ld + rows) * 4 bytes: only the rows term is too large
         s.gemm(kDefault, N, N, kTwo58 + 1, 1, 1);
       },
       EPIGEMM_STATUS_INVALID_VALUE, "A", {"spans"}, {kTwo58 + 1, kTwo60}});
  add({"desc_B_cols_overflow_int64", [](BadCall& s) { s.B.cols = int64_t(1) << 62; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"spans"}, {int64_t(1) << 62, kTwo60}});
  add({"desc_bias_length_beyond_2p60", [](BadCall& s) { s.gemm(kBiasE); s.bias.length = 2 * kTwo58; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"length"}, {2 * kTwo58, kTwo58}});

  // -- the classic call (epilogue from bias / pre_gelu_out / grad) ---------------------------
  add({"classic_bias_length_n_for_BIAS", [](BadCall& s) { s.entry = Entry::classic; s.gemm(kBiasE); s.bias.length = kN; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BIAS", "gemm_m"}, {11, 13}});
  add({"classic_grad_bias_length_m_for_BGRADB",
       [](BadCall& s) { s.entry = Entry::classic; s.gemm(kBgradB); s.bias_grad.length = kM; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BGRADB", "gemm_n", "gradient"}, {13, 11}});
  add({"classic_grad_gelu_bias_length_n_for_DGELU_BGRAD",
       [](BadCall& s) { s.entry = Entry::classic; s.gemm(kDGeluBgrad); s.bias_grad.length = kN; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"DGELU_BGRAD", "gemm_m"}, {11, 13}});
  // An empty pre_gelu_out with NULL data (tokens = 0) is not given: grad with a bias then means
  // BGRADB, and the message about the bias length says why.
  add({"classic_grad_pre_gelu_out_null_data_is_BGRADB",
       [](BadCall& s) { s.entry = Entry::classic; s.gemm(kDGeluBgrad); s.aux.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BGRADB", "gemm_n", "pre_gelu_out has NULL data"}, {13, 11}});
  add({"classic_pre_gelu_out_rows_GELU_AUX",
       [](BadCall& s) { s.entry = Entry::classic; s.gemm(kGeluAux); s.aux.rows = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_gelu_out", {"gemm_m"}, {12, 13}});
  add({"classic_null_D", [](BadCall& s) { s.entry = Entry::classic; s.null_args = {"D"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"NULL"}, {}});
  add({"classic_workspace_size_bias_length_n_for_BIAS",
       [](BadCall& s) { s.entry = Entry::classic_workspace_size; s.gemm(kBiasE); s.bias.length = kN; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BIAS", "gemm_m"}, {11, 13}});
  add({"classic_workspace_size_grad_bias_length_m_for_BGRADB",
       [](BadCall& s) { s.entry = Entry::classic_workspace_size; s.gemm(kBgradB); s.bias_grad.length = kM; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"BGRADB", "gemm_n"}, {13, 11}});
  add({"classic_workspace_size_null_D", [](BadCall& s) { s.entry = Entry::classic_workspace_size; s.null_args = {"D"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"NULL"}, {}});
  add({"classic_workspace_size_null_bytes",
       [](BadCall& s) { s.entry = Entry::classic_workspace_size; s.null_args = {"bytes"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "bytes", {"NULL"}, {}});
  add({"classic_transa_out_of_range", [](BadCall& s) { s.entry = Entry::classic; s.transa = epigemm_op_t(3); },
       EPIGEMM_STATUS_INVALID_VALUE, "transa", {}, {3}});
  add({"classic_B_ld_less_than_rows_TT",
       [](BadCall& s) { s.entry = Entry::classic; s.gemm(kDefault, T, T); s.B.ld = 10; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"ld"}, {10, 11}});
  add({"classic_pre_gelu_out_overlaps_D",
       [](BadCall& s) { s.entry = Entry::classic; s.gemm(kGeluAuxBias); s.aux.data = s.bytes(kD) + 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "D", {"pre_gelu_out", "output"}, {572}});
  add({"classic_grad_bias_overlaps_B",
       [](BadCall& s) { s.entry = Entry::classic; s.gemm(kBgradB); s.bias_grad.data = s.base(kB); },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"B", "input", "output"}, {44, 308}});
  add({"classic_A_f16_B_bf16",
       [](BadCall& s) { s.entry = Entry::classic; s.A.dtype = EPIGEMM_DTYPE_F16; s.B.dtype = EPIGEMM_DTYPE_BF16; },
       EPIGEMM_STATUS_INVALID_VALUE, "B", {"bf16", "f16"}, {}});
  add({"classic_backend_cuda_not_usable",
       [](BadCall& s) { s.entry = Entry::classic; s.backend = EPIGEMM_BACKEND_CUDA; },
       EPIGEMM_STATUS_NOT_SUPPORTED, "backend", {"cuda"}, {},
       [](epigemm_context_t ctx) { return skip_if_usable(ctx, EPIGEMM_BACKEND_CUDA); }});
  return c;
}

std::vector<Case> layer_level_cases() {
  std::vector<Case> c;
  const auto add = [&](Case x) { c.push_back(std::move(x)); };
  // fprop: Y [tokens, out] = X [tokens, in] W [out, in]^T + bias [out]
  add({"fprop_W_cols_not_X_cols", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.W.cols = 8; s.W.row_stride = 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "W", {"in_features", "X"}, {8, 7}});
  add({"fprop_Y_rows_not_tokens", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.Y.rows = 10; },
       EPIGEMM_STATUS_INVALID_VALUE, "Y", {"tokens", "X"}, {10, 11}});
  add({"fprop_Y_cols_not_out", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.Y.cols = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "Y", {"out_features", "W"}, {12, 13}});
  add({"fprop_bias_length_in_not_out", [](BadCall& s) { s.layer(Entry::fprop, false, true); s.bias.length = kIn; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"out_features"}, {7, 13}});
  add({"fprop_pre_gelu_shape_of_X", [](BadCall& s) { s.layer(Entry::fprop, true, true); s.pre_gelu = s.tensor(kPreGelu, kTokens, kIn); },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_gelu", {"out_features"}, {7, 13}});
  add({"fprop_X_row_stride_less_than_cols", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.X.row_stride = 6; },
       EPIGEMM_STATUS_INVALID_VALUE, "X", {"row_stride"}, {6, 7}});
  add({"fprop_Y_row_stride_zero", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.Y.row_stride = 0; },
       EPIGEMM_STATUS_INVALID_VALUE, "Y", {"row_stride"}, {0, 13}});
  add({"fprop_tokens_negative", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.X.rows = -11; },
       EPIGEMM_STATUS_INVALID_VALUE, "X", {"rows"}, {-11, 0}});
  add({"fprop_null_X", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.null_args = {"X"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "X", {"NULL"}, {}});
  add({"fprop_null_W_data", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.W.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "W", {"NULL"}, {13, 7}});
  add({"fprop_null_bias_data", [](BadCall& s) { s.layer(Entry::fprop, true, true); s.bias.data = nullptr; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"NULL"}, {13}});
  add({"fprop_X_f16_W_bf16",
       [](BadCall& s) { s.layer(Entry::fprop, false, false); s.X.dtype = EPIGEMM_DTYPE_F16; s.W.dtype = EPIGEMM_DTYPE_BF16; },
       EPIGEMM_STATUS_INVALID_VALUE, "X", {"f16", "bf16", "W"}, {}});
  add({"fprop_W_device_rest_host", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.W.memory = EPIGEMM_MEMORY_DEVICE; },
       EPIGEMM_STATUS_INVALID_VALUE, "W", {"device", "host", "Y"}, {}});
  add({"fprop_Y_overlaps_X", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.Y.data = s.base(kX); },
       EPIGEMM_STATUS_INVALID_VALUE, "Y", {"X", "output", "input"}, {572, 308}});
  add({"fprop_pre_gelu_overlaps_Y", [](BadCall& s) { s.layer(Entry::fprop, true, false); s.pre_gelu.data = s.bytes(kY) + 4; },
       EPIGEMM_STATUS_INVALID_VALUE, "Y", {"pre_gelu", "output"}, {572}});
  add({"fprop_workspace_overlaps_bias",
       [](BadCall& s) { s.layer(Entry::fprop, true, true); s.workspace = s.bytes(kBias) + 48; s.workspace_bytes = 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "workspace", {"bias", "input"}, {8, 52}});
  add({"fprop_X_row_stride_spans_beyond_2p60", [](BadCall& s) { s.layer(Entry::fprop, false, false); s.X.row_stride = kTwo60; },
       EPIGEMM_STATUS_INVALID_VALUE, "X", {"row_stride", "spans"}, {kTwo60}});
  add({"fprop_context_backend_cublaslt_not_usable",
       [](BadCall& s) { s.layer(Entry::fprop, false, false); s.backend = EPIGEMM_BACKEND_CUBLASLT; },
       EPIGEMM_STATUS_NOT_SUPPORTED, "backend", {"cublaslt"}, {},
       [](epigemm_context_t ctx) { return skip_if_usable(ctx, EPIGEMM_BACKEND_CUBLASLT); }});
  // dgrad: dX [tokens, in] = dY [tokens, out] W [out, in] (* gelu'(pre_gelu [tokens, in]))
  add({"dgrad_W_rows_not_dY_cols", [](BadCall& s) { s.layer(Entry::dgrad, false, false); s.W.rows = 12; },
       EPIGEMM_STATUS_INVALID_VALUE, "W", {"out_features", "dY"}, {12, 13}});
  add({"dgrad_dX_cols_not_in", [](BadCall& s) { s.layer(Entry::dgrad, false, false); s.dX.cols = 8; s.dX.row_stride = 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "dX", {"in_features", "W"}, {8, 7}});
  add({"dgrad_bias_grad_without_pre_gelu", [](BadCall& s) { s.layer(Entry::dgrad, false, true); },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"pre_gelu", "NULL"}, {11, 7}});
  add({"dgrad_bias_grad_length_out_not_in", [](BadCall& s) { s.layer(Entry::dgrad, true, true); s.bias_grad.length = kOut; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"in_features"}, {13, 7}});
  add({"dgrad_pre_gelu_shape_of_dY", [](BadCall& s) { s.layer(Entry::dgrad, true, false); s.pre_gelu = s.tensor(kPreGelu, kTokens, kOut); },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_gelu", {"in_features"}, {13, 7}});
  add({"dgrad_dX_overlaps_pre_gelu", [](BadCall& s) { s.layer(Entry::dgrad, true, false); s.dX.data = s.bytes(kPreGelu) + 4; },
       EPIGEMM_STATUS_INVALID_VALUE, "dX", {"pre_gelu", "input"}, {308}});
  add({"dgrad_bias_grad_overlaps_dX", [](BadCall& s) { s.layer(Entry::dgrad, true, true); s.bias_grad.data = s.bytes(kDX) + 8; },
       EPIGEMM_STATUS_INVALID_VALUE, "dX", {"bias_grad", "output"}, {308, 28}});
  add({"dgrad_null_dY", [](BadCall& s) { s.layer(Entry::dgrad, false, false); s.null_args = {"dY"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "dY", {"NULL"}, {}});
  // fprop_act / dgrad_act: the activation is an argument; the pre-activation is named pre_act.
  add({"fprop_act_activation_out_of_range",
       [](BadCall& s) { s.layer(Entry::fprop_act, true, true); s.activation = epigemm_activation_t(7); },
       EPIGEMM_STATUS_INVALID_VALUE, "activation", {"identity", "silu"}, {7, 0, 4}});
  add({"fprop_act_activation_negative_without_pre_act",
       [](BadCall& s) { s.layer(Entry::fprop_act, false, false); s.activation = epigemm_activation_t(-3); },
       EPIGEMM_STATUS_INVALID_VALUE, "activation", {}, {-3, 0, 4}});
  add({"dgrad_act_activation_out_of_range",
       [](BadCall& s) { s.layer(Entry::dgrad_act, true, true); s.activation = epigemm_activation_t(5); },
       EPIGEMM_STATUS_INVALID_VALUE, "activation", {"identity", "silu"}, {5, 0, 4}});
  add({"fprop_act_pre_act_shape_of_X",
       [](BadCall& s) { s.layer(Entry::fprop_act, true, true); s.activation = kRelu; s.pre_gelu = s.tensor(kPreGelu, kTokens, kIn); },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_act", {"out_features"}, {7, 13}});
  add({"fprop_act_pre_act_rows_not_tokens",
       [](BadCall& s) { s.layer(Entry::fprop_act, true, false); s.activation = kSilu; s.pre_gelu.rows = 10; },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_act", {"tokens", "X"}, {10, 11}});
  add({"fprop_act_bias_length_in_not_out",
       [](BadCall& s) { s.layer(Entry::fprop_act, false, true); s.activation = kGeluErf; s.bias.length = kIn; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias", {"out_features"}, {7, 13}});
  add({"fprop_act_pre_act_overlaps_Y",
       [](BadCall& s) { s.layer(Entry::fprop_act, true, true); s.activation = kRelu; s.pre_gelu.data = s.bytes(kY) + 4; },
       EPIGEMM_STATUS_INVALID_VALUE, "Y", {"pre_act", "output"}, {572}});
  add({"dgrad_act_pre_act_shape_of_dY",
       [](BadCall& s) { s.layer(Entry::dgrad_act, true, false); s.activation = kSilu; s.pre_gelu = s.tensor(kPreGelu, kTokens, kOut); },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_act", {"in_features"}, {13, 7}});
  add({"dgrad_act_without_pre_act", [](BadCall& s) { s.layer(Entry::dgrad_act, false, false); s.activation = kRelu; },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_act", {"NULL", "epigemm_linear_dgrad"}, {}});
  add({"dgrad_act_bias_grad_without_pre_act", [](BadCall& s) { s.layer(Entry::dgrad_act, false, true); },
       EPIGEMM_STATUS_INVALID_VALUE, "pre_act", {"NULL"}, {}});
  add({"dgrad_act_bias_grad_length_out_not_in",
       [](BadCall& s) { s.layer(Entry::dgrad_act, true, true); s.activation = kIdentity; s.bias_grad.length = kOut; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"in_features"}, {13, 7}});
  add({"dgrad_act_dX_overlaps_pre_act",
       [](BadCall& s) { s.layer(Entry::dgrad_act, true, false); s.activation = kGeluErf; s.dX.data = s.bytes(kPreGelu) + 4; },
       EPIGEMM_STATUS_INVALID_VALUE, "dX", {"pre_act", "input"}, {308}});
  // wgrad: dW [out, in] = dY [tokens, out]^T X [tokens, in]; bias_grad [out]
  add({"wgrad_dY_rows_not_tokens", [](BadCall& s) { s.layer(Entry::wgrad, false, false); s.dY.rows = 10; },
       EPIGEMM_STATUS_INVALID_VALUE, "dY", {"tokens", "X"}, {10, 11}});
  add({"wgrad_dW_transposed", [](BadCall& s) { s.layer(Entry::wgrad, false, false); s.dW = s.tensor(kDW, kIn, kOut); },
       EPIGEMM_STATUS_INVALID_VALUE, "dW", {"out_features"}, {7, 13}});
  add({"wgrad_bias_grad_length_in_not_out", [](BadCall& s) { s.layer(Entry::wgrad, false, true); s.bias_grad.length = kIn; },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"out_features"}, {7, 13}});
  add({"wgrad_dW_overlaps_dY", [](BadCall& s) { s.layer(Entry::wgrad, false, false); s.dW.data = s.bytes(kDY) + 100; },
       EPIGEMM_STATUS_INVALID_VALUE, "dW", {"dY", "input"}, {364, 572}});
  add({"wgrad_bias_grad_overlaps_X", [](BadCall& s) { s.layer(Entry::wgrad, false, true); s.bias_grad.data = s.base(kX); },
       EPIGEMM_STATUS_INVALID_VALUE, "bias_grad", {"X", "input"}, {52, 308}});
  add({"wgrad_null_dW", [](BadCall& s) { s.layer(Entry::wgrad, false, false); s.null_args = {"dW"}; },
       EPIGEMM_STATUS_INVALID_VALUE, "dW", {"NULL"}, {}});
  return c;
}

std::vector<Case> all_cases() {
  std::vector<Case> c = gemm_level_cases();
  for (Case& x : layer_level_cases()) c.push_back(std::move(x));
  return c;
}

// A small valid call on the context: it must succeed and clear the last error to "".
void expect_valid_call_clears_error(epigemm_context_t ctx) {
  BadCall valid;
  valid.gemm(kGeluAuxBias, T, N);
  ASSERT_EQ(valid.run(ctx), EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
  EXPECT_STREQ(epigemm_context_last_error(ctx), "");
}

class BadInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadInput, RefusedWithMessageAndNothingWritten) {
  const Case& c = GetParam();
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  if (c.skip_if) {
    const std::string why = c.skip_if(ctx);
    if (!why.empty()) {
      epigemm_context_destroy(ctx);
      GTEST_SKIP() << c.name << ": " << why;
    }
  }
  // A failure left over from before must not be what we read afterwards.
  ASSERT_EQ(epigemm_context_set_backend(ctx, epigemm_backend_t(99)), EPIGEMM_STATUS_INVALID_VALUE);
  const std::string earlier = epigemm_context_last_error(ctx);

  BadCall setup;
  c.make(setup);
  const epigemm_status_t status = setup.run(ctx);
  const std::string message = setup.given("ctx") ? epigemm_context_last_error(ctx) : "";
  SCOPED_TRACE("case " + c.name + ": \"" + message + "\"");

  EXPECT_EQ(status, c.status) << "got " << epigemm_status_name(status) << ", expected "
                              << epigemm_status_name(c.status);
  EXPECT_EQ(message.rfind(c.argument, 0), 0u) << "the message should start with the argument "
                                              << c.argument;
  EXPECT_TRUE(message.size() > c.argument.size() && (message[c.argument.size()] == ' '))
      << "the argument " << c.argument << " should be a whole word at the start";
  for (const std::string& w : c.words) EXPECT_TRUE(contains_word(message, w)) << "names " << w;
  for (int64_t v : c.numbers) EXPECT_TRUE(contains_number(message, v)) << "gives the value " << v;
  EXPECT_NE(message, earlier) << "the earlier error was not replaced";

  for (int s = 0; s < kSlots; ++s) {
    EXPECT_EQ(setup.arenas[s].first_change(), -1)
        << "the buffer of " << kSlotNames[s] << " was written at that byte offset";
  }
  expect_valid_call_clears_error(ctx);
  epigemm_context_destroy(ctx);
}

INSTANTIATE_TEST_SUITE_P(CApi, BadInput, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---- cases that do not fit the table -----------------------------------------------------------

TEST(BadInputTable, HasAtLeastFortyDistinctCases) {
  const std::vector<Case> cases = all_cases();
  std::set<std::string> names;
  for (const Case& c : cases) names.insert(c.name);
  EXPECT_EQ(names.size(), cases.size()) << "case names must be distinct";
  EXPECT_GE(cases.size(), 40u);
}

TEST(BadInput, NullContextIsRefusedWithoutTouchingOutputs) {
  const Entry entries[] = {Entry::desc,      Entry::classic,   Entry::fprop, Entry::dgrad,
                           Entry::fprop_act, Entry::dgrad_act, Entry::wgrad};
  for (Entry entry : entries) {
    BadCall setup;
    if (entry == Entry::desc || entry == Entry::classic) {
      setup.gemm(kGeluAuxBias);
    } else {
      setup.layer(entry, true, true);
    }
    setup.entry = entry;
    setup.null_args = {"ctx"};
    // run() sets the context's backend for the classic and layer calls: give it a real one.
    epigemm_context_t ctx = nullptr;
    ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
    EXPECT_EQ(setup.run(ctx), EPIGEMM_STATUS_INVALID_VALUE) << "entry " << int(entry);
    for (int s = 0; s < kSlots; ++s) EXPECT_EQ(setup.arenas[s].first_change(), -1) << kSlotNames[s];
    epigemm_context_destroy(ctx);
  }
  EXPECT_NE(std::string(epigemm_context_last_error(nullptr)).find("ctx"), std::string::npos);
  epigemm_backend_t backend;
  EXPECT_EQ(epigemm_context_last_backend(nullptr, &backend, nullptr), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_context_set_backend(nullptr, EPIGEMM_BACKEND_REFERENCE), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_context_set_allow_tf32(nullptr, 1), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_backend_usable(nullptr, EPIGEMM_BACKEND_REFERENCE), 0);
  size_t bytes = 0;
  EXPECT_EQ(epigemm_linear_workspace_size(nullptr, 1, 1, 1, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_context_destroy(nullptr), EPIGEMM_STATUS_SUCCESS);
}

// Every setter of a description refuses this handle (NULL, destroyed, or not a description).
void expect_every_setter_refuses(epigemm_gemm_desc_t desc) {
  const epigemm_vector_t v{nullptr, EPIGEMM_DTYPE_F32, 0, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t m{nullptr, EPIGEMM_DTYPE_F32, 0, 0, 1, EPIGEMM_MEMORY_HOST};
  EXPECT_EQ(epigemm_gemm_desc_set_transpose(desc, N, T), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_scalars(desc, 1.0f, 0.0f), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_epilogue(desc, kBiasE), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_activation(desc, kRelu), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_bias(desc, &v), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_aux(desc, &m), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_bias_grad(desc, &v), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_allow_tf32(desc, 1), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_set_backend(desc, EPIGEMM_BACKEND_CPU), EPIGEMM_STATUS_INVALID_VALUE);
}

TEST(BadInput, NullOutPointersAndNullDescriptionToSetters) {
  EXPECT_EQ(epigemm_context_create(nullptr), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_create(nullptr), EPIGEMM_STATUS_INVALID_VALUE);
  expect_every_setter_refuses(nullptr);
  EXPECT_EQ(epigemm_gemm_desc_destroy(nullptr), EPIGEMM_STATUS_SUCCESS);
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_linear_workspace_size(ctx, 1, 1, 1, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(contains_word(epigemm_context_last_error(ctx), "bytes"));
  size_t bytes = 0;
  EXPECT_EQ(epigemm_linear_workspace_size(ctx, -5, 1, 1, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(contains_number(epigemm_context_last_error(ctx), -5)) << epigemm_context_last_error(ctx);
  EXPECT_TRUE(contains_word(epigemm_context_last_error(ctx), "tokens")) << epigemm_context_last_error(ctx);
  // Sizes whose tensors no int64 offset could address: refused naming the sizes, not a tensor.
  EXPECT_EQ(epigemm_linear_workspace_size(ctx, int64_t(1) << 40, int64_t(1) << 20, 4, EPIGEMM_DTYPE_F32,
                                          EPIGEMM_MEMORY_HOST, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(std::string(epigemm_context_last_error(ctx)).rfind("a [tokens, in_features] tensor spans", 0), 0u)
      << epigemm_context_last_error(ctx);
  // The queries of one pass check their arguments the same way.
  EXPECT_EQ(epigemm_linear_fprop_workspace_size(ctx, 1, 1, 1, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(contains_word(epigemm_context_last_error(ctx), "bytes"));
  EXPECT_EQ(epigemm_linear_dgrad_workspace_size(ctx, 1, -7, 1, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(contains_number(epigemm_context_last_error(ctx), -7)) << epigemm_context_last_error(ctx);
  EXPECT_EQ(epigemm_linear_wgrad_workspace_size(ctx, 4, 4, 4, epigemm_dtype_t(7), EPIGEMM_MEMORY_HOST, 1, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(contains_word(epigemm_context_last_error(ctx), "dtype")) << epigemm_context_last_error(ctx);
  EXPECT_EQ(epigemm_linear_wgrad_workspace_size(nullptr, 4, 4, 4, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, 0, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  epigemm_context_destroy(ctx);
}

TEST(BadInput, ValidCallAfterFailureSucceedsAndClearsLastError) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  EXPECT_STREQ(epigemm_context_last_error(ctx), "");
  BadCall bad;
  bad.gemm(kBiasE);
  bad.bias.length = 4095;
  ASSERT_EQ(bad.run(ctx), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(contains_number(epigemm_context_last_error(ctx), 4095));
  // Every kind of call clears it: the description call, the classic call, a layer call.
  BadCall good;
  good.gemm(kBgradB, N, T);
  ASSERT_EQ(good.run(ctx), EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
  EXPECT_STREQ(epigemm_context_last_error(ctx), "");
  ASSERT_EQ(bad.run(ctx), EPIGEMM_STATUS_INVALID_VALUE);
  good.entry = Entry::classic;
  ASSERT_EQ(good.run(ctx), EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
  EXPECT_STREQ(epigemm_context_last_error(ctx), "");
  ASSERT_EQ(bad.run(ctx), EPIGEMM_STATUS_INVALID_VALUE);
  BadCall layer;
  layer.layer(Entry::dgrad, true, true);
  ASSERT_EQ(layer.run(ctx), EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
  EXPECT_STREQ(epigemm_context_last_error(ctx), "");
  epigemm_context_destroy(ctx);
}

// Every int is a value of each public enum type in C++: the header gives them the fixed
// underlying type int, so the out-of-range values a C caller may pass (the table above passes
// them on purpose) are values the library's range checks refuse, not undefined loads
// (-fsanitize=enum in the sanitizer build). List-initialization from an int compiles only for an
// enum with a fixed underlying type.
TEST(BadInput, EveryIntIsAValueOfEachPublicEnum) {
  static_assert(std::is_same_v<std::underlying_type_t<epigemm_status_t>, int>);
  static_assert(std::is_same_v<std::underlying_type_t<epigemm_dtype_t>, int>);
  static_assert(std::is_same_v<std::underlying_type_t<epigemm_memory_t>, int>);
  static_assert(std::is_same_v<std::underlying_type_t<epigemm_op_t>, int>);
  static_assert(std::is_same_v<std::underlying_type_t<epigemm_epilogue_t>, int>);
  static_assert(std::is_same_v<std::underlying_type_t<epigemm_activation_t>, int>);
  static_assert(std::is_same_v<std::underlying_type_t<epigemm_backend_t>, int>);
  static_assert(sizeof(epigemm_matrix_t) == 48 && sizeof(epigemm_vector_t) == 32,
                "the structs keep their C layout");
  const int values[] = {-2147483647 - 1, -1, 10, 99, 2147483647};
  for (const int value : values) {
    SCOPED_TRACE(value);
    EXPECT_STREQ(epigemm_backend_name(epigemm_backend_t{value}), "invalid backend");
    EXPECT_STREQ(epigemm_epilogue_name(epigemm_epilogue_t{value}), "invalid epilogue");
    EXPECT_STREQ(epigemm_activation_name(epigemm_activation_t{value}), "invalid activation");
    EXPECT_STREQ(epigemm_dtype_name(epigemm_dtype_t{value}), "invalid dtype");
    EXPECT_STREQ(epigemm_status_name(epigemm_status_t{value}), "invalid status");
    epigemm_context_t ctx = nullptr;
    ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
    EXPECT_EQ(epigemm_context_set_backend(ctx, epigemm_backend_t{value}), EPIGEMM_STATUS_INVALID_VALUE);
    EXPECT_TRUE(contains_number(epigemm_context_last_error(ctx), value)) << epigemm_context_last_error(ctx);
    EXPECT_EQ(epigemm_backend_usable(ctx, epigemm_backend_t{value}), 0);
    EXPECT_EQ(epigemm_backend_compiled(ctx, epigemm_backend_t{value}), 0);
    size_t bytes = 0;
    EXPECT_EQ(epigemm_linear_workspace_size(ctx, 4, 4, 4, epigemm_dtype_t{value}, EPIGEMM_MEMORY_HOST, &bytes),
              EPIGEMM_STATUS_INVALID_VALUE);
    // The size query's own arguments by their names (it has no tensors the caller gave).
    EXPECT_EQ(std::string(epigemm_context_last_error(ctx)).rfind("dtype is " + std::to_string(value), 0), 0u)
        << epigemm_context_last_error(ctx);
    EXPECT_EQ(epigemm_linear_workspace_size(ctx, 4, 4, 4, EPIGEMM_DTYPE_F32, epigemm_memory_t{value}, &bytes),
              EPIGEMM_STATUS_INVALID_VALUE);
    EXPECT_EQ(std::string(epigemm_context_last_error(ctx)).rfind("memory is " + std::to_string(value), 0), 0u)
        << epigemm_context_last_error(ctx);
    BadCall call;
    call.gemm(kBiasE);
    call.transa = epigemm_op_t{value};
    EXPECT_EQ(call.run(ctx), EPIGEMM_STATUS_INVALID_VALUE);
    EXPECT_EQ(std::string(epigemm_context_last_error(ctx)).rfind("transa", 0), 0u) << epigemm_context_last_error(ctx);
    call.transa = N;
    call.epilogue = epigemm_epilogue_t{value};
    EXPECT_EQ(call.run(ctx), EPIGEMM_STATUS_INVALID_VALUE);
    EXPECT_EQ(std::string(epigemm_context_last_error(ctx)).rfind("epilogue", 0), 0u) << epigemm_context_last_error(ctx);
    call.epilogue = kBiasE;
    call.activation = epigemm_activation_t{value};
    EXPECT_EQ(call.run(ctx), EPIGEMM_STATUS_INVALID_VALUE);
    EXPECT_EQ(std::string(epigemm_context_last_error(ctx)).rfind("activation", 0), 0u) << epigemm_context_last_error(ctx);
    for (int s = 0; s < kSlots; ++s) EXPECT_EQ(call.arenas[s].first_change(), -1) << kSlotNames[s];
    epigemm_context_destroy(ctx);
  }
}

// ---- handles -----------------------------------------------------------------------------------
// A context or description handle that was never created, was destroyed already, or is of the
// other kind is refused with INVALID_VALUE, and nothing behind it is touched: a double destroy
// crashed (context) or aborted in the C library (description), and a description passed as a
// context was read as one.

TEST(BadHandle, DestroyingTwiceIsRefused) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_context_destroy(ctx), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_context_destroy(ctx), EPIGEMM_STATUS_INVALID_VALUE);
  epigemm_gemm_desc_t desc = nullptr;
  ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_destroy(desc), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_destroy(desc), EPIGEMM_STATUS_INVALID_VALUE);
  // A new handle of either kind (which may take the old one's memory) is not the old one: the
  // stale handle stays refused, the new one keeps working.
  epigemm_context_t next_ctx = nullptr;
  epigemm_gemm_desc_t next_desc = nullptr;
  ASSERT_EQ(epigemm_context_create(&next_ctx), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_create(&next_desc), EPIGEMM_STATUS_SUCCESS);
  EXPECT_NE(next_ctx, ctx);
  EXPECT_NE(next_desc, desc);
  EXPECT_EQ(epigemm_context_destroy(ctx), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm_desc_destroy(desc), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_context_set_backend(next_ctx, EPIGEMM_BACKEND_REFERENCE), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_set_epilogue(next_desc, kBiasE), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm_desc_destroy(next_desc), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_context_destroy(next_ctx), EPIGEMM_STATUS_SUCCESS);
}

TEST(BadHandle, DestroyedContextIsRefusedEverywhere) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_context_destroy(ctx), EPIGEMM_STATUS_SUCCESS);
  EXPECT_TRUE(contains_word(epigemm_context_last_error(ctx), "ctx")) << epigemm_context_last_error(ctx);
  epigemm_backend_t backend = EPIGEMM_BACKEND_CPU;
  EXPECT_EQ(epigemm_context_last_backend(ctx, &backend, nullptr), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(backend, EPIGEMM_BACKEND_CPU) << "written through a destroyed context";
  EXPECT_EQ(epigemm_context_set_backend(ctx, EPIGEMM_BACKEND_REFERENCE), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_context_set_allow_tf32(ctx, 1), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_backend_usable(ctx, EPIGEMM_BACKEND_REFERENCE), 0);
  EXPECT_EQ(epigemm_backend_compiled(ctx, EPIGEMM_BACKEND_REFERENCE), 0);
  size_t bytes = 7;
  EXPECT_EQ(epigemm_linear_workspace_size(ctx, 4, 4, 4, EPIGEMM_DTYPE_F32, EPIGEMM_MEMORY_HOST, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(bytes, 7u);
  // Every call that computes: refused with nothing written.
  for (Entry entry : {Entry::desc, Entry::desc_workspace_size}) {
    BadCall call;
    call.gemm(kGeluAuxBias);
    call.entry = entry;
    EXPECT_EQ(call.run(ctx), EPIGEMM_STATUS_INVALID_VALUE) << "entry " << int(entry);
    for (int s = 0; s < kSlots; ++s) EXPECT_EQ(call.arenas[s].first_change(), -1) << kSlotNames[s];
  }
  const epigemm_matrix_t m{nullptr, EPIGEMM_DTYPE_F32, 0, 0, 1, EPIGEMM_MEMORY_HOST};
  const epigemm_tensor_t t{nullptr, EPIGEMM_DTYPE_F32, 0, 0, 1, EPIGEMM_MEMORY_HOST};
  EXPECT_EQ(epigemm_classic_gemm(ctx, &m, &m, &m, nullptr, nullptr, N, N, 0, nullptr, 0, 0, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_classic_gemm_workspace_size(ctx, &m, &m, &m, nullptr, nullptr, N, N, 0, 0, &bytes),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_linear_fprop(ctx, &t, &t, nullptr, nullptr, &t, nullptr, 0, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_linear_dgrad(ctx, &t, &t, nullptr, nullptr, &t, nullptr, 0, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_linear_wgrad(ctx, &t, &t, &t, 0, nullptr, nullptr, 0, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
}

TEST(BadHandle, DestroyedDescriptionIsRefusedWithNothingWritten) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  epigemm_gemm_desc_t desc = nullptr;
  ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
  ASSERT_EQ(epigemm_gemm_desc_destroy(desc), EPIGEMM_STATUS_SUCCESS);
  expect_every_setter_refuses(desc);
  BadCall call;
  call.gemm(kDefault);
  for (const bool size_query : {false, true}) {
    size_t bytes = 7;
    const epigemm_status_t status =
        size_query ? epigemm_gemm_workspace_size(ctx, desc, &call.A, &call.B, &call.D, &bytes)
                   : epigemm_gemm(ctx, desc, &call.A, &call.B, &call.D, nullptr, 0, nullptr);
    EXPECT_EQ(status, EPIGEMM_STATUS_INVALID_VALUE);
    const std::string message = epigemm_context_last_error(ctx);
    EXPECT_EQ(message.rfind("desc ", 0), 0u) << message;
    EXPECT_TRUE(contains_word(message, "destroyed")) << message;
    EXPECT_EQ(bytes, 7u);
  }
  for (int s = 0; s < kSlots; ++s) EXPECT_EQ(call.arenas[s].first_change(), -1) << kSlotNames[s];
  expect_valid_call_clears_error(ctx);
  epigemm_context_destroy(ctx);
}

// A description handed where a context is expected, and a context where a description is: each
// is a live handle of the other kind, and refused as not being of this one.
TEST(BadHandle, HandleOfTheOtherKindIsRefused) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  epigemm_gemm_desc_t desc = nullptr;
  ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
  epigemm_context_t desc_as_ctx = reinterpret_cast<epigemm_context_t>(desc);
  epigemm_gemm_desc_t ctx_as_desc = reinterpret_cast<epigemm_gemm_desc_t>(ctx);

  EXPECT_EQ(epigemm_context_set_backend(desc_as_ctx, EPIGEMM_BACKEND_REFERENCE), EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_TRUE(contains_word(epigemm_context_last_error(desc_as_ctx), "ctx"));
  EXPECT_EQ(epigemm_backend_usable(desc_as_ctx, EPIGEMM_BACKEND_REFERENCE), 0);
  EXPECT_EQ(epigemm_context_destroy(desc_as_ctx), EPIGEMM_STATUS_INVALID_VALUE);
  expect_every_setter_refuses(ctx_as_desc);
  EXPECT_EQ(epigemm_gemm_desc_destroy(ctx_as_desc), EPIGEMM_STATUS_INVALID_VALUE);

  BadCall call;
  call.gemm(kDefault);
  EXPECT_EQ(epigemm_gemm(desc_as_ctx, desc, &call.A, &call.B, &call.D, nullptr, 0, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  EXPECT_EQ(epigemm_gemm(ctx, ctx_as_desc, &call.A, &call.B, &call.D, nullptr, 0, nullptr),
            EPIGEMM_STATUS_INVALID_VALUE);
  const std::string message = epigemm_context_last_error(ctx);
  EXPECT_EQ(message.rfind("desc ", 0), 0u) << message;
  for (int s = 0; s < kSlots; ++s) EXPECT_EQ(call.arenas[s].first_change(), -1) << kSlotNames[s];

  // Both are still live and of their own kind.
  EXPECT_EQ(epigemm_gemm_desc_set_backend(desc, EPIGEMM_BACKEND_REFERENCE), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_gemm(ctx, desc, &call.A, &call.B, &call.D, nullptr, 0, nullptr), EPIGEMM_STATUS_SUCCESS)
      << epigemm_context_last_error(ctx);
  EXPECT_EQ(epigemm_gemm_desc_destroy(desc), EPIGEMM_STATUS_SUCCESS);
  EXPECT_EQ(epigemm_context_destroy(ctx), EPIGEMM_STATUS_SUCCESS);
}

// The overlap check is exact at the boundary: D starting one byte past B's last element is fine.
TEST(BadInput, AdjacentBuffersAreNotAnOverlap) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  BadCall s;
  s.gemm(kDefault);
  s.D.data = s.bytes(kB) + span_f32(s.B);
  EXPECT_EQ(s.run(ctx), EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
  // And the call wrote D there without touching B's elements.
  for (int64_t i = 0; i < span_f32(s.B); ++i) ASSERT_EQ(s.bytes(kB)[i], 0x3c) << "B byte " << i;
  epigemm_context_destroy(ctx);
}

// ---- INSUFFICIENT_WORKSPACE --------------------------------------------------------------------
// The reference backend needs no workspace. Every backend registered here is asked, for every
// epilogue, how much it needs; where one needs some, the call with one byte less (and with no
// workspace at all) must be refused before anything is written. When none needs any, SKIP.

#ifdef EPIGEMM_TESTS_WITH_CUDA
bool device_usable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}
#endif

struct WorkspaceProbe {
  epigemm_backend_t backend;
  epigemm_memory_t memory;
};

TEST(BadInput, InsufficientWorkspaceIsRefused) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  std::vector<WorkspaceProbe> probes;
  for (epigemm_backend_t b : {EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU}) {
    if (epigemm_backend_usable(ctx, b)) probes.push_back({b, EPIGEMM_MEMORY_HOST});
  }
#ifdef EPIGEMM_TESTS_WITH_CUDA
  for (epigemm_backend_t b : {EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS}) {
    if (epigemm_backend_usable(ctx, b) && device_usable()) probes.push_back({b, EPIGEMM_MEMORY_DEVICE});
  }
#endif
  int refused = 0;
  std::string asked;
  for (const WorkspaceProbe& probe : probes) {
    // Every epilogue (0 .. 9) with every activation (0 .. 4; the epilogues without one ignore it).
    for (int combination = 0; combination < 3 * 10 * 5; ++combination) {
      const int e = combination % 10;
      const epigemm_activation_t activation = epigemm_activation_t(combination / 10 % 5);
      // A, B and D in f32, f16 or bf16: a backend may need scratch for some dtypes only.
      const epigemm_dtype_t dtype = epigemm_dtype_t(combination / 50);
      BadCall s;
      s.gemm(epigemm_epilogue_t(e), N, T);
      s.activation = activation;
      s.A.dtype = s.B.dtype = s.D.dtype = dtype;
      s.backend = probe.backend;
#ifdef EPIGEMM_TESTS_WITH_CUDA
      // Device operands: each host arena is mirrored by a device buffer of the same size and
      // contents; the comparison afterwards copies them back over the host arenas.
      std::vector<void*> device(kSlots, nullptr);
      if (probe.memory == EPIGEMM_MEMORY_DEVICE) {
        for (int slot = 0; slot < kSlots; ++slot) {
          ASSERT_EQ(cudaMalloc(&device[slot], kArenaBytes), cudaSuccess);
          ASSERT_TRUE(epigemm_test::copy_to_device_and_wait(device[slot], s.base(Slot(slot)), kArenaBytes));
        }
        epigemm_matrix_t* mats[] = {&s.A, &s.B, &s.D, &s.aux};
        const Slot mat_slots[] = {kA, kB, kD, kAux};
        for (int i = 0; i < 4; ++i) {
          mats[i]->data = device[mat_slots[i]];
          mats[i]->memory = EPIGEMM_MEMORY_DEVICE;
        }
        s.bias.data = device[kBias];
        s.bias.memory = EPIGEMM_MEMORY_DEVICE;
        s.bias_grad.data = device[kBiasGrad];
        s.bias_grad.memory = EPIGEMM_MEMORY_DEVICE;
      }
#endif
      s.entry = Entry::desc_workspace_size;
      epigemm_gemm_desc_t desc = nullptr;
      ASSERT_EQ(epigemm_gemm_desc_create(&desc), EPIGEMM_STATUS_SUCCESS);
      epigemm_gemm_desc_set_transpose(desc, s.transa, s.transb);
      epigemm_gemm_desc_set_epilogue(desc, s.epilogue);
      epigemm_gemm_desc_set_activation(desc, s.activation);
      epigemm_gemm_desc_set_bias(desc, s.with_bias ? &s.bias : nullptr);
      epigemm_gemm_desc_set_aux(desc, s.with_aux ? &s.aux : nullptr);
      epigemm_gemm_desc_set_bias_grad(desc, s.with_bias_grad ? &s.bias_grad : nullptr);
      epigemm_gemm_desc_set_backend(desc, s.backend);
      size_t needed = 0;
      const epigemm_status_t asked_status = epigemm_gemm_workspace_size(ctx, desc, &s.A, &s.B, &s.D, &needed);
      epigemm_gemm_desc_destroy(desc);
      asked += std::string(" ") + epigemm_backend_name(probe.backend) + "/" + epigemm_dtype_name(dtype) + "/" +
               epigemm_epilogue_name(epigemm_epilogue_t(e)) + "/" + epigemm_activation_name(activation) + "=";
      if (asked_status == EPIGEMM_STATUS_NOT_SUPPORTED) {
        asked += "declined";  // a backend asked by name may decline a call it cannot run
      } else {
        ASSERT_EQ(asked_status, EPIGEMM_STATUS_SUCCESS) << epigemm_context_last_error(ctx);
        asked += std::to_string(needed);
      }
      if (asked_status == EPIGEMM_STATUS_SUCCESS && needed > 0) {
        std::vector<unsigned char> host_workspace;
        void* workspace = nullptr;
#ifdef EPIGEMM_TESTS_WITH_CUDA
        if (probe.memory == EPIGEMM_MEMORY_DEVICE) {
          ASSERT_EQ(cudaMalloc(&workspace, needed), cudaSuccess);
        }
#endif
        if (probe.memory == EPIGEMM_MEMORY_HOST) {
          host_workspace.assign(needed, 0);
          workspace = host_workspace.data();
        }
        const size_t offered[] = {needed - 1, needed};
        for (int attempt = 0; attempt < 2; ++attempt) {
          s.entry = Entry::desc;
          s.workspace = attempt == 0 ? workspace : nullptr;  // too small; none at all (but a size)
          s.workspace_bytes = offered[attempt];
          const epigemm_status_t status = s.run(ctx);
          const std::string message = epigemm_context_last_error(ctx);
          SCOPED_TRACE(message);
          EXPECT_EQ(status, EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE);
          EXPECT_EQ(message.rfind("workspace", 0), 0u);
          EXPECT_TRUE(contains_number(message, int64_t(needed)));
          EXPECT_NE(message.find("(ask epigemm_gemm_workspace_size)"), std::string::npos);
          // What was given: the size that is too small, or a NULL workspace beside its size.
          if (attempt == 0) {
            EXPECT_TRUE(contains_number(message, int64_t(needed - 1)));
          } else {
            EXPECT_NE(message.find("workspace is NULL with workspace_bytes = " + std::to_string(needed)),
                      std::string::npos);
          }
        }
        ++refused;
#ifdef EPIGEMM_TESTS_WITH_CUDA
        if (probe.memory == EPIGEMM_MEMORY_DEVICE) cudaFree(workspace);
#endif
      }
#ifdef EPIGEMM_TESTS_WITH_CUDA
      if (probe.memory == EPIGEMM_MEMORY_DEVICE) {
        for (int slot = 0; slot < kSlots; ++slot) {
          ASSERT_EQ(cudaMemcpy(s.base(Slot(slot)), device[slot], kArenaBytes, cudaMemcpyDeviceToHost), cudaSuccess);
          cudaFree(device[slot]);
        }
      }
#endif
      for (int slot = 0; slot < kSlots; ++slot) {
        EXPECT_EQ(s.arenas[slot].first_change(), -1) << kSlotNames[slot] << " was written";
      }
    }
  }
  epigemm_context_destroy(ctx);
  if (refused == 0) {
    GTEST_SKIP() << "no registered, usable backend needs workspace for these calls (asked:" << asked
                 << "), so INSUFFICIENT_WORKSPACE cannot arise here";
  }
}

// The refusal names the size query of the entry point the caller used: a layer call's workspace is
// what epigemm_linear_workspace_size says, a classic call's what epigemm_classic_gemm_workspace_size
// says. A bf16 call on the cpu backend needs workspace (its fp32 panels).
TEST(BadInput, InsufficientWorkspaceNamesTheQueryOfTheCallsEntryPoint) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  if (!epigemm_backend_usable(ctx, EPIGEMM_BACKEND_CPU)) {
    epigemm_context_destroy(ctx);
    GTEST_SKIP() << "the cpu backend is not usable here";
  }
  ASSERT_EQ(epigemm_context_set_backend(ctx, EPIGEMM_BACKEND_CPU), EPIGEMM_STATUS_SUCCESS);
  std::vector<uint16_t> x(4 * 8, 0x3f80), w(3 * 8, 0x3f80), y(4 * 3, 0);  // bf16 ones
  const epigemm_tensor_t X = {x.data(), EPIGEMM_DTYPE_BF16, 4, 8, 8, EPIGEMM_MEMORY_HOST};
  const epigemm_tensor_t W = {w.data(), EPIGEMM_DTYPE_BF16, 3, 8, 8, EPIGEMM_MEMORY_HOST};
  const epigemm_tensor_t Y = {y.data(), EPIGEMM_DTYPE_BF16, 4, 3, 3, EPIGEMM_MEMORY_HOST};
  EXPECT_EQ(epigemm_linear_fprop(ctx, &X, &W, nullptr, nullptr, &Y, nullptr, 0, nullptr),
            EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE);
  EXPECT_NE(std::string(epigemm_context_last_error(ctx)).find("(ask epigemm_linear_workspace_size)"),
            std::string::npos)
      << epigemm_context_last_error(ctx);
  // The same product as a classic call: D [3 x 4] = W [8 x 3]^T X [8 x 4], column-major.
  const epigemm_matrix_t A = {w.data(), EPIGEMM_DTYPE_BF16, 8, 3, 8, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t B = {x.data(), EPIGEMM_DTYPE_BF16, 8, 4, 8, EPIGEMM_MEMORY_HOST};
  const epigemm_matrix_t D = {y.data(), EPIGEMM_DTYPE_BF16, 3, 4, 3, EPIGEMM_MEMORY_HOST};
  EXPECT_EQ(epigemm_classic_gemm(ctx, &A, &B, &D, nullptr, nullptr, EPIGEMM_OP_T, EPIGEMM_OP_N, 0, nullptr, 0, 0,
                                 nullptr),
            EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE);
  EXPECT_NE(std::string(epigemm_context_last_error(ctx)).find("(ask epigemm_classic_gemm_workspace_size)"),
            std::string::npos)
      << epigemm_context_last_error(ctx);
  for (uint16_t v : y) EXPECT_EQ(v, 0) << "a refused call wrote Y";
  epigemm_context_destroy(ctx);
}

// ---- the layer workspace queries cover every activation ----------------------------------------
// epigemm_linear_workspace_size answers for any one layer call of these sizes, and
// epigemm_linear_fprop_workspace_size / _dgrad_ / _wgrad_ for any one call of their pass: every
// activation of fprop_act / dgrad_act, with and without the optional operands, the bias and bias
// gradient in any dtype, wgrad with and without accumulate, on every host backend usable here
// (auto, reference, cpu); the layer's answer is the largest of the passes'. Each call must run
// with exactly the queried bytes of its pass; the queried workspace is the exact end of a larger
// buffer, so a backend that writes past the bytes it was given is caught too.

TEST(LinearWorkspace, QueryCoversEveryActivationAndOptionalOperand) {
  epigemm_context_t ctx = nullptr;
  ASSERT_EQ(epigemm_context_create(&ctx), EPIGEMM_STATUS_SUCCESS);
  const int64_t tokens = 40, in = 24, out = 56;
  constexpr unsigned char kGuard = 0x5a;
  std::vector<std::vector<unsigned char>> storage;
  // Row-major [rows, cols] of `dtype`, all bytes 0x3c: 1.06 in f16, 0.0115 in bf16, 0.0115 in f32.
  auto tensor = [&](epigemm_dtype_t dtype, int64_t rows, int64_t cols) {
    storage.emplace_back(size_t(rows * cols) * (dtype == EPIGEMM_DTYPE_F32 ? 4 : 2), 0x3c);
    return epigemm_tensor_t{storage.back().data(), dtype, rows, cols, cols, EPIGEMM_MEMORY_HOST};
  };
  auto vector = [&](epigemm_dtype_t dtype, int64_t length) {
    storage.emplace_back(size_t(length) * (dtype == EPIGEMM_DTYPE_F32 ? 4 : 2), 0x3c);
    return epigemm_vector_t{storage.back().data(), dtype, length, EPIGEMM_MEMORY_HOST};
  };
  int calls = 0;
  for (const epigemm_backend_t backend : {EPIGEMM_BACKEND_AUTO, EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU}) {
    if (!epigemm_backend_usable(ctx, backend)) continue;
    ASSERT_EQ(epigemm_context_set_backend(ctx, backend), EPIGEMM_STATUS_SUCCESS);
    for (const epigemm_dtype_t dtype : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_BF16}) {
      size_t bytes = 0, fprop_bytes = 0, dgrad_bytes = 0, wgrad_bytes[2] = {0, 0};
      ASSERT_EQ(epigemm_linear_workspace_size(ctx, tokens, in, out, dtype, EPIGEMM_MEMORY_HOST, &bytes),
                EPIGEMM_STATUS_SUCCESS)
          << epigemm_context_last_error(ctx);
      ASSERT_EQ(epigemm_linear_fprop_workspace_size(ctx, tokens, in, out, dtype, EPIGEMM_MEMORY_HOST, &fprop_bytes),
                EPIGEMM_STATUS_SUCCESS)
          << epigemm_context_last_error(ctx);
      ASSERT_EQ(epigemm_linear_dgrad_workspace_size(ctx, tokens, in, out, dtype, EPIGEMM_MEMORY_HOST, &dgrad_bytes),
                EPIGEMM_STATUS_SUCCESS)
          << epigemm_context_last_error(ctx);
      for (int accumulate : {0, 1}) {
        ASSERT_EQ(epigemm_linear_wgrad_workspace_size(ctx, tokens, in, out, dtype, EPIGEMM_MEMORY_HOST, accumulate,
                                                      &wgrad_bytes[accumulate]),
                  EPIGEMM_STATUS_SUCCESS)
            << epigemm_context_last_error(ctx);
      }
      // The layer's answer is the largest of the passes'.
      EXPECT_EQ(bytes, std::max({fprop_bytes, dgrad_bytes, wgrad_bytes[0], wgrad_bytes[1]}));
      // The workspace: the bytes a query answered, then a guard the calls must not touch. The
      // forward calls get the forward pass's answer, the data gradients the data gradient's.
      std::vector<unsigned char> workspace(bytes + 64, kGuard);
      std::vector<unsigned char> fprop_workspace(fprop_bytes + 64, kGuard), dgrad_workspace(dgrad_bytes + 64, kGuard);
      storage.clear();
      // The outputs in fp32 (D may be fp32 for 16-bit inputs), the inputs in `dtype`.
      const epigemm_tensor_t x = tensor(dtype, tokens, in), w = tensor(dtype, out, in);
      const epigemm_tensor_t dy = tensor(dtype, tokens, out), pre_in = tensor(dtype, tokens, in);
      const epigemm_tensor_t y = tensor(dtype, tokens, out), pre_out = tensor(dtype, tokens, out);
      const epigemm_tensor_t dx = tensor(dtype, tokens, in);
      for (const epigemm_dtype_t v : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_BF16}) {
        const epigemm_vector_t bias = vector(v, out), bias_grad = vector(v, in);
        for (int a = 0; a < 5; ++a) {
          const epigemm_activation_t act = epigemm_activation_t(a);
          SCOPED_TRACE(std::string(epigemm_backend_name(backend)) + " " + epigemm_dtype_name(dtype) +
                       " vectors " + epigemm_dtype_name(v) + " " + epigemm_activation_name(act) +
                       ": queried " + std::to_string(bytes) + " bytes");
          for (int variant = 0; variant < 4; ++variant) {
            const bool with_pre = variant & 1, with_vector = variant & 2;
            const epigemm_status_t forward = epigemm_linear_fprop_act(
                ctx, &x, &w, with_vector ? &bias : nullptr, act, with_pre ? &pre_out : nullptr, &y,
                fprop_workspace.data(), fprop_bytes, nullptr);
            EXPECT_EQ(forward, EPIGEMM_STATUS_SUCCESS)
                << "fprop_act pre_act=" << with_pre << " bias=" << with_vector << ": "
                << epigemm_context_last_error(ctx);
            ++calls;
            if (!with_pre) continue;  // dgrad_act needs pre_act
            const epigemm_status_t backward = epigemm_linear_dgrad_act(
                ctx, &dy, &w, act, &pre_in, with_vector ? &bias_grad : nullptr, &dx,
                dgrad_workspace.data(), dgrad_bytes, nullptr);
            EXPECT_EQ(backward, EPIGEMM_STATUS_SUCCESS)
                << "dgrad_act bias_grad=" << with_vector << ": " << epigemm_context_last_error(ctx);
            ++calls;
          }
        }
      }
      // The weight gradient, with and without its bias gradient (in each dtype) and accumulate, on
      // the wgrad query's answer for that accumulate; once more with the layer's answer.
      const epigemm_tensor_t dw = tensor(dtype, out, in);
      for (const epigemm_dtype_t v : {EPIGEMM_DTYPE_F32, EPIGEMM_DTYPE_F16, EPIGEMM_DTYPE_BF16}) {
        const epigemm_vector_t out_bias_grad = vector(v, out);
        for (int accumulate : {0, 1}) {
          std::vector<unsigned char> wgrad_workspace(wgrad_bytes[accumulate] + 64, kGuard);
          for (const bool with_vector : {false, true}) {
            SCOPED_TRACE(std::string(epigemm_backend_name(backend)) + " " + epigemm_dtype_name(dtype) + " wgrad accumulate=" +
                         std::to_string(accumulate) + " bias_grad " + (with_vector ? epigemm_dtype_name(v) : "none"));
            EXPECT_EQ(epigemm_linear_wgrad(ctx, &x, &dy, &dw, accumulate, with_vector ? &out_bias_grad : nullptr,
                                           wgrad_workspace.data(), wgrad_bytes[accumulate], nullptr),
                      EPIGEMM_STATUS_SUCCESS)
                << epigemm_context_last_error(ctx);
            EXPECT_EQ(epigemm_linear_wgrad(ctx, &x, &dy, &dw, accumulate, with_vector ? &out_bias_grad : nullptr,
                                           workspace.data(), bytes, nullptr),
                      EPIGEMM_STATUS_SUCCESS)
                << epigemm_context_last_error(ctx);
            calls += 2;
          }
          for (size_t i = wgrad_bytes[accumulate]; i < wgrad_workspace.size(); ++i) {
            ASSERT_EQ(wgrad_workspace[i], kGuard) << "written past the wgrad query's workspace, at byte " << i;
          }
        }
      }
      for (const auto& [used, given] : {std::pair<const std::vector<unsigned char>*, size_t>{&workspace, bytes},
                                        {&fprop_workspace, fprop_bytes},
                                        {&dgrad_workspace, dgrad_bytes}}) {
        for (size_t i = given; i < used->size(); ++i) {
          ASSERT_EQ((*used)[i], kGuard) << "written past the queried workspace, at byte " << i;
        }
      }
    }
  }
  EXPECT_GT(calls, 0);
  epigemm_context_destroy(ctx);
}

}  // namespace
