// A fresh directory per test (named after the test and the process), removed afterwards, for
// tests that write files: path() names a file in it, listing() shows what is there (a temporary
// left behind by an atomic write would show).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace sciproxy::testing {

class TestDirectory : public ::testing::Test {
 protected:
  // prefix: the directory's name starts with it ("sciproxy_specex_files_").
  explicit TestDirectory(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (prefix_ + info->name() + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace sciproxy::testing
