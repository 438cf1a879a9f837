// Host-side storage types for fp16 and bf16 and their conversions to and from fp32.
// float -> half/bf16 rounds to nearest even, keeps NaN a (quiet) NaN, overflows to Inf, and
// produces subnormal halves where the value is that small. The CUDA code uses cuda_fp16.h /
// cuda_bf16.h, which round the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "epigemm/epigemm.h"

namespace epigemm {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(BFloat16 h) { return bits_float(uint32_t(h.bits) << 16); }

inline BFloat16 float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{uint16_t((u >> 16) | 0x0040u)};  // NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return BFloat16{uint16_t((u + rounding) >> 16)};
}

inline float half_to_float(Half h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // Inf / NaN
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_float(sign);  // +-0
  // Subnormal half: value = mantissa * 2^-24; normalize into a float.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3ffu;
  return bits_float(sign | (uint32_t(113 - shift) << 23) | (mantissa << 13));
}

inline Half float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return Half{uint16_t(sign | 0x7e00u)};  // NaN
  if (magnitude >= 0x477ff000u) return Half{uint16_t(sign | 0x7c00u)};  // rounds to >= 65520: Inf
  if (magnitude >= 0x38800000u) {  // normal half (>= 2^-14)
    const uint32_t rounding = 0xfffu + ((magnitude >> 13) & 1u);
    return Half{uint16_t(sign | ((magnitude - 0x38000000u + rounding) >> 13))};
  }
  if (magnitude < 0x33000000u) return Half{sign};  // below half the smallest subnormal: +-0
  // Subnormal half: shift the 24-bit significand right, rounding to nearest even.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24 for this range
  const uint32_t halfway = 1u << (shift - 1);
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  uint32_t result = significand >> shift;
  if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
  return Half{uint16_t(sign | result)};
}

// Reads element `index` of a buffer of the given dtype as float. Through memcpy: the contract
// allows any alignment (docs/conventions.md, "What a call guarantees"), and an fp32 element at an
// address that is not a multiple of 4 must not be read through a float*. The compilers turn the
// fixed-size memcpy into one (unaligned) load.
inline float load_as_float(const void* data, epigemm_dtype_t dtype, int64_t index) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  switch (dtype) {
    case EPIGEMM_DTYPE_F16: {
      Half h;
      std::memcpy(&h.bits, bytes + index * 2, 2);
      return half_to_float(h);
    }
    case EPIGEMM_DTYPE_BF16: {
      BFloat16 h;
      std::memcpy(&h.bits, bytes + index * 2, 2);
      return bf16_to_float(h);
    }
    case EPIGEMM_DTYPE_F32:
      break;
  }
  float f;
  std::memcpy(&f, bytes + index * 4, 4);
  return f;
}

// A double rounded to float toward zero, with the lowest significand bit set where that dropped
// anything ("round to odd"). Rounding that float to half or bf16 to nearest even then gives the
// double rounded once (float keeps at least 2 bits more than twice theirs: 24 >= 2 x 11 + 2), where
// rounding through the nearest float could round twice (a tie the first rounding made).
inline float double_to_float_round_to_odd(double d) {
  float f = float(d);  // nearest even; NaN stays NaN, beyond float's range Inf
  if (double(f) == d || d != d) return f;
  if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // toward zero
  uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Rounds a float to the dtype (nearest even) and stores it as element `index`, through memcpy as
// load_as_float.
inline void store_from_float(void* data, epigemm_dtype_t dtype, int64_t index, float value) {
  unsigned char* bytes = static_cast<unsigned char*>(data);
  switch (dtype) {
    case EPIGEMM_DTYPE_F16: {
      const Half h = float_to_half(value);
      std::memcpy(bytes + index * 2, &h.bits, 2);
      return;
    }
    case EPIGEMM_DTYPE_BF16: {
      const BFloat16 h = float_to_bf16(value);
      std::memcpy(bytes + index * 2, &h.bits, 2);
      return;
    }
    case EPIGEMM_DTYPE_F32:
      break;
  }
  std::memcpy(bytes + index * 4, &value, 4);
}

// Rounds a double once to the dtype (nearest even) and stores it as element `index`.
inline void store_from_double(void* data, epigemm_dtype_t dtype, int64_t index, double value) {
  switch (dtype) {
    case EPIGEMM_DTYPE_F16:
    case EPIGEMM_DTYPE_BF16: store_from_float(data, dtype, index, double_to_float_round_to_odd(value)); return;
    case EPIGEMM_DTYPE_F32: break;
  }
  store_from_float(data, dtype, index, float(value));
}

}  // namespace epigemm
