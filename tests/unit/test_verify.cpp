// Verification helper: norms, worst index, NaN never passes, size mismatch.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sciproxy/core/verify.hpp"

using namespace sciproxy;

TEST(Verify, IdenticalArraysPass) {
  const std::vector<double> a{1, 2, 3};
  const auto c = compare<double, double>(a, a, {1e-15});
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(c.rel_l2, 0.0);
  EXPECT_EQ(c.max_abs, 0.0);
}

TEST(Verify, HandComputedErrors) {
  const std::vector<double> ref{3, 4, 0};  // ||ref|| = 5
  const std::vector<float> out{3, 4.5f, -0.25f};
  const auto c = compare<float, double>(out, ref, {0.2});
  EXPECT_NEAR(c.rel_l2, std::sqrt(0.25 + 0.0625) / 5, 1e-12);
  EXPECT_DOUBLE_EQ(c.max_abs, 0.5);
  EXPECT_EQ(c.worst_index, 1u);
  EXPECT_DOUBLE_EQ(c.max_rel, 0.125);  // the zero reference element is left out of max_rel
  EXPECT_TRUE(c.pass);
  EXPECT_FALSE((compare<float, double>(out, ref, {0.1}).pass));
  EXPECT_FALSE((compare<float, double>(out, ref, {0.2, 0.4}).pass));  // max-abs bound
}

TEST(Verify, NanNeverPasses) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> ref{1, 2, 3}, out{1, nan, 3};
  const auto c = compare<double, double>(out, ref, {1e300});
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.nan_out, 1u);
  EXPECT_EQ(c.worst_index, 1u);
  EXPECT_NE(c.summary().find("FAIL"), std::string::npos);
  EXPECT_FALSE((compare<double, double>(ref, out, {1e300}).pass));
}

TEST(Verify, SizeMismatchFails) {
  const std::vector<double> a{1, 2}, b{1, 2, 3};
  const auto c = compare<double, double>(a, b, {1});
  EXPECT_FALSE(c.pass);
  EXPECT_FALSE(c.shapes_match);
}
