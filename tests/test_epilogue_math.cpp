// gelu_tanh and gelu_tanh_grad (src/core/epilogue_math.hpp) against values computed here
// independently in long double from the formulas of docs/conventions.md, and the fp16/bf16
// conversions against known bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/epilogue_math.hpp"
#include "core/numeric.hpp"

namespace {

// Independent of the library's sigmoid form: 1 + tanh(u) = e^u / cosh(u) and
// 1 - tanh(u)^2 = 1 / cosh(u)^2, both free of cancellation, in long double.
long double golden_u(long double x) {
  const long double c = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  return c * (x + 0.044715L * x * x * x);
}

long double golden_gelu(long double x) {
  const long double u = golden_u(x);
  return 0.5L * x * (std::exp(u) / std::cosh(u));
}

long double golden_gelu_grad(long double x) {
  const long double c = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  const long double u = golden_u(x);
  const long double sech = 1.0L / std::cosh(u);
  return 0.5L * (std::exp(u) / std::cosh(u)) +
         0.5L * x * sech * sech * c * (1.0L + 3.0L * 0.044715L * x * x);
}

// Relative error the float evaluation may have: its u is off by an ulp or so, and the exp
// amplifies that by |2u| (the function's condition), plus a few ulp of its own arithmetic.
float float_tolerance(float x) {
  const float u = std::fabs(float(golden_u(x)));
  return 1.2e-7f * (8.0f + 4.0f * std::fmin(u, 100.0f));
}

const double kPoints[] = {0.0,   -0.0,  1e-30, -1e-30, 1e-6,  -1e-6, 0.1,   -0.1,  0.5,
                          -0.5,  1.0,   -1.0,  1.5,    -1.5,  2.0,   -2.0,  3.0,   -3.0,
                          4.0,   -4.0,  5.5,   -5.5,   8.0,   -8.0,  10.0,  -10.0, 20.0,
                          -20.0, 100.0, -100.0, 1e3,   -1e3,  9999.0, -9999.0, 1e4, -1e4,
                          1e5,   -1e5,  1e20,  -1e20,  3e38,  -3e38};

TEST(GeluTanh, DoubleMatchesLongDoubleGolden) {
  for (double x : kPoints) {
    const long double g = golden_gelu(x), dg = golden_gelu_grad(x);
    if (std::fabs(x) >= 50.0) continue;  // golden's cosh overflows far out; see FarOutIsTheLimit
    // As for float below: the exp amplifies the rounding of u by |2u|.
    const double tolerance = 2.3e-16 * (8.0 + 4.0 * std::fabs(double(golden_u(x))));
    EXPECT_NEAR(epigemm::gelu_tanh(x), double(g), tolerance * std::fabs(double(g))) << "x=" << x;
    EXPECT_NEAR(epigemm::gelu_tanh_grad(x), double(dg), tolerance * std::fabs(double(dg)))
        << "x=" << x;
  }
}

TEST(GeluTanh, FloatWithinFewUlpOfGolden) {
  for (double xd : kPoints) {
    const float x = float(xd);
    if (std::fabs(x) > 9.0f) continue;  // beyond, results are subnormal or exact limits
    const long double g = golden_gelu(x), dg = golden_gelu_grad(x);
    const float tolerance = float_tolerance(x);
    EXPECT_NEAR(epigemm::gelu_tanh(x), float(g), tolerance * std::fabs(float(g))) << "x=" << x;
    EXPECT_NEAR(epigemm::gelu_tanh_grad(x), float(dg), tolerance * std::fabs(float(dg)) + 1e-30f)
        << "x=" << x;
  }
}

TEST(GeluTanh, FarOutIsTheLimit) {
  // Past |x| ~ 30 the exact values are within 1e-300 of the limits x / 0 and 1 / 0.
  for (double x : {100.0, 1e3, 1e4, 1e5, 1e20, 3e38}) {
    EXPECT_EQ(epigemm::gelu_tanh(x), x);
    EXPECT_EQ(epigemm::gelu_tanh_grad(x), 1.0);
    EXPECT_EQ(epigemm::gelu_tanh(-x), 0.0);
    EXPECT_EQ(epigemm::gelu_tanh_grad(-x), 0.0);
    EXPECT_EQ(epigemm::gelu_tanh(float(x)), float(x));
    EXPECT_EQ(epigemm::gelu_tanh(float(-x)), 0.0f);
    EXPECT_EQ(epigemm::gelu_tanh_grad(float(-x)), 0.0f);
  }
}

TEST(GeluTanh, KnownValues) {
  // gelu_tanh(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.8411919906082768
  EXPECT_NEAR(epigemm::gelu_tanh(1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(epigemm::gelu_tanh(-1.0), -0.15880800939172324, 1e-15);
  EXPECT_EQ(epigemm::gelu_tanh(0.0), 0.0);
  EXPECT_EQ(epigemm::gelu_tanh_grad(0.0), 0.5);
  // Large |x|: the identity above and 0 below; the derivative 1 and 0.
  EXPECT_EQ(epigemm::gelu_tanh(50.0f), 50.0f);
  EXPECT_EQ(epigemm::gelu_tanh(-50.0f), -0.0f);
  EXPECT_EQ(epigemm::gelu_tanh_grad(50.0f), 1.0f);
  EXPECT_EQ(epigemm::gelu_tanh_grad(-50.0f), 0.0f);
}

TEST(GeluTanh, InfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(epigemm::gelu_tanh(inf), inf);
  EXPECT_EQ(epigemm::gelu_tanh(-inf), 0.0f);
  EXPECT_EQ(epigemm::gelu_tanh_grad(inf), 1.0f);
  EXPECT_EQ(epigemm::gelu_tanh_grad(-inf), 0.0f);
  EXPECT_TRUE(std::isnan(epigemm::gelu_tanh(nan)));
  EXPECT_TRUE(std::isnan(epigemm::gelu_tanh_grad(nan)));
  EXPECT_TRUE(std::isnan(epigemm::gelu_tanh(double(nan))));
  EXPECT_TRUE(std::isnan(epigemm::gelu_tanh_grad(double(nan))));
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  using epigemm::float_to_bf16;
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(float_to_bf16(epigemm::bits_float(0x3f808000u)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16(epigemm::bits_float(0x3f818000u)).bits, 0x3f82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(epigemm::bits_float(0x3f808001u)).bits, 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(float_to_bf16(epigemm::bits_float(0x7f7fffffu)).bits, 0x7f80);  // FLT_MAX -> Inf
  const uint16_t nan_bits = float_to_bf16(epigemm::bits_float(0x7f800001u)).bits;  // sNaN payload low
  EXPECT_TRUE(std::isnan(epigemm::bf16_to_float({nan_bits})));
  EXPECT_EQ(float_to_bf16(epigemm::bits_float(0x00010000u)).bits, 0x0001);  // subnormal kept
  EXPECT_EQ(epigemm::bf16_to_float({0xc040}), -3.0f);
}

TEST(Numeric, HalfRoundsToNearestEvenWithSubnormals) {
  using epigemm::float_to_half;
  using epigemm::half_to_float;
  EXPECT_EQ(float_to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(float_to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f).bits, 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f).bits, 0x7c00);  // rounds to Inf
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048).bits, 0x3c00);   // tie -> even (down)
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048).bits, 0x3c02);   // tie -> even (up)
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie -> even (zero)
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)).bits, 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -24)).bits, 0x0003);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1023.5f, -24)).bits, 0x0400);  // rounds up into normal
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(half_to_float({0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float({0x03ff}), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float({0x7c00}), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float({0xfc00}), -std::numeric_limits<float>::infinity());
  // Every finite half survives the round trip.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const epigemm::Half h{uint16_t(bits)};
    const float f = half_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f).bits, h.bits) << std::hex << bits;
  }
}

}  // namespace
