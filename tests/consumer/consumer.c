/* A program that uses epigemm as another project would, from C: checks that the library is the
 * version of the header it was compiled against and runs one small forward layer,
 * Y[tokens = 3, out = 2] = X[3, in = 4] W[2, 4]^T + b[2], against the product computed here. */
#include <epigemm/epigemm.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  float x[3 * 4] = {1, 2, 3, 4, -1, 0.5f, 0, 2, 0.25f, -2, 1, -0.5f};
  float w[2 * 4] = {0.1f, -0.2f, 0.3f, 0.05f, -0.1f, 0.05f, 0.2f, -0.3f};
  float b[2] = {0.5f, -0.25f};
  float y[3 * 2];
  epigemm_tensor_t X = {x, EPIGEMM_DTYPE_F32, 3, 4, 4, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t W = {w, EPIGEMM_DTYPE_F32, 2, 4, 4, EPIGEMM_MEMORY_HOST};
  epigemm_vector_t B = {b, EPIGEMM_DTYPE_F32, 2, EPIGEMM_MEMORY_HOST};
  epigemm_tensor_t Y = {y, EPIGEMM_DTYPE_F32, 3, 2, 2, EPIGEMM_MEMORY_HOST};
  char header_version[32];
  epigemm_context_t ctx;
  int t, o, i, failures = 0;

  snprintf(header_version, sizeof header_version, "%d.%d.%d", EPIGEMM_VERSION_MAJOR,
           EPIGEMM_VERSION_MINOR, EPIGEMM_VERSION_PATCH);
  if (strcmp(epigemm_get_version(), header_version) != 0) {
    fprintf(stderr, "FAILED: library version %s, header version %s\n", epigemm_get_version(),
            header_version);
    return 1;
  }
  if (epigemm_context_create(&ctx) != EPIGEMM_STATUS_SUCCESS) return 1;
  if (epigemm_linear_fprop(ctx, &X, &W, &B, NULL, &Y, NULL, 0, NULL) != EPIGEMM_STATUS_SUCCESS) {
    fprintf(stderr, "FAILED: epigemm_linear_fprop: %s\n", epigemm_context_last_error(ctx));
    epigemm_context_destroy(ctx);
    return 1;
  }
  for (t = 0; t < 3; ++t) {
    for (o = 0; o < 2; ++o) {
      double expected = b[o];
      for (i = 0; i < 4; ++i) expected += (double)x[t * 4 + i] * w[o * 4 + i];
      if (fabs(y[t * 2 + o] - expected) > 1e-5 + 1e-5 * fabs(expected)) {
        fprintf(stderr, "FAILED: Y[%d, %d] = %.7g, expected %.7g\n", t, o, y[t * 2 + o], expected);
        ++failures;
      }
    }
  }
  epigemm_context_destroy(ctx);
  printf("epigemm %s: %s\n", epigemm_get_version(), failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
