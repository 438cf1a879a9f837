// Host conversions between float and the 16-bit storage types (bf16, fp16), written here so the
// tool needs nothing but the public headers. float -> 16 bit rounds to nearest even, keeps NaN a
// NaN and overflows to Inf, as the library and CUDA's __float2bfloat16_rn / __float2half_rn do.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "epigemm/epigemm.h"

namespace epigemm_cli {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// bf16 is the upper half of a float.
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_float(uint16_t h) { return float_of(uint32_t(h) << 16); }

// fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals below 2^-14.
inline uint16_t float_to_fp16_bits(float f) {
  const uint32_t u = bits_of(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (magnitude < 0x38800000u) {
    // Below 2^-14: the value in units of 2^-24 (exact: a power-of-two scaling of a small float),
    // rounded to the nearest even integer; 1024 is correctly the smallest normal's encoding.
    const float units = float_of(magnitude) * 16777216.0f;
    return uint16_t(sign | uint16_t(std::nearbyint(units)));
  }
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return uint16_t(sign | ((rounded - 0x38000000u) >> 13));
}
inline float fp16_bits_to_float(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return float_of((uint32_t(h & 0x8000u) << 16) | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline size_t dtype_bytes(epigemm_dtype_t dtype) { return dtype == EPIGEMM_DTYPE_F32 ? 4 : 2; }

inline float load_element(const void* data, epigemm_dtype_t dtype, int64_t index) {
  switch (dtype) {
    case EPIGEMM_DTYPE_BF16: return bf16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case EPIGEMM_DTYPE_F16: return fp16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case EPIGEMM_DTYPE_F32: return static_cast<const float*>(data)[index];
  }
  return NAN;  // not reached: the tool uses the three dtypes above only
}

inline void store_element(void* data, epigemm_dtype_t dtype, int64_t index, float value) {
  switch (dtype) {
    case EPIGEMM_DTYPE_BF16: static_cast<uint16_t*>(data)[index] = float_to_bf16_bits(value); break;
    case EPIGEMM_DTYPE_F16: static_cast<uint16_t*>(data)[index] = float_to_fp16_bits(value); break;
    case EPIGEMM_DTYPE_F32: static_cast<float*>(data)[index] = value; break;
  }
}

// The value a float takes once stored in `dtype`.
inline float round_to(epigemm_dtype_t dtype, float value) {
  switch (dtype) {
    case EPIGEMM_DTYPE_BF16: return bf16_bits_to_float(float_to_bf16_bits(value));
    case EPIGEMM_DTYPE_F16: return fp16_bits_to_float(float_to_fp16_bits(value));
    case EPIGEMM_DTYPE_F32: return value;
  }
  return value;  // not reached, as above
}

}  // namespace epigemm_cli
