/* epigemm.h from C99: every type and every function of the header, compiled with
 * -std=c99 -Wall -Wextra -pedantic -Werror, in a program that checks one small linear layer
 * (fprop, dgrad, wgrad through the layer calls, and the same fprop through the description call
 * and the classic call; fprop and dgrad with other activations through the _act calls and a
 * description with an activation; BGRADA) against values computed here, on the reference backend.
 * Shapes: X [tokens = 3, in = 4], W [out = 2, in = 4], Y [3, 2] (row-major, layer level). */
#include <epigemm/epigemm.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKENS 3
#define IN 4
#define OUT 2

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

static void check_status(epigemm_context_t ctx, epigemm_status_t status, const char *what) {
  if (status != EPIGEMM_STATUS_SUCCESS) {
    fprintf(stderr, "FAILED: %s: %s: %s\n", what, epigemm_status_name(status),
            epigemm_context_last_error(ctx));
    ++failures;
  }
}

static int close_to(double got, double expected) {
  return fabs(got - expected) <= 1e-5 + 1e-5 * fabs(expected);
}

/* gelu_tanh and its derivative, from docs/conventions.md. */
static double gelu(double x) {
  const double c = 0.7978845608028654; /* sqrt(2 / pi) */
  return 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * x * x * x)));
}
static double gelu_grad(double x) {
  const double c = 0.7978845608028654;
  const double t = tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

/* relu, silu and gelu_erf (and silu'), from docs/conventions.md. */
static double relu(double x) { return x < 0.0 ? 0.0 : x; }
static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double silu_grad(double x) { return sigmoid(x) * (1.0 + x * (1.0 - sigmoid(x))); }
static double gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* dX [TOKENS, IN] = (dY W) * act'(pre_in) and bias_grad [IN] = sum over tokens of dX, against
 * what a dgrad call wrote. */
static void check_dgrad(const float *dy, const float *w, const float *pre_in, double (*act_grad)(double),
                        const float *dx, const float *bias_grad, const char *what) {
  int t, i, o;
  for (i = 0; i < IN; ++i) {
    double sum = 0.0;
    for (t = 0; t < TOKENS; ++t) {
      double g = 0.0;
      for (o = 0; o < OUT; ++o) g += (double)dy[t * OUT + o] * w[o * IN + i];
      g *= act_grad(pre_in[t * IN + i]);
      sum += g;
      check(close_to(dx[t * IN + i], g), what);
    }
    check(close_to(bias_grad[i], sum), what);
  }
}

int main(void) {
  float x[TOKENS * IN] = {1, 2, 3, 4, -1, 0.5f, 0, 2, 0.25f, -2, 1, -0.5f};
  float w[OUT * IN] = {0.1f, -0.2f, 0.3f, 0.05f, -0.1f, 0.05f, 0.2f, -0.3f};
  float b[OUT] = {0.5f, -0.25f};
  float y[TOKENS * OUT], pre[TOKENS * OUT];
  float y_desc[TOKENS * OUT], pre_desc[TOKENS * OUT], y_classic[TOKENS * OUT];
  float pre_classic[TOKENS * OUT];
  float dy[TOKENS * OUT] = {1, -1, 0.5f, 2, -0.5f, 0.25f};
  float pre_in[TOKENS * IN] = {0.1f, -0.2f, 1, 2, -1, 0, 0.5f, -3, 3, 0.7f, -0.7f, 0.01f};
  float dx[TOKENS * IN], bias_grad_in[IN], dw[OUT * IN], bias_grad_out[OUT];
  double expected_z[TOKENS * OUT];
  float y_relu[TOKENS * OUT], pre_relu[TOKENS * OUT], y_erf[TOKENS * OUT], dx_silu[TOKENS * IN];
  float bias_grad_silu[IN], w_row_sums[OUT], d_bgrada[OUT * TOKENS];
  epigemm_activation_t activation = EPIGEMM_ACTIVATION_RELU;
  epigemm_activation_t activations[5] = {EPIGEMM_ACTIVATION_IDENTITY, EPIGEMM_ACTIVATION_GELU_TANH,
                                         EPIGEMM_ACTIVATION_GELU_ERF, EPIGEMM_ACTIVATION_RELU,
                                         EPIGEMM_ACTIVATION_SILU};
  epigemm_dtype_t f32 = EPIGEMM_DTYPE_F32;
  epigemm_memory_t host = EPIGEMM_MEMORY_HOST;
  epigemm_tensor_t X = {x, EPIGEMM_DTYPE_F32, TOKENS, IN, IN, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t W = {w, EPIGEMM_DTYPE_F32, OUT, IN, IN, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t Y = {y, EPIGEMM_DTYPE_F32, TOKENS, OUT, OUT, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t P = {pre, EPIGEMM_DTYPE_F32, TOKENS, OUT, OUT, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t DY = {dy, EPIGEMM_DTYPE_F32, TOKENS, OUT, OUT, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t PIN = {pre_in, EPIGEMM_DTYPE_F32, TOKENS, IN, IN, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t DX = {dx, EPIGEMM_DTYPE_F32, TOKENS, IN, IN, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t DW = {dw, EPIGEMM_DTYPE_F32, OUT, IN, IN, EPIGEMM_MEMORY_HOST};
  epigemm_vector_t BIAS = {b, EPIGEMM_DTYPE_F32, OUT, EPIGEMM_MEMORY_HOST};
  epigemm_vector_t BGIN = {bias_grad_in, EPIGEMM_DTYPE_F32, IN, EPIGEMM_MEMORY_HOST};
  epigemm_vector_t BGOUT = {bias_grad_out, EPIGEMM_DTYPE_F32, OUT, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t YR = {y_relu, EPIGEMM_DTYPE_F32, TOKENS, OUT, OUT, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t PR = {pre_relu, EPIGEMM_DTYPE_F32, TOKENS, OUT, OUT, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t DXS = {dx_silu, EPIGEMM_DTYPE_F32, TOKENS, IN, IN, EPIGEMM_MEMORY_HOST};
  epigemm_vector_t BGS = {bias_grad_silu, EPIGEMM_DTYPE_F32, IN, EPIGEMM_MEMORY_HOST};
  epigemm_vector_t WSUMS = {w_row_sums, EPIGEMM_DTYPE_F32, OUT, EPIGEMM_MEMORY_HOST};
  /* The same fprop in GEMM coordinates: A = W (in x out, ld in, transa = T),
   * B = X (in x tokens, ld in), D = Y (out x tokens, ld out). */
  epigemm_matrix_t A, B, D, AUX, DC, AUXC, DE, DB;
  epigemm_op_t transa = EPIGEMM_OP_T, transb = EPIGEMM_OP_N;
  epigemm_epilogue_t epilogue = EPIGEMM_EPILOGUE_GELU_AUX_BIAS;
  epigemm_backend_t backend = EPIGEMM_BACKEND_REFERENCE, used = EPIGEMM_BACKEND_AUTO;
  epigemm_status_t status;
  epigemm_context_t ctx = NULL;
  epigemm_gemm_desc_t desc = NULL;
  const char *reason = NULL;
  size_t workspace_bytes = 1;
  int t, i, o;

  A.data = w; A.dtype = f32; A.rows = IN; A.cols = OUT; A.ld = IN; A.memory = host;
  B.data = x; B.dtype = f32; B.rows = IN; B.cols = TOKENS; B.ld = IN; B.memory = host;
  D.data = y_desc; D.dtype = f32; D.rows = OUT; D.cols = TOKENS; D.ld = OUT; D.memory = host;
  AUX = D;
  AUX.data = pre_desc;
  DC = D;
  DC.data = y_classic;
  AUXC = D;
  AUXC.data = pre_classic;
  DE = D;
  DE.data = y_erf;
  DB = D;
  DB.data = d_bgrada;

  printf("epigemm %d.%d.%d\n", EPIGEMM_VERSION_MAJOR, EPIGEMM_VERSION_MINOR, EPIGEMM_VERSION_PATCH);
  if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) return 1;
  check_status(ctx, epigemm_context_set_backend(ctx, backend), "set_backend");
  check_status(ctx, epigemm_context_set_allow_tf32(ctx, 0), "set_allow_tf32");
  check(epigemm_backend_usable(ctx, EPIGEMM_BACKEND_REFERENCE) == 1, "reference is usable");
  check(epigemm_backend_compiled(ctx, EPIGEMM_BACKEND_REFERENCE) == 1, "reference is compiled");
  {
    const char *description = NULL;
    check_status(ctx, epigemm_backend_description(ctx, EPIGEMM_BACKEND_REFERENCE, &description),
                 "backend_description");
    check(description != NULL && description[0] != '\0', "reference has a description");
    printf("reference: %s\n", description != NULL ? description : "");
  }
  printf("backends: %s %s %s %s %s\n", epigemm_backend_name(EPIGEMM_BACKEND_AUTO),
         epigemm_backend_name(EPIGEMM_BACKEND_REFERENCE), epigemm_backend_name(EPIGEMM_BACKEND_CPU),
         epigemm_backend_name(EPIGEMM_BACKEND_CUDA), epigemm_backend_name(EPIGEMM_BACKEND_CUBLASLT));
  check(strcmp(epigemm_epilogue_name(EPIGEMM_EPILOGUE_DGELU_BGRAD), "DGELU_BGRAD") == 0, "epilogue name");
  check(strcmp(epigemm_dtype_name(EPIGEMM_DTYPE_BF16), "bf16") == 0, "dtype name");
  check(strcmp(epigemm_dtype_name(EPIGEMM_DTYPE_F16), "f16") == 0, "dtype name");
  check(strcmp(epigemm_status_name(EPIGEMM_STATUS_SUCCESS), "success") == 0, "status name");
  printf("statuses: %s / %s / %s / %s / %s / %s\n", epigemm_status_name(EPIGEMM_STATUS_INVALID_VALUE),
         epigemm_status_name(EPIGEMM_STATUS_NOT_SUPPORTED),
         epigemm_status_name(EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE),
         epigemm_status_name(EPIGEMM_STATUS_BACKEND_ERROR),
         epigemm_status_name(EPIGEMM_STATUS_OUT_OF_MEMORY),
         epigemm_status_name(EPIGEMM_STATUS_INTERNAL_ERROR));
  printf("epilogues: %s %s %s %s %s %s %s\n", epigemm_epilogue_name(EPIGEMM_EPILOGUE_DEFAULT),
         epigemm_epilogue_name(EPIGEMM_EPILOGUE_BIAS), epigemm_epilogue_name(EPIGEMM_EPILOGUE_GELU_AUX),
         epigemm_epilogue_name(EPIGEMM_EPILOGUE_GELU_AUX_BIAS),
         epigemm_epilogue_name(EPIGEMM_EPILOGUE_DGELU), epigemm_epilogue_name(EPIGEMM_EPILOGUE_DGELU_BGRAD),
         epigemm_epilogue_name(EPIGEMM_EPILOGUE_BGRADB));
  printf("new epilogues: %s %s %s; activations:", epigemm_epilogue_name(EPIGEMM_EPILOGUE_BGRADA),
         epigemm_epilogue_name(EPIGEMM_EPILOGUE_ACT), epigemm_epilogue_name(EPIGEMM_EPILOGUE_ACT_BIAS));
  for (i = 0; i < 5; ++i) printf(" %s", epigemm_activation_name(activations[i]));
  printf("\n");
  check(strcmp(epigemm_activation_name(EPIGEMM_ACTIVATION_GELU_ERF), "gelu_erf") == 0, "activation name");
  check(strcmp(epigemm_activation_name(EPIGEMM_ACTIVATION_SILU), "silu") == 0, "activation name");
  check(strcmp(epigemm_epilogue_name(EPIGEMM_EPILOGUE_BGRADA), "BGRADA") == 0, "epilogue name");
  /* The ACT / DACT names are the GELU epilogues' values. */
  check(EPIGEMM_EPILOGUE_ACT_AUX == EPIGEMM_EPILOGUE_GELU_AUX &&
            EPIGEMM_EPILOGUE_ACT_AUX_BIAS == EPIGEMM_EPILOGUE_GELU_AUX_BIAS &&
            EPIGEMM_EPILOGUE_DACT == EPIGEMM_EPILOGUE_DGELU &&
            EPIGEMM_EPILOGUE_DACT_BGRAD == EPIGEMM_EPILOGUE_DGELU_BGRAD,
        "ACT_AUX / ACT_AUX_BIAS / DACT / DACT_BGRAD alias the GELU epilogues");
  (void)EPIGEMM_MEMORY_DEVICE;

  /* ---- fprop through the layer call: Y = gelu(X W^T + b), pre = X W^T + b ---- */
  check_status(ctx, epigemm_linear_workspace_size(ctx, TOKENS, IN, OUT, f32, host, &workspace_bytes),
               "linear_workspace_size");
  check(workspace_bytes == 0, "the reference backend needs no workspace");
  check_status(ctx, epigemm_linear_fprop_workspace_size(ctx, TOKENS, IN, OUT, f32, host, &workspace_bytes),
               "linear_fprop_workspace_size");
  check(workspace_bytes == 0, "the reference backend's forward pass needs no workspace");
  check_status(ctx, epigemm_linear_dgrad_workspace_size(ctx, TOKENS, IN, OUT, f32, host, &workspace_bytes),
               "linear_dgrad_workspace_size");
  check(workspace_bytes == 0, "the reference backend's data gradient needs no workspace");
  check_status(ctx, epigemm_linear_wgrad_workspace_size(ctx, TOKENS, IN, OUT, f32, host, 1, &workspace_bytes),
               "linear_wgrad_workspace_size");
  check(workspace_bytes == 0, "the reference backend's accumulating weight gradient needs no workspace");
  check_status(ctx, epigemm_linear_fprop(ctx, &X, &W, &BIAS, &P, &Y, NULL, 0, NULL), "linear_fprop");
  for (t = 0; t < TOKENS; ++t) {
    for (o = 0; o < OUT; ++o) {
      double z = b[o];
      for (i = 0; i < IN; ++i) z += (double)x[t * IN + i] * w[o * IN + i];
      expected_z[t * OUT + o] = z;
      check(close_to(pre[t * OUT + o], z), "fprop pre_gelu");
      check(close_to(y[t * OUT + o], gelu(z)), "fprop Y");
    }
  }
  check_status(ctx, epigemm_context_last_backend(ctx, &used, &reason), "last_backend");
  check(used == EPIGEMM_BACKEND_REFERENCE, "the reference backend ran");
  printf("fprop ran on %s (%s); Y[0] = %.6f\n", epigemm_backend_name(used), reason ? reason : "", y[0]);

  /* ---- the same fprop through a description, and through the classic call: bitwise equal ---- */
  check_status(ctx, epigemm_gemm_desc_create(&desc), "desc_create");
  check_status(ctx, epigemm_gemm_desc_set_transpose(desc, transa, transb), "set_transpose");
  check_status(ctx, epigemm_gemm_desc_set_scalars(desc, 1.0f, 0.0f), "set_scalars");
  check_status(ctx, epigemm_gemm_desc_set_epilogue(desc, epilogue), "set_epilogue");
  check_status(ctx, epigemm_gemm_desc_set_bias(desc, &BIAS), "set_bias");
  check_status(ctx, epigemm_gemm_desc_set_aux(desc, &AUX), "set_aux");
  check_status(ctx, epigemm_gemm_desc_set_bias_grad(desc, NULL), "set_bias_grad");
  check_status(ctx, epigemm_gemm_desc_set_allow_tf32(desc, 0), "desc_set_allow_tf32");
  check_status(ctx, epigemm_gemm_desc_set_backend(desc, backend), "desc_set_backend");
  check_status(ctx, epigemm_gemm_workspace_size(ctx, desc, &A, &B, &D, &workspace_bytes), "workspace_size");
  check_status(ctx, epigemm_gemm(ctx, desc, &A, &B, &D, NULL, workspace_bytes, NULL), "gemm");
  check(memcmp(y_desc, y, sizeof y) == 0 && memcmp(pre_desc, pre, sizeof pre) == 0,
        "the description call equals the layer call");
  check_status(ctx, epigemm_classic_gemm_workspace_size(ctx, &A, &B, &DC, &BIAS, &AUXC, transa, transb, 0, 0,
                                                        &workspace_bytes),
               "classic_gemm_workspace_size");
  {
    void *classic_ws = workspace_bytes > 0 ? malloc(workspace_bytes) : NULL;
    check(workspace_bytes == 0 || classic_ws != NULL, "malloc of the classic workspace");
    check_status(ctx, epigemm_classic_gemm(ctx, &A, &B, &DC, &BIAS, &AUXC, transa, transb, 0, classic_ws,
                                           workspace_bytes, 0, NULL),
                 "classic_gemm");
    free(classic_ws);
  }
  check(memcmp(y_classic, y, sizeof y) == 0 && memcmp(pre_classic, pre, sizeof pre) == 0,
        "the classic call equals the layer call");

  /* ---- dgrad: dX = (dY W) * gelu'(pre_in), bias_grad_in = sum over tokens of dX ---- */
  check_status(ctx, epigemm_linear_dgrad(ctx, &DY, &W, &PIN, &BGIN, &DX, NULL, 0, NULL), "linear_dgrad");
  check_dgrad(dy, w, pre_in, gelu_grad, dx, bias_grad_in, "dgrad dX and bias_grad");

  /* ---- wgrad: dW = dY^T X, bias_grad_out = sum over tokens of dY ---- */
  check_status(ctx, epigemm_linear_wgrad(ctx, &X, &DY, &DW, 0, &BGOUT, NULL, 0, NULL), "linear_wgrad");
  for (o = 0; o < OUT; ++o) {
    double sum = 0.0;
    for (t = 0; t < TOKENS; ++t) sum += dy[t * OUT + o];
    check(close_to(bias_grad_out[o], sum), "wgrad bias_grad");
    for (i = 0; i < IN; ++i) {
      double g = 0.0;
      for (t = 0; t < TOKENS; ++t) g += (double)dy[t * OUT + o] * x[t * IN + i];
      check(close_to(dw[o * IN + i], g), "wgrad dW");
    }
  }

  /* ---- fprop_act with relu (pre_act saved), dgrad_act with silu (with the bias gradient) ---- */
  check_status(ctx, epigemm_linear_fprop_act(ctx, &X, &W, &BIAS, activation, &PR, &YR, NULL, 0, NULL),
               "linear_fprop_act relu");
  for (t = 0; t < TOKENS * OUT; ++t) {
    check(close_to(pre_relu[t], expected_z[t]), "fprop_act pre_act");
    check(close_to(y_relu[t], relu(expected_z[t])), "fprop_act relu Y");
  }
  check_status(ctx, epigemm_linear_dgrad_act(ctx, &DY, &W, EPIGEMM_ACTIVATION_SILU, &PIN, &BGS, &DXS, NULL, 0,
                                             NULL),
               "linear_dgrad_act silu");
  check_dgrad(dy, w, pre_in, silu_grad, dx_silu, bias_grad_silu, "dgrad_act silu dX and bias_grad");

  /* ---- a description with an activation (ACT_BIAS, gelu_erf), and BGRADA ---- */
  check_status(ctx, epigemm_gemm_desc_set_epilogue(desc, EPIGEMM_EPILOGUE_ACT_BIAS), "set_epilogue ACT_BIAS");
  check_status(ctx, epigemm_gemm_desc_set_activation(desc, EPIGEMM_ACTIVATION_GELU_ERF), "set_activation");
  check_status(ctx, epigemm_gemm_desc_set_aux(desc, NULL), "set_aux NULL");
  check_status(ctx, epigemm_gemm(ctx, desc, &A, &B, &DE, NULL, 0, NULL), "gemm ACT_BIAS gelu_erf");
  for (t = 0; t < TOKENS * OUT; ++t) check(close_to(y_erf[t], gelu_erf(expected_z[t])), "ACT_BIAS gelu_erf D");
  /* BGRADA: bias_grad[i] = sum_p op(A)[i, p]; op(A) = W [out, in] (A = W^T stored in x out). */
  check_status(ctx, epigemm_gemm_desc_set_epilogue(desc, EPIGEMM_EPILOGUE_BGRADA), "set_epilogue BGRADA");
  check_status(ctx, epigemm_gemm_desc_set_bias(desc, NULL), "set_bias NULL");
  check_status(ctx, epigemm_gemm_desc_set_bias_grad(desc, &WSUMS), "set_bias_grad");
  check_status(ctx, epigemm_gemm(ctx, desc, &A, &B, &DB, NULL, 0, NULL), "gemm BGRADA");
  for (o = 0; o < OUT; ++o) {
    double sum = 0.0;
    for (i = 0; i < IN; ++i) sum += w[o * IN + i];
    check(close_to(w_row_sums[o], sum), "BGRADA bias_grad");
    for (t = 0; t < TOKENS; ++t) check(close_to(d_bgrada[o + t * OUT], expected_z[t * OUT + o] - b[o]), "BGRADA D");
  }

  /* ---- a bad call: a status and a message, never a crash ---- */
  status = epigemm_linear_fprop_act(ctx, &X, &W, &BIAS, (epigemm_activation_t)7, NULL, &YR, NULL, 0, NULL);
  check(status == EPIGEMM_STATUS_INVALID_VALUE, "an activation of value 7 is refused");
  check(strstr(epigemm_context_last_error(ctx), "activation") != NULL, "the message names the activation");
  BIAS.length = IN;
  status = epigemm_linear_fprop(ctx, &X, &W, &BIAS, &P, &Y, NULL, 0, NULL);
  check(status == EPIGEMM_STATUS_INVALID_VALUE, "a bias of in_features elements is refused");
  check(strstr(epigemm_context_last_error(ctx), "bias") != NULL, "the message names the bias");
  printf("bad call: %s: %s\n", epigemm_status_name(status), epigemm_context_last_error(ctx));
  check(close_to(y[0], gelu(expected_z[0])), "Y untouched by the bad call");

  check_status(ctx, epigemm_gemm_desc_destroy(desc), "desc_destroy");
  check_status(ctx, epigemm_context_destroy(ctx), "context_destroy");
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("C API: all checks passed\n");
  return 0;
}
