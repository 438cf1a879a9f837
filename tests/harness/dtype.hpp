// The test harness's own fp32 / fp16 / bf16 storage conversions, written independently of the
// library's (src/core/numeric.hpp) so that a bug there cannot hide in both the computation and
// its check. They work by arithmetic instead of bit manipulation: a value is rounded to the
// dtype's grid with nearbyint (round to nearest, ties to even, in the default rounding mode) on a
// power-of-two quantum, then the exactly representable result is encoded.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "epigemm/epigemm.h"

namespace epigemm_test {

inline size_t dtype_bytes(epigemm_dtype_t dtype) { return dtype == EPIGEMM_DTYPE_F32 ? 4 : 2; }

inline float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t bits_from_float(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals are multiples of 2^-24.
inline double f16_decode(uint16_t bits) {
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(double(mantissa), -24);
  return sign * std::ldexp(double(1024 + mantissa), exponent - 25);
}

inline uint16_t f16_encode(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
  const double a = std::fabs(double(f));
  if (std::isinf(a)) return uint16_t(sign | 0x7c00u);
  if (a == 0.0) return sign;
  const int e = std::ilogb(a);
  const double quantum = e < -14 ? std::ldexp(1.0, -24) : std::ldexp(1.0, e - 10);
  const double q = std::nearbyint(a / quantum) * quantum;  // on the fp16 grid, maybe one binade up
  if (q > 65504.0) return uint16_t(sign | 0x7c00u);  // largest finite fp16 is 65504
  if (q < std::ldexp(1.0, -14)) return uint16_t(sign | uint16_t(q / std::ldexp(1.0, -24)));
  const int qe = std::ilogb(q);
  const uint16_t mantissa = uint16_t(q / std::ldexp(1.0, qe - 10) - 1024.0);
  return uint16_t(sign | uint16_t((qe + 15) << 10) | mantissa);
}

// bf16: the upper half of an fp32 (8 exponent bits, 7 mantissa bits).
inline double bf16_decode(uint16_t bits) { return double(float_from_bits(uint32_t(bits) << 16)); }

inline uint16_t bf16_encode(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  if (std::isnan(f)) return uint16_t(sign | 0x7fc0u);
  const double a = std::fabs(double(f));
  if (std::isinf(a)) return uint16_t(sign | 0x7f80u);
  if (a == 0.0) return sign;
  const int e = std::ilogb(a);
  const double quantum = e < -126 ? std::ldexp(1.0, -133) : std::ldexp(1.0, e - 7);
  const double q = std::nearbyint(a / quantum) * quantum;
  const double largest = std::ldexp(255.0, 120);  // (2 - 2^-7) * 2^127
  if (q > largest) return uint16_t(sign | 0x7f80u);
  // q has at most 8 significant bits, so as an fp32 its low 16 bits are zero.
  return uint16_t(sign | uint16_t(bits_from_float(float(q)) >> 16));
}

// Element `index` of a buffer of the dtype, as a double.
inline double decode(const void* data, epigemm_dtype_t dtype, int64_t index) {
  if (dtype == EPIGEMM_DTYPE_F32) {
    float f;
    std::memcpy(&f, static_cast<const unsigned char*>(data) + index * 4, 4);
    return double(f);
  }
  uint16_t bits;
  std::memcpy(&bits, static_cast<const unsigned char*>(data) + index * 2, 2);
  return dtype == EPIGEMM_DTYPE_F16 ? f16_decode(bits) : bf16_decode(bits);
}

// Stores v as the library does: the value rounded to fp32, then to the dtype (nearest even).
inline void encode(void* data, epigemm_dtype_t dtype, int64_t index, double v) {
  const float f = float(v);
  unsigned char* p = static_cast<unsigned char*>(data);
  if (dtype == EPIGEMM_DTYPE_F32) {
    std::memcpy(p + index * 4, &f, 4);
    return;
  }
  const uint16_t bits = dtype == EPIGEMM_DTYPE_F16 ? f16_encode(f) : bf16_encode(f);
  std::memcpy(p + index * 2, &bits, 2);
}

// v as it reads back after being stored in the dtype.
inline double round_to_dtype(double v, epigemm_dtype_t dtype) {
  unsigned char storage[4];
  encode(storage, dtype, 0, v);
  return decode(storage, dtype, 0);
}

// The poison written over every output (and every byte of padding) before a call: a quiet NaN
// with a recognisable payload, so "not written" and "read where it should not" both show.
inline uint32_t poison_bits(epigemm_dtype_t dtype) {
  switch (dtype) {
    case EPIGEMM_DTYPE_F16: return 0x7e5au;   // fp16 quiet NaN, payload 0x25a
    case EPIGEMM_DTYPE_BF16: return 0x7fdau;  // bf16 quiet NaN, payload 0x5a
    default: return 0x7fc0deadu;              // fp32 quiet NaN, payload 0xdead
  }
}

}  // namespace epigemm_test
