/* The smallest C use of epigemm: a forward layer Y = gelu_tanh(X W^T + b), saving the
 * pre-activation, in layer coordinates. X is [tokens=4, in=3], W is [out=2, in=3]. */
#include <epigemm/epigemm.h>
#include <stdio.h>

int main(void) {
  float x[4 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  float w[2 * 3] = {0.1f, -0.2f, 0.3f, -0.1f, 0.05f, 0.2f};
  float b[2] = {0.5f, -0.5f};
  float y[4 * 2], pre[4 * 2];
  epigemm_tensor_t X = {x, EPIGEMM_DTYPE_F32, 4, 3, 3, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t W = {w, EPIGEMM_DTYPE_F32, 2, 3, 3, EPIGEMM_MEMORY_HOST};
  epigemm_vector_t B = {b, EPIGEMM_DTYPE_F32, 2, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t Y = {y, EPIGEMM_DTYPE_F32, 4, 2, 2, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t P = {pre, EPIGEMM_DTYPE_F32, 4, 2, 2, EPIGEMM_MEMORY_HOST};
  epigemm_context_t ctx;
  epigemm_backend_t used;
  const char *why;
  int t;
  if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) return 1;
  if (epigemm_linear_fprop(ctx, &X, &W, &B, &P, &Y, NULL, 0, NULL) != EPIGEMM_STATUS_SUCCESS) {
    fprintf(stderr, "epigemm: %s\n", epigemm_context_last_error(ctx));
    epigemm_context_destroy(ctx);
    return 1;
  }
  epigemm_context_last_backend(ctx, &used, &why);
  for (t = 0; t < 4; ++t) printf("token %d: y = (% .5f, % .5f)\n", t, y[2 * t], y[2 * t + 1]);
  printf("backend: %s (%s)\n", epigemm_backend_name(used), why);
  epigemm_context_destroy(ctx);
  return 0;
}
