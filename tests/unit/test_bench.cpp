// Benchmark runner statistics, environment record, atomic file writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"

using namespace sciproxy;

TEST(Bench, WarmupThenRepetitionsWithStatistics) {
  int calls = 0;
  const std::vector<double> durations{9, 9, 3, 1, 2, 5, 4};  // the first two are warm-up
  const BenchStats s = run_benchmark([&] { return durations[calls++]; }, 2, 5);
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(s.seconds.size(), 5u);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_THROW(run_benchmark([] { return 1.0; }, 0, 0), InvalidArgument);
}

TEST(Bench, EnvironmentRecordHasWhatComparisonsNeed) {
  const auto env = environment_record();
  for (const char* key :
       {"cpu_model", "threads", "gpus", "compiler", "flags", "git_commit", "date"})
    EXPECT_TRUE(env.contains(key)) << key;
}

TEST(Bench, AtomicWriteLeavesNoPartialFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "sciproxy_test_bench";
  fs::create_directories(dir);
  const std::string path = (dir / "out.json").string();
  write_file_atomically(path, "{\"a\": 1}\n");
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(text, "{\"a\": 1}\n");
  EXPECT_THROW(write_file_atomically((dir / "missing" / "x.json").string(), "x"), IoError);
  EXPECT_FALSE(fs::exists(dir / "missing"));
  fs::remove_all(dir);
}

TEST(Bench, EnvironmentJsonIsTheRecordAsText) {
  const auto env = nlohmann::json::parse(environment_json(3));
  EXPECT_EQ(env.at("threads"), 3);
  EXPECT_TRUE(env.contains("git_commit"));
}
