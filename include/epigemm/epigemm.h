/*
 * epigemm.h - the C interface of epigemm: GEMMs of a transformer's linear layers fused with
 * their epilogues (bias, GELU with the pre-activation saved, GELU gradient, bias gradients).
 *
 * The meaning of every call is docs/conventions.md. This header is valid C99.
 *
 * Two coordinate systems (docs/conventions.md, "Layout"):
 *   - GEMM level (epigemm_gemm, epigemm_classic_gemm): column-major matrices, BLAS style,
 *       D (gemm_m x gemm_n) = alpha * op(A) * op(B) + beta * D, then the epilogue.
 *   - Layer level (epigemm_linear_*): row-major framework tensors, Y = X W^T + b and its
 *     gradients, in tokens / in_features / out_features.
 *
 * Errors: every function returns an epigemm_status_t. When it is not EPIGEMM_STATUS_SUCCESS,
 * epigemm_context_last_error(ctx) holds a message naming the argument, the value given and the
 * value expected, and no output has been written, except after EPIGEMM_STATUS_BACKEND_ERROR: the
 * BLAS engine or the CUDA runtime failing while the call runs may leave outputs partly written
 * (docs/conventions.md, section 4). The description functions (epigemm_gemm_desc_*) take no
 * context: they fail only for a NULL or dead description (or a NULL out pointer), with
 * EPIGEMM_STATUS_INVALID_VALUE and no message, and epigemm_gemm_desc_create also with
 * EPIGEMM_STATUS_OUT_OF_MEMORY where it cannot allocate; the values they store are checked, with a
 * message, by the call that uses the description (epigemm_gemm, epigemm_gemm_workspace_size).
 *
 * Threads: a context is used by one thread at a time (create one per thread); it holds backend
 * state (handles, streams) and the last error. A GEMM description is a plain value owned by its
 * creator: several threads may read one description concurrently, none may modify it meanwhile.
 */
#ifndef EPIGEMM_EPIGEMM_H
#define EPIGEMM_EPIGEMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; the build (CMake, epigemm.pc, the Python package) reads it from
 * these three lines. epigemm_get_version() gives the library's. */

/* In C++ every enum below has the fixed underlying type int, so that any int a C caller passes
 * where the header has an enum is a value of the enum type (C++ gives an enum without one only
 * the values of its enumerators' bit width, and loading any other is undefined): the library's
 * range checks then refuse it with INVALID_VALUE. In C an enum object holds any value of its
 * integer type already. Size and calling convention are those of an int in both languages. */
#ifdef __cplusplus
#define EPIGEMM_ENUM_INT : int
#else
#define EPIGEMM_ENUM_INT
#endif

#define EPIGEMM_VERSION_MAJOR 0
#define EPIGEMM_VERSION_MINOR 1
#define EPIGEMM_VERSION_PATCH 0

/* Marks the functions a shared libepigemm exports; everything else in it is hidden. */
#ifndef EPIGEMM_API
#if defined(__GNUC__) || defined(__clang__)
#define EPIGEMM_API __attribute__((visibility("default")))
#else
#define EPIGEMM_API
#endif
#endif

typedef enum epigemm_status_e EPIGEMM_ENUM_INT {
  EPIGEMM_STATUS_SUCCESS = 0,
  EPIGEMM_STATUS_INVALID_VALUE = 1,          /* a bad argument: shape, pointer, ld, dtype, ... */
  EPIGEMM_STATUS_NOT_SUPPORTED = 2,          /* a valid call the chosen backend cannot run    */
  EPIGEMM_STATUS_INSUFFICIENT_WORKSPACE = 3, /* workspace smaller than the size query's answer */
  EPIGEMM_STATUS_BACKEND_ERROR = 4,          /* the BLAS / CUDA runtime reported a failure       */
  EPIGEMM_STATUS_OUT_OF_MEMORY = 5,          /* host allocation failed: creating a context or a
                                                description, or inside a call (the reference
                                                backend allocates its double-precision copies) */
  EPIGEMM_STATUS_INTERNAL_ERROR = 6
} epigemm_status_t;

typedef enum epigemm_dtype_e EPIGEMM_ENUM_INT {
  EPIGEMM_DTYPE_F32 = 0,
  EPIGEMM_DTYPE_F16 = 1,
  EPIGEMM_DTYPE_BF16 = 2
} epigemm_dtype_t;

/* Where a buffer lives. Every operand of one call lives in the same place. */
typedef enum epigemm_memory_e EPIGEMM_ENUM_INT {
  EPIGEMM_MEMORY_HOST = 0,
  EPIGEMM_MEMORY_DEVICE = 1 /* CUDA device memory of the device that was current when the context
                               was created (it must be current at each call too) */
} epigemm_memory_t;

typedef enum epigemm_op_e EPIGEMM_ENUM_INT {
  EPIGEMM_OP_N = 0, /* op(X) = X   */
  EPIGEMM_OP_T = 1  /* op(X) = X^T */
} epigemm_op_t;

/* The activation of the epilogues that have one (docs/conventions.md, "Activations"): applied
 * to the fp32 value (acc, or acc + bias), never to a rounded copy; its derivative is applied in
 * the backward epilogues before any reduction. NaN in gives NaN out, for act and act'.
 *   IDENTITY   act(x) = x                                   act'(x) = 1
 *   GELU_TANH  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (PyTorch's approximate="tanh")
 *   GELU_ERF   0.5 x (1 + erf(x / sqrt(2)))                  (PyTorch's default F.gelu)
 *   RELU       max(x, 0)                                     act'(x) = 1 if x > 0, else 0
 *   SILU       x sigmoid(x)                                  act'(x) = s (1 + x (1 - s)) */
typedef enum epigemm_activation_e EPIGEMM_ENUM_INT {
  EPIGEMM_ACTIVATION_IDENTITY = 0,
  EPIGEMM_ACTIVATION_GELU_TANH = 1,
  EPIGEMM_ACTIVATION_GELU_ERF = 2,
  EPIGEMM_ACTIVATION_RELU = 3,
  EPIGEMM_ACTIVATION_SILU = 4
} epigemm_activation_t;

/* The epilogues, in GEMM coordinates; acc = alpha * op(A) op(B) + beta * D_old in fp32, act the
 * description's activation (gelu_tanh unless set: the GELU names below are these presets).
 *   DEFAULT        D = acc
 *   BIAS           D = acc + bias[i]                                   bias: gemm_m
 *   ACT            D = act(acc)
 *   ACT_BIAS       D = act(acc + bias[i])
 *   ACT_AUX        aux = acc; D = act(acc)                             aux: gemm_m x gemm_n (out)
 *   ACT_AUX_BIAS   z = acc + bias[i]; aux = z; D = act(z)
 *   DACT           D = acc * act'(aux[i,j])                            aux: (in)
 *   DACT_BGRAD     g = acc * act'(aux); D = g; bias_grad[i] = sum_j g[i,j]   bias_grad: gemm_m
 *   BGRADB         D = acc; bias_grad[j] = sum_p op(B)[p,j]            bias_grad: gemm_n
 *   BGRADA         D = acc; bias_grad[i] = sum_p op(A)[i,p]            bias_grad: gemm_m
 * GELU_AUX, GELU_AUX_BIAS, DGELU and DGELU_BGRAD are ACT_AUX, ACT_AUX_BIAS, DACT and DACT_BGRAD
 * (the same values): with the default activation they are exactly the GELU epilogues. */
typedef enum epigemm_epilogue_e EPIGEMM_ENUM_INT {
  EPIGEMM_EPILOGUE_DEFAULT = 0,
  EPIGEMM_EPILOGUE_BIAS = 1,
  EPIGEMM_EPILOGUE_GELU_AUX = 2,
  EPIGEMM_EPILOGUE_GELU_AUX_BIAS = 3,
  EPIGEMM_EPILOGUE_DGELU = 4,
  EPIGEMM_EPILOGUE_DGELU_BGRAD = 5,
  EPIGEMM_EPILOGUE_BGRADB = 6,
  EPIGEMM_EPILOGUE_BGRADA = 7,
  EPIGEMM_EPILOGUE_ACT = 8,
  EPIGEMM_EPILOGUE_ACT_BIAS = 9,
  EPIGEMM_EPILOGUE_ACT_AUX = EPIGEMM_EPILOGUE_GELU_AUX,
  EPIGEMM_EPILOGUE_ACT_AUX_BIAS = EPIGEMM_EPILOGUE_GELU_AUX_BIAS,
  EPIGEMM_EPILOGUE_DACT = EPIGEMM_EPILOGUE_DGELU,
  EPIGEMM_EPILOGUE_DACT_BGRAD = EPIGEMM_EPILOGUE_DGELU_BGRAD
} epigemm_epilogue_t;

typedef enum epigemm_backend_e EPIGEMM_ENUM_INT {
  EPIGEMM_BACKEND_AUTO = 0,      /* the dispatcher picks among the usable backends */
  EPIGEMM_BACKEND_REFERENCE = 1, /* CPU, double accumulation: the definition      */
  EPIGEMM_BACKEND_CPU = 2,       /* CPU BLAS + vectorized epilogue kernels         */
  EPIGEMM_BACKEND_CUDA = 3,      /* cuBLAS + epigemm's epilogue kernels            */
  EPIGEMM_BACKEND_CUBLASLT = 4,  /* cuBLASLt fused epilogues                       */
  EPIGEMM_BACKEND_CUTLASS = 5    /* CUTLASS sm90 kernels with fused epilogues      */
} epigemm_backend_t;

/* A column-major matrix (GEMM level): element (r, c) is at data[r + c * ld], ld >= max(1, rows). */
typedef struct epigemm_matrix_s {
  void *data;
  epigemm_dtype_t dtype;
  int64_t rows;
  int64_t cols;
  int64_t ld;
  epigemm_memory_t memory;
} epigemm_matrix_t;

/* A row-major 2-D tensor (layer level): element (r, c) is at data[r * row_stride + c],
 * row_stride >= max(1, cols). This is how a framework stores X[tokens, in_features]. */
typedef struct epigemm_tensor_s {
  void *data;
  epigemm_dtype_t dtype;
  int64_t rows;
  int64_t cols;
  int64_t row_stride;
  epigemm_memory_t memory;
} epigemm_tensor_t;

/* A contiguous vector (bias, bias gradient). */
typedef struct epigemm_vector_s {
  void *data;
  epigemm_dtype_t dtype;
  int64_t length;
  epigemm_memory_t memory;
} epigemm_vector_t;

typedef struct epigemm_context_s *epigemm_context_t;
typedef struct epigemm_gemm_desc_s *epigemm_gemm_desc_t;

/* The library's version, "MAJOR.MINOR.PATCH" (a static string): the EPIGEMM_VERSION_* of the
 * header it was built with. */
EPIGEMM_API
const char *epigemm_get_version(void);

/* ---- context ------------------------------------------------------------------------------ */

/* Creates a context. On a machine with a GPU, GPU backend state (handles, streams, events) is
 * created here once and reused by every call. A handle (context or description) is a number the
 * library checks on every call: one never created, already destroyed, or of the other kind is
 * refused with EPIGEMM_STATUS_INVALID_VALUE. Destroying NULL does nothing. */
EPIGEMM_API
epigemm_status_t epigemm_context_create(epigemm_context_t *ctx /* out */);
EPIGEMM_API
epigemm_status_t epigemm_context_destroy(epigemm_context_t ctx);

/* The message of the last failed call on this context ("" after a success). Valid until the next
 * call on the context. Never NULL for a non-NULL ctx. */
EPIGEMM_API
const char *epigemm_context_last_error(epigemm_context_t ctx);

/* Which backend ran the last successful GEMM on this context, and why the dispatcher chose it:
 * "requested: cpu" when the call named its backend, else e.g. "auto: cpu has the highest
 * priority (10) among the backends that support the call; cuda declined (...)". A refused call
 * leaves both as they were; before any call has succeeded they are EPIGEMM_BACKEND_AUTO and "".
 * The reason is valid until the next call on the context. */
EPIGEMM_API
epigemm_status_t epigemm_context_last_backend(epigemm_context_t ctx,
                                              epigemm_backend_t *backend /* out */,
                                              const char **reason /* out, may be NULL */);

/* Backend and TF32 choice for the calls that take no description: epigemm_classic_gemm and the
 * epigemm_linear_* calls. Defaults: EPIGEMM_BACKEND_AUTO, TF32 off. */
EPIGEMM_API
epigemm_status_t epigemm_context_set_backend(epigemm_context_t ctx, epigemm_backend_t backend);
EPIGEMM_API
epigemm_status_t epigemm_context_set_allow_tf32(epigemm_context_t ctx, int allow_tf32);

/* 1 when the backend is compiled in and can run on this machine (a GPU backend needs a GPU). */
EPIGEMM_API
int epigemm_backend_usable(epigemm_context_t ctx, epigemm_backend_t backend);
/* 1 when the backend is compiled into this build, whether or not it can run here. */
EPIGEMM_API
int epigemm_backend_compiled(epigemm_context_t ctx, epigemm_backend_t backend);

/* Static strings: "reference", "cpu", ...; "DGELU_BGRAD", ... (values 2-5 by their GELU names);
 * "gelu_tanh", ...; "f32", ...; "invalid value", ... */
EPIGEMM_API
const char *epigemm_backend_name(epigemm_backend_t backend);
EPIGEMM_API
const char *epigemm_epilogue_name(epigemm_epilogue_t epilogue);
EPIGEMM_API
const char *epigemm_activation_name(epigemm_activation_t activation);
EPIGEMM_API
const char *epigemm_dtype_name(epigemm_dtype_t dtype);
EPIGEMM_API
const char *epigemm_status_name(epigemm_status_t status);

/* ---- what a backend runs on ---------------------------------------------------------------- */

/* One line saying what a backend runs on in this process, for logs and `epigemm info`:
 *   cpu       the GEMM engine and its version, the epilogue kernel build (avx512, avx2 or
 *             scalar) and the OpenMP threads, e.g. "GEMM engine oneDNN 2.6.3 (OpenMP runtime);
 *             epilogue kernels avx512; up to 2 OpenMP threads per call (...); OMP_WAIT_POLICY unset"
 *   cuda      the cuBLAS version and the device (name, compute capability, multiprocessors)
 *   cublaslt  the cuBLASLt version and the device
 *   cutlass   the CUTLASS version its kernels were built from and the device
 *   reference, auto: what they are.
 * A backend that is compiled in but cannot run here says why ("not usable here: ...").
 * *description (out) points into the context: valid until the next epigemm_backend_description
 * call on it or its destruction. EPIGEMM_STATUS_NOT_SUPPORTED when the backend is not compiled
 * into this build; EPIGEMM_STATUS_INVALID_VALUE for a value outside epigemm_backend_t. */
EPIGEMM_API
epigemm_status_t epigemm_backend_description(epigemm_context_t ctx, epigemm_backend_t backend,
                                             const char **description /* out */);

/* ---- GEMM description (the configuration object) ------------------------------------------ */

/* Defaults: transa = transb = N, alpha = 1, beta = 0, epilogue DEFAULT, activation GELU_TANH,
 * no bias / aux / bias_grad, TF32 off, backend AUTO. */
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_create(epigemm_gemm_desc_t *desc /* out */);
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_destroy(epigemm_gemm_desc_t desc);

EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_transpose(epigemm_gemm_desc_t desc, epigemm_op_t transa,
                                                 epigemm_op_t transb);
/* acc = alpha * op(A) op(B) + beta * D_old; beta != 0 reads D before it is written. */
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_scalars(epigemm_gemm_desc_t desc, float alpha, float beta);
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_epilogue(epigemm_gemm_desc_t desc,
                                                epigemm_epilogue_t epilogue);
/* The activation of ACT, ACT_BIAS, ACT_AUX(_BIAS) and DACT(_BGRAD); the other epilogues apply no
 * activation and do not read this setting. */
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_activation(epigemm_gemm_desc_t desc,
                                                  epigemm_activation_t activation);
/* bias (in): BIAS, ACT_BIAS and ACT_AUX_BIAS, length gemm_m. NULL clears it. The vector is
 * copied. */
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_bias(epigemm_gemm_desc_t desc, const epigemm_vector_t *bias);
/* aux: gemm_m x gemm_n. Out for ACT_AUX / ACT_AUX_BIAS (the pre-activation), in for DACT /
 * DACT_BGRAD. NULL clears it. */
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_aux(epigemm_gemm_desc_t desc, const epigemm_matrix_t *aux);
/* bias_grad (out, overwritten): DACT_BGRAD and BGRADA (length gemm_m), BGRADB (length gemm_n). */
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_bias_grad(epigemm_gemm_desc_t desc,
                                                 const epigemm_vector_t *bias_grad);
/* fp32 inputs run in full fp32 unless allowed here; ignored for fp16/bf16 inputs. */
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_allow_tf32(epigemm_gemm_desc_t desc, int allow_tf32);
EPIGEMM_API
epigemm_status_t epigemm_gemm_desc_set_backend(epigemm_gemm_desc_t desc,
                                               epigemm_backend_t backend);

/* The workspace, in bytes, that epigemm_gemm needs for this description and these operands
 * (validated as by epigemm_gemm). Host memory for host operands, device memory for device ones. */
EPIGEMM_API
epigemm_status_t epigemm_gemm_workspace_size(epigemm_context_t ctx, epigemm_gemm_desc_t desc,
                                             const epigemm_matrix_t *A, const epigemm_matrix_t *B,
                                             const epigemm_matrix_t *D, size_t *bytes /* out */);

/* D (gemm_m x gemm_n) = epilogue(alpha * op(A) op(B) + beta * D_old).
 *   A: gemm_m x gemm_k when transa = N, gemm_k x gemm_m when T (as stored)
 *   B: gemm_k x gemm_n when transb = N, gemm_n x gemm_k when T
 * stream: a cudaStream_t for device operands (NULL = the default stream); ignored on the host.
 * GPU calls are stream-ordered: no allocation, no host synchronization, nothing read back. */
EPIGEMM_API
epigemm_status_t epigemm_gemm(epigemm_context_t ctx, epigemm_gemm_desc_t desc,
                              const epigemm_matrix_t *A, const epigemm_matrix_t *B,
                              const epigemm_matrix_t *D, void *workspace, size_t workspace_bytes,
                              void *stream);

/* ---- the classic TransformerEngine-style call ---------------------------------------------- */

/* TransformerEngine's classic GEMM call, its arguments with their meaning (docs/conventions.md,
 * "The classic call", also for the few deliberate differences: TF32 off unless allowed, TT
 * accepted, gemm_k = 0, the workspace size): the epilogue follows from which of bias /
 * pre_gelu_out are given and from grad:
 *   bias  pre_gelu_out  grad  -> epilogue
 *   no    no            any      DEFAULT
 *   yes   no            no       BIAS           (bias in, length gemm_m)
 *   yes   no            yes      BGRADB         (bias OUT: sum of op(B) over gemm_k, length gemm_n)
 *   no    yes           no       GELU_AUX       (pre_gelu_out out)
 *   no    yes           yes      DGELU          (pre_gelu_out in)
 *   yes   yes           no       GELU_AUX_BIAS
 *   yes   yes           yes      DGELU_BGRAD    (bias OUT, length gemm_m)
 * accumulate != 0 means beta = 1; alpha = 1. bias / pre_gelu_out may be NULL or have NULL data.
 * Backend and TF32 follow epigemm_context_set_backend / set_allow_tf32. */
EPIGEMM_API
epigemm_status_t epigemm_classic_gemm(epigemm_context_t ctx, const epigemm_matrix_t *A,
                                      const epigemm_matrix_t *B, const epigemm_matrix_t *D,
                                      const epigemm_vector_t *bias,
                                      const epigemm_matrix_t *pre_gelu_out, epigemm_op_t transa,
                                      epigemm_op_t transb, int grad, void *workspace,
                                      size_t workspace_bytes, int accumulate, void *stream);

/* The workspace epigemm_classic_gemm needs for these arguments (the same ones, without workspace
 * and stream). What counts is which of bias / pre_gelu_out have data (any non-NULL pointer),
 * the shapes, dtypes, transposes, grad and accumulate, and, as for epigemm_gemm_workspace_size,
 * the addresses where they decide which backend runs the call (an operand below the alignment
 * a backend's kernels need is declined by it) or what it copies: ask with the operands the call
 * will use (epigemm_linear_workspace_size reads the sizes only). Refuses what the call would
 * refuse, with the same message. */
EPIGEMM_API
epigemm_status_t epigemm_classic_gemm_workspace_size(
    epigemm_context_t ctx, const epigemm_matrix_t *A, const epigemm_matrix_t *B,
    const epigemm_matrix_t *D, const epigemm_vector_t *bias, const epigemm_matrix_t *pre_gelu_out,
    epigemm_op_t transa, epigemm_op_t transb, int grad, int accumulate, size_t *bytes /* out */);

/* ---- layer level: Y[tokens, out] = X[tokens, in] W[out, in]^T + b[out] -------------------- */

/* The workspace any one linear-layer call below may need for tensors of these sizes (any
 * activation, any bias or bias-gradient dtype, a weight gradient with or without accumulate: with
 * a bf16/f16 dW the cuda backend accumulates through an fp32 copy of dW, 4 x out x in bytes, which
 * with few tokens is most of the answer). */
EPIGEMM_API
epigemm_status_t epigemm_linear_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                               int64_t in_features, int64_t out_features,
                                               epigemm_dtype_t dtype, epigemm_memory_t memory,
                                               size_t *bytes /* out */);

/* The workspace one call of a single pass may need for tensors of these sizes (any activation, any
 * bias or bias-gradient dtype): epigemm_linear_fprop and _fprop_act; epigemm_linear_dgrad and
 * _dgrad_act; epigemm_linear_wgrad with accumulate as given (0 or not). Each is at most
 * epigemm_linear_workspace_size's answer, which is the largest of them; a caller that never
 * accumulates a weight gradient (or runs only the forward pass) needs no more than these. */
EPIGEMM_API
epigemm_status_t epigemm_linear_fprop_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                                     int64_t in_features, int64_t out_features,
                                                     epigemm_dtype_t dtype, epigemm_memory_t memory,
                                                     size_t *bytes /* out */);
EPIGEMM_API
epigemm_status_t epigemm_linear_dgrad_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                                     int64_t in_features, int64_t out_features,
                                                     epigemm_dtype_t dtype, epigemm_memory_t memory,
                                                     size_t *bytes /* out */);
EPIGEMM_API
epigemm_status_t epigemm_linear_wgrad_workspace_size(epigemm_context_t ctx, int64_t tokens,
                                                     int64_t in_features, int64_t out_features,
                                                     epigemm_dtype_t dtype, epigemm_memory_t memory,
                                                     int accumulate, size_t *bytes /* out */);

/* Forward: Y = act(X W^T + b).
 *   X [tokens, in] (in), W [out, in] (in), bias [out] (in, optional),
 *   pre_gelu [tokens, out] (out, optional: when given, act = gelu_tanh and pre_gelu = X W^T + b;
 *   when NULL, act = identity), Y [tokens, out] (out). */
EPIGEMM_API
epigemm_status_t epigemm_linear_fprop(epigemm_context_t ctx, const epigemm_tensor_t *X,
                                      const epigemm_tensor_t *W, const epigemm_vector_t *bias,
                                      const epigemm_tensor_t *pre_gelu, const epigemm_tensor_t *Y,
                                      void *workspace, size_t workspace_bytes, void *stream);

/* Data gradient: dX = dY W, optionally through the GELU of the previous layer.
 *   dY [tokens, out] (in), W [out, in] (in),
 *   pre_gelu [tokens, in] (in, optional): the previous layer's saved pre-activation; when given
 *     dX = (dY W) * gelu_tanh'(pre_gelu),
 *   bias_grad [in] (out, optional, needs pre_gelu): sum over tokens of dX, the previous layer's
 *     bias gradient,
 *   dX [tokens, in] (out). */
EPIGEMM_API
epigemm_status_t epigemm_linear_dgrad(epigemm_context_t ctx, const epigemm_tensor_t *dY,
                                      const epigemm_tensor_t *W, const epigemm_tensor_t *pre_gelu,
                                      const epigemm_vector_t *bias_grad, const epigemm_tensor_t *dX,
                                      void *workspace, size_t workspace_bytes, void *stream);

/* Forward with any activation: Y = act(X W^T + b) (ACT_BIAS, or ACT_AUX_BIAS when pre_act is
 * given; without bias, ACT / ACT_AUX).
 *   X [tokens, in] (in), W [out, in] (in), bias [out] (in, optional), activation,
 *   pre_act [tokens, out] (out, optional): the pre-activation X W^T + b, saved for the backward,
 *   Y [tokens, out] (out).
 * epigemm_linear_fprop is this call with act = gelu_tanh when pre_gelu is given, else identity. */
EPIGEMM_API
epigemm_status_t epigemm_linear_fprop_act(epigemm_context_t ctx, const epigemm_tensor_t *X,
                                          const epigemm_tensor_t *W, const epigemm_vector_t *bias,
                                          epigemm_activation_t activation,
                                          const epigemm_tensor_t *pre_act, const epigemm_tensor_t *Y,
                                          void *workspace, size_t workspace_bytes, void *stream);

/* Data gradient through any activation of the previous layer (DACT, or DACT_BGRAD with
 * bias_grad): dX = (dY W) * act'(pre_act).
 *   dY [tokens, out] (in), W [out, in] (in), activation,
 *   pre_act [tokens, in] (in): the previous layer's saved pre-activation,
 *   bias_grad [in] (out, optional): sum over tokens of dX, the previous layer's bias gradient,
 *   dX [tokens, in] (out).
 * epigemm_linear_dgrad with pre_gelu is this call with act = gelu_tanh. */
EPIGEMM_API
epigemm_status_t epigemm_linear_dgrad_act(epigemm_context_t ctx, const epigemm_tensor_t *dY,
                                          const epigemm_tensor_t *W, epigemm_activation_t activation,
                                          const epigemm_tensor_t *pre_act,
                                          const epigemm_vector_t *bias_grad,
                                          const epigemm_tensor_t *dX, void *workspace,
                                          size_t workspace_bytes, void *stream);

/* Weight gradient: dW (+)= dY^T X.
 *   X [tokens, in] (in), dY [tokens, out] (in), dW [out, in] (out; accumulate != 0 adds to it),
 *   bias_grad [out] (out, optional): sum over tokens of dY. */
EPIGEMM_API
epigemm_status_t epigemm_linear_wgrad(epigemm_context_t ctx, const epigemm_tensor_t *X,
                                      const epigemm_tensor_t *dY, const epigemm_tensor_t *dW,
                                      int accumulate, const epigemm_vector_t *bias_grad,
                                      void *workspace, size_t workspace_bytes, void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#undef EPIGEMM_ENUM_INT

#endif /* EPIGEMM_EPIGEMM_H */
