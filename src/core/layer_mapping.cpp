// The one mapping from layer coordinates to GEMM coordinates (docs/conventions.md, "Layout").
//
// A row-major [rows, cols] tensor with row stride s is, byte for byte, a column-major
// cols x rows matrix with leading dimension s. So no data moves: the framework's product
// Y = X W^T is handed to the BLAS as Y^T = W X^T with the operands swapped.
//
//   pass   A            transa  B              transb  gemm_m  gemm_n  gemm_k  D
//   fprop  W [out, in]  T       X  [tok, in]   N       out     tok     in      Y  [tok, out]
//   dgrad  W [out, in]  N       dY [tok, out]  N       in      tok     out     dX [tok, in]
//   wgrad  X [tok, in]  N       dY [tok, out]  T       in      out     tok     dW [out, in]
//
// Hence the bias of fprop has length gemm_m = out; the bias gradient of dgrad (DGELU_BGRAD, the
// previous layer's bias) has length gemm_m = in; that of wgrad (BGRADB) has length gemm_n = out.
#include "core/layer_mapping.hpp"

#include <algorithm>

#include "core/validate.hpp"

namespace epigemm {
namespace {

// The column-major view of a row-major tensor: [rows, cols] stride s -> cols x rows, ld s.
Matrix column_major_view(const epigemm_tensor_t& t) {
  Matrix m;
  m.data = t.data;
  m.dtype = t.dtype;
  m.rows = t.cols;
  m.cols = t.rows;
  m.ld = t.row_stride;
  m.memory = t.memory;
  return m;
}

// Present, and valid in its own row-major terms (rows, cols, row_stride), so that a bad tensor is
// reported as the caller wrote it rather than as its column-major view.
Status require_tensor(const epigemm_tensor_t* t, const char* name, const char* pass) {
  if (t == nullptr) return invalid(name, " is NULL; expected a tensor descriptor (", pass, " needs it)");
  EPIGEMM_RETURN_IF_ERROR(check_dtype_and_memory(name, t->dtype, t->memory));
  if (t->rows < 0) return invalid(name, " has ", t->rows, " rows; expected rows >= 0");
  if (t->cols < 0) return invalid(name, " has ", t->cols, " columns; expected columns >= 0");
  const int64_t min_stride = std::max<int64_t>(1, t->cols);
  if (t->row_stride < min_stride) {
    return invalid(name, " has row_stride = ", t->row_stride,
                   "; expected row_stride >= max(1, cols) = ", min_stride);
  }
  if (t->rows > 0 && t->cols > 0) {
    if (t->data == nullptr) {
      return invalid(name, " has data = NULL; expected a pointer to ", t->rows, " x ", t->cols,
                     " elements");
    }
    EPIGEMM_RETURN_IF_ERROR(check_span(name, t->cols, t->rows, t->row_stride, "row_stride", t->dtype));
  }
  return Status();
}

// "bias has 7 elements; fprop needs out_features = 13 (the rows of W)"
Status require_length(const epigemm_vector_t& v, const char* name, int64_t expected,
                      const char* pass, const char* dimension, const char* source) {
  if (v.length != expected) {
    return invalid(name, " has ", v.length, " elements; ", pass, " needs ", dimension, " = ",
                   expected, " (", source, ")");
  }
  return Status();
}

// "W has 1000 columns; fprop needs in_features = 1024 (the columns of X)"
Status require_extent(const epigemm_tensor_t& t, const char* name, bool rows, int64_t expected,
                      const char* pass, const char* dimension, const char* source) {
  const int64_t given = rows ? t.rows : t.cols;
  if (given != expected) {
    return invalid(name, " has ", given, rows ? " rows" : " columns", "; ", pass, " needs ",
                   dimension, " = ", expected, " (", source, ")");
  }
  return Status();
}

}  // namespace

Status map_layer_to_gemm(LayerPass pass, const LayerTensors& t, GemmCall* call) {
  switch (pass) {
    case LayerPass::fprop: {
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.x, "X", "fprop"));
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.w, "W", "fprop"));
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.y, "Y", "fprop"));
      const int64_t tokens = t.x->rows, in_features = t.x->cols, out_features = t.w->rows;
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.w, "W", false, in_features, "fprop",
                                             "in_features", "the columns of X"));
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.y, "Y", true, tokens, "fprop", "tokens",
                                             "the rows of X"));
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.y, "Y", false, out_features, "fprop",
                                             "out_features", "the rows of W"));
      if (t.bias) {
        EPIGEMM_RETURN_IF_ERROR(require_length(*t.bias, "bias", out_features, "fprop",
                                               "out_features", "the rows of W"));
      }
      if (t.pre_act) {
        EPIGEMM_RETURN_IF_ERROR(require_tensor(t.pre_act, t.pre_act_name, "fprop with an activation"));
        EPIGEMM_RETURN_IF_ERROR(require_extent(*t.pre_act, t.pre_act_name, true, tokens, "fprop",
                                               "tokens", "the rows of X"));
        EPIGEMM_RETURN_IF_ERROR(require_extent(*t.pre_act, t.pre_act_name, false, out_features,
                                               "fprop", "out_features", "the rows of W"));
      }
      call->transa = EPIGEMM_OP_T;
      call->transb = EPIGEMM_OP_N;
      call->gemm_m = out_features;
      call->gemm_n = tokens;
      call->gemm_k = in_features;
      call->a = column_major_view(*t.w);
      call->b = column_major_view(*t.x);
      call->d = column_major_view(*t.y);
      call->names.a = "W";
      call->names.b = "X";
      call->names.d = "Y";
      break;
    }
    case LayerPass::dgrad: {
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.dy, "dY", "dgrad"));
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.w, "W", "dgrad"));
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.dx, "dX", "dgrad"));
      const int64_t tokens = t.dy->rows, out_features = t.dy->cols, in_features = t.w->cols;
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.w, "W", true, out_features, "dgrad",
                                             "out_features", "the columns of dY"));
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.dx, "dX", true, tokens, "dgrad", "tokens",
                                             "the rows of dY"));
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.dx, "dX", false, in_features, "dgrad",
                                             "in_features", "the columns of W"));
      if (t.bias_grad) {
        // Only through the activation: the bias gradient of the previous layer is that of its
        // pre-activation (DACT_BGRAD); without the pre-activation there is no such epilogue.
        if (!t.pre_act) {
          return invalid("bias_grad is set but ", t.pre_act_name, " is NULL; expected ",
                         t.pre_act_name, " [tokens = ", tokens, ", in_features = ", in_features,
                         "] as well (dgrad writes a bias gradient only through the activation)");
        }
        EPIGEMM_RETURN_IF_ERROR(require_length(*t.bias_grad, "bias_grad", in_features, "dgrad",
                                               "in_features", "the columns of W"));
      }
      if (t.pre_act) {
        EPIGEMM_RETURN_IF_ERROR(require_tensor(t.pre_act, t.pre_act_name, "dgrad with an activation"));
        EPIGEMM_RETURN_IF_ERROR(require_extent(*t.pre_act, t.pre_act_name, true, tokens, "dgrad",
                                               "tokens", "the rows of dY"));
        EPIGEMM_RETURN_IF_ERROR(require_extent(*t.pre_act, t.pre_act_name, false, in_features,
                                               "dgrad", "in_features", "the columns of W"));
      }
      call->transa = EPIGEMM_OP_N;
      call->transb = EPIGEMM_OP_N;
      call->gemm_m = in_features;
      call->gemm_n = tokens;
      call->gemm_k = out_features;
      call->a = column_major_view(*t.w);
      call->b = column_major_view(*t.dy);
      call->d = column_major_view(*t.dx);
      call->names.a = "W";
      call->names.b = "dY";
      call->names.d = "dX";
      break;
    }
    case LayerPass::wgrad: {
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.x, "X", "wgrad"));
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.dy, "dY", "wgrad"));
      EPIGEMM_RETURN_IF_ERROR(require_tensor(t.dw, "dW", "wgrad"));
      const int64_t tokens = t.x->rows, in_features = t.x->cols, out_features = t.dy->cols;
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.dy, "dY", true, tokens, "wgrad", "tokens",
                                             "the rows of X"));
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.dw, "dW", true, out_features, "wgrad",
                                             "out_features", "the columns of dY"));
      EPIGEMM_RETURN_IF_ERROR(require_extent(*t.dw, "dW", false, in_features, "wgrad",
                                             "in_features", "the columns of X"));
      if (t.bias_grad) {
        EPIGEMM_RETURN_IF_ERROR(require_length(*t.bias_grad, "bias_grad", out_features, "wgrad",
                                               "out_features", "the columns of dY"));
      }
      call->transa = EPIGEMM_OP_N;
      call->transb = EPIGEMM_OP_T;
      call->gemm_m = in_features;
      call->gemm_n = out_features;
      call->gemm_k = tokens;
      call->a = column_major_view(*t.x);
      call->b = column_major_view(*t.dy);
      call->d = column_major_view(*t.dw);
      call->names.a = "X";
      call->names.b = "dY";
      call->names.d = "dW";
      break;
    }
  }
  if (t.pre_act) {
    call->has_aux = true;
    call->aux = column_major_view(*t.pre_act);
    call->names.aux = t.pre_act_name;
  }
  if (t.bias) {
    call->has_bias = true;
    call->bias = to_vector(*t.bias);
  }
  if (t.bias_grad) {
    call->has_bias_grad = true;
    call->bias_grad = to_vector(*t.bias_grad);
  }
  call->names.workspace_query = "epigemm_linear_workspace_size";
  return Status();
}

}  // namespace epigemm
