// Timers: nesting, call counts, min/avg/max, recorded (GPU-style) durations, table and JSON.
#include <gtest/gtest.h>

#include <thread>

#include "core/json.hpp"
#include "sciproxy/core/timers.hpp"

using sciproxy::Timers;

TEST(Timers, NestedRegionsAreCountedUnderTheirParent) {
  Timers t;
  for (int i = 0; i < 3; ++i) {
    auto outer = Timers::region(&t, "outer");
    auto inner = Timers::region(&t, "inner");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const auto* outer = t.find("outer");
  const auto* inner = t.find("outer/inner");
  ASSERT_NE(outer, nullptr);
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(outer->calls, 3);
  EXPECT_EQ(inner->calls, 3);
  EXPECT_EQ(inner->depth, 1);
  EXPECT_GE(inner->min, 0.002);
  EXPECT_LE(inner->min, inner->avg());
  EXPECT_LE(inner->avg(), inner->max);
  EXPECT_GE(outer->total, inner->total);
  EXPECT_EQ(t.stats()[0].path, "outer");  // parents come first in the table
}

TEST(Timers, RecordAddsMeasuredDurations) {
  Timers t;
  {
    auto r = Timers::region(&t, "parstack");
    t.record("kernel", 0.5);
    t.record("kernel", 1.5);
  }
  const auto* k = t.find("parstack/kernel");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->calls, 2);
  EXPECT_DOUBLE_EQ(k->min, 0.5);
  EXPECT_DOUBLE_EQ(k->max, 1.5);
  EXPECT_DOUBLE_EQ(k->avg(), 1.0);
  EXPECT_DOUBLE_EQ(k->total, 2.0);
}

TEST(Timers, TableAndJsonNameEveryRegion) {
  Timers t;
  t.record("a", 0.25);
  {
    auto r = Timers::region(&t, "b");
    t.record("c", 0.125);
  }
  const std::string table = t.table();
  for (const char* column : {"name", "# calls", "t_min", "t_avg", "t_max", "total"})
    EXPECT_NE(table.find(column), std::string::npos) << column;
  EXPECT_NE(table.find("\n  c "), std::string::npos) << table;  // child indented
  const auto j = to_json(t);
  EXPECT_EQ(nlohmann::json::parse(t.json()), j);  // the public text form is the same record
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[2]["name"], "b/c");
  EXPECT_DOUBLE_EQ(j[0]["total"].get<double>(), 0.25);
}

TEST(Timers, NullTimersAreAllowed) {
  auto r = Timers::region(nullptr, "nothing listens");
  EXPECT_GE(r.elapsed(), 0.0);
}
