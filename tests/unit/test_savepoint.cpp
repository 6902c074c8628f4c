// Savepoints (core/savepoint.hpp): fields of each type and layout and their metadata written and
// read back, writes that fail leaving nothing, the directory convention, bad files, and the
// comparison of two savepoints with errors known in advance (max abs, max rel, relative L2,
// where the worst one is), per-field tolerance files, missing fields, shape mismatches and NaN.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "common/test_directory.hpp"
#include "core/json.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/savepoint.hpp"

using namespace sciproxy;
using namespace sciproxy::savepoint;
namespace fs = std::filesystem;

namespace {

class Savepoints : public sciproxy::testing::TestDirectory {
 protected:
  Savepoints() : TestDirectory("sciproxy_savepoint_") {}
  void write_text(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
  }
};

std::vector<double> iota_values(std::size_t n, double first = 1) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

const FieldComparison& find(const SavepointComparison& c, const std::string& name) {
  for (const auto& f : c.fields)
    if (f.name == name) return f;
  throw std::runtime_error("no field " + name);
}

}  // namespace

// --- Writing and reading -------------------------------------------------------------------------

TEST_F(Savepoints, RoundTripOfEveryTypeLayoutAndMetadata) {
  const std::vector<double> vn = iota_values(12, 0.5);  // (cell=4, k=3), C order
  const std::vector<float> theta{1.5f, -2.25f, 3.0f};   // (k=3)
  // (cell=4, k=3) handed over in Fortran order: the first index fastest.
  std::vector<std::int32_t> mask_fortran(12);
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 3; ++k) mask_fortran[static_cast<std::size_t>(c + 4 * k)] = 10 * c + k;
  const std::vector<double> dtime_field{10.5};

  SavepointWriter w("call-diffusion-init");
  w.set("linit", true)
      .set("date", "2021-06-20T12:00:10.000")
      .set("dtime", 10.5)
      .set("jstep", 7)
      .set("big", std::int64_t{1} << 40)
      .set("halo", false)
      .set("comment", "");
  w.add_field("vn", vn, {"cell", "k"}, {4, 3})
      .add_field("theta_ref", theta, {"k"}, {3})
      .add_field("mask", mask_fortran, {"cell", "k"}, {4, 3}, Layout::column_major)
      .add_field("scalar", dtime_field, {}, {});
  w.write(path("sp.nc"));
  EXPECT_EQ(listing(), std::vector<std::string>{"sp.nc"});

  const SavepointFile f(path("sp.nc"));
  EXPECT_EQ(f.name(), "call-diffusion-init");
  const Metadata expected{{"linit", true},
                          {"date", std::string("2021-06-20T12:00:10.000")},
                          {"dtime", 10.5},
                          {"jstep", std::int64_t{7}},
                          {"big", std::int64_t{1} << 40},
                          {"halo", false},
                          {"comment", std::string()}};
  EXPECT_EQ(f.metadata(), expected);
  ASSERT_EQ(f.fields().size(), 4u);
  EXPECT_EQ(f.fields()[0].name, "vn");
  EXPECT_EQ(f.fields()[0].dtype, "float64");
  EXPECT_EQ(f.fields()[0].dims, (std::vector<std::string>{"cell", "k"}));
  EXPECT_EQ(f.fields()[0].shape, (std::vector<std::size_t>{4, 3}));
  EXPECT_EQ(f.fields()[0].source_layout, Layout::row_major);
  EXPECT_EQ(f.field("theta_ref").dtype, "float32");
  EXPECT_EQ(f.field("mask").dtype, "int32");
  EXPECT_EQ(f.field("mask").dims, (std::vector<std::string>{"cell", "k"}));
  EXPECT_EQ(f.field("mask").source_layout, Layout::column_major);
  EXPECT_TRUE(f.field("scalar").shape.empty());
  EXPECT_EQ(f.field("scalar").size(), 1u);

  EXPECT_EQ(f.load("vn"), vn);
  EXPECT_EQ(f.load("vn", {4, 3}), vn);
  EXPECT_EQ(f.load("theta_ref"), (std::vector<double>{1.5, -2.25, 3.0}));
  EXPECT_EQ(f.load("scalar"), dtime_field);
  // Fortran-ordered data read as (cell, k) in C order, and back in Fortran order when asked.
  const std::vector<double> mask_c = f.load("mask");
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(mask_c[static_cast<std::size_t>(3 * c + k)], 10 * c + k);
  const std::vector<double> mask_f = f.load("mask", Layout::column_major);
  EXPECT_TRUE(std::equal(mask_f.begin(), mask_f.end(), mask_fortran.begin()));
}

TEST_F(Savepoints, ThreeDimensionalFortranOrderRoundTrip) {
  // (cell=2, k=3, b=4) in Fortran order: value 100c + 10k + b at c + 2k + 6b.
  std::vector<double> fortran(24);
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 3; ++k)
      for (int b = 0; b < 4; ++b)
        fortran[static_cast<std::size_t>(c + 2 * k + 6 * b)] = 100 * c + 10 * k + b;
  SavepointWriter("s")
      .add_field("x", fortran, {"cell", "k", "b"}, {2, 3, 4}, Layout::column_major)
      .write(path("x.nc"));
  const SavepointFile f(path("x.nc"));
  const auto c_order = f.load("x");
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 3; ++k)
      for (int b = 0; b < 4; ++b)
        EXPECT_EQ(c_order[static_cast<std::size_t>(12 * c + 4 * k + b)], 100 * c + 10 * k + b);
  EXPECT_EQ(f.load("x", Layout::column_major), fortran);
}

TEST_F(Savepoints, WriterRefusesBadFieldsAndMetadata) {
  const std::vector<double> six = iota_values(6);
  SavepointWriter w("call-diffusion-exit");
  w.add_field("vn", six, {"edge", "k"}, {3, 2});
  EXPECT_THROW(SavepointWriter("has/slash"), InvalidArgument);
  EXPECT_THROW(SavepointWriter(""), InvalidArgument);
  EXPECT_THROW(w.add_field("vn", six, {"edge", "k"}, {3, 2}), InvalidArgument);  // repeated
  EXPECT_THROW(w.add_field("_x", six, {"edge", "k"}, {3, 2}), InvalidArgument);
  EXPECT_THROW(w.add_field("w", six, {"edge"}, {3, 2}), InvalidArgument);       // one name short
  EXPECT_THROW(w.add_field("w", six, {"cell", "k"}, {3, 3}), InvalidArgument);  // 9 values asked
  EXPECT_THROW(w.add_field("w", six, {"k", "k"}, {2, 3}), InvalidArgument);
  EXPECT_THROW(w.add_field("k", six, {"cell"}, {6}), InvalidArgument);  // a dimension's name
  EXPECT_THROW(w.add_field("w", std::vector<double>{}, {"cell"}, {0}), InvalidArgument);
  const std::string m = message_of([&] { w.add_field("w", six, {"edge", "k"}, {2, 3}); });
  EXPECT_NE(m.find("field 'w' dimension 'edge'"), std::string::npos) << m;
  EXPECT_NE(m.find("(3)"), std::string::npos) << m;
  EXPECT_THROW(w.set("savepoint", 1), InvalidArgument);
  EXPECT_THROW(w.set("savepoint_format", 1), InvalidArgument);
  EXPECT_THROW(w.set("bad key", 1), InvalidArgument);
  // A string literal is a string, not a bool; the last value set wins.
  w.set("date", "today").set("n", 1).set("n", 2.5).set("count", std::size_t{3});
  EXPECT_THROW(w.set("huge", std::uint64_t{1} << 63), InvalidArgument);
  w.write(path("e.nc"));
  const SavepointFile f(path("e.nc"));
  EXPECT_EQ(f.metadata().at("date"), MetaValue(std::string("today")));
  EXPECT_EQ(f.metadata().at("n"), MetaValue(2.5));
  EXPECT_EQ(f.metadata().at("count"), MetaValue(std::int64_t{3}));
}

TEST_F(Savepoints, FailedWriteLeavesNothingAndKeepsTheOldFile) {
  const std::string p = path("sp.nc");
  SavepointWriter("small").add_field("x", iota_values(4), {"n"}, {4}).write(p);
  const auto before = fs::file_size(p);
  // About 4 MB against a 200 kB file-size limit: the write fails half-way (EFBIG).
  SavepointWriter big("big");
  big.add_field("x", iota_values(500000), {"n"}, {500000});
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit limit = old_limit;
  limit.rlim_cur = 200000;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  const std::string m = message_of([&] { big.write(p); });
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(m.find("could not write"), std::string::npos) << m;
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_EQ(listing(), std::vector<std::string>{"sp.nc"});
  EXPECT_EQ(fs::file_size(p), before);
  EXPECT_EQ(SavepointFile(p).name(), "small");
  // The same write succeeds without the limit.
  big.write(p);
  EXPECT_EQ(SavepointFile(p).name(), "big");
  EXPECT_EQ(listing(), std::vector<std::string>{"sp.nc"});
}

TEST_F(Savepoints, WriteToAMissingDirectoryOrADirectory) {
  SavepointWriter w("s");
  w.add_field("x", iota_values(2), {"n"}, {2});
  const std::string m = message_of([&] { w.write(path("no/such/dir/s.nc")); });
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
  EXPECT_THROW(w.write(path("no/such/dir/s.nc")), IoError);
  EXPECT_THROW(w.write(dir_.string()), InvalidArgument);
  EXPECT_THROW(w.write(""), InvalidArgument);
  EXPECT_TRUE(listing().empty());
}

TEST_F(Savepoints, DirectoryConvention) {
  const std::string dir = dir_.string();
  EXPECT_EQ(savepoint_path(dir, "diffusion", "call-diffusion-init", 0),
            (dir_ / "diffusion_call-diffusion-init_0.nc").string());
  SavepointWriter init("call-diffusion-init"), exit_("call-diffusion-exit"), odd("a_b");
  for (auto* w : {&init, &exit_, &odd}) w->add_field("x", iota_values(2), {"n"}, {2});
  EXPECT_EQ(write_next(init, dir, "diffusion"), path("diffusion_call-diffusion-init_0.nc"));
  EXPECT_EQ(write_next(exit_, dir, "diffusion"), path("diffusion_call-diffusion-exit_0.nc"));
  EXPECT_EQ(write_next(init, dir, "diffusion"), path("diffusion_call-diffusion-init_1.nc"));
  EXPECT_EQ(write_next(odd, dir, "diffusion"), path("diffusion_a_b_0.nc"));
  write_text("diffusion_notes.txt", "not a savepoint");
  write_text("other_call-diffusion-init_0.nc", "another prefix");

  const auto all = list_savepoints(dir, "diffusion");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].savepoint, "a_b");
  EXPECT_EQ(all[1].savepoint, "call-diffusion-exit");
  EXPECT_EQ(all[2].savepoint, "call-diffusion-init");
  EXPECT_EQ(all[2].occurrence, 0);
  EXPECT_EQ(all[3].occurrence, 1);
  const auto inits = list_savepoints(dir, "diffusion", "call-diffusion-init");
  ASSERT_EQ(inits.size(), 2u);
  EXPECT_EQ(SavepointFile(inits[1].path).name(), "call-diffusion-init");
  EXPECT_THROW(list_savepoints(path("missing"), "diffusion"), InvalidArgument);
  EXPECT_THROW(savepoint_path(dir, "bad/prefix", "x", 0), InvalidArgument);
  EXPECT_THROW(savepoint_path(dir, "p", "x", -1), InvalidArgument);
}

TEST_F(Savepoints, BadFilesAreNamedWithTheirFault) {
  std::string m = message_of([&] { SavepointFile f(path("missing.nc")); });
  EXPECT_NE(m.find("missing.nc' (no such file)"), std::string::npos) << m;
  EXPECT_THROW(SavepointFile(path("missing.nc")), InvalidArgument);
  write_text("text.nc", "this is not NetCDF\n");
  m = message_of([&] { SavepointFile f(path("text.nc")); });
  EXPECT_NE(m.find("text.nc', which is not one"), std::string::npos) << m;
  EXPECT_THROW(SavepointFile(path("text.nc")), InvalidArgument);
  EXPECT_THROW(SavepointFile(dir_.string()), InvalidArgument);
  EXPECT_THROW(SavepointFile(""), InvalidArgument);

  SavepointWriter("s").add_field("vn", iota_values(6), {"edge", "k"}, {3, 2}).write(path("s.nc"));
  const SavepointFile f(path("s.nc"));
  m = message_of([&] { f.load("w"); });
  EXPECT_NE(m.find("'w'"), std::string::npos) << m;
  EXPECT_NE(m.find("s.nc"), std::string::npos) << m;
  EXPECT_NE(m.find("(vn)"), std::string::npos) << m;
  EXPECT_THROW(f.field("w"), InvalidArgument);
  m = message_of([&] { f.load("vn", {2, 3}); });
  EXPECT_NE(m.find("field 'vn' of"), std::string::npos) << m;
  EXPECT_NE(m.find("expected shape (2, 3), got (edge=3, k=2)"), std::string::npos) << m;
}

// --- Comparison ----------------------------------------------------------------------------------

class Verify : public Savepoints {
 protected:
  // B, the reference: vn (cell=4, k=3) = 1..12, w (cell=4) = 0, 0, 0, 0.
  void write_reference(const std::string& name = "b.nc") const {
    SavepointWriter b("call-diffusion-exit");
    b.set("date", "2021-06-20T12:00:10.000").set("linit", false);
    b.add_field("vn", iota_values(12), {"cell", "k"}, {4, 3});
    b.add_field("w", std::vector<double>(4, 0.0), {"cell"}, {4});
    b.write(path(name));
  }
  // A: vn off by 0.01 at (0, 0) and by 0.5 at (2, 1); w as B's.
  void write_result(const std::string& name = "a.nc") const {
    auto vn = iota_values(12);
    vn[0] += 0.01;
    vn[2 * 3 + 1] += 0.5;
    SavepointWriter a("call-diffusion-exit");
    a.set("date", "2021-06-20T12:00:10.000").set("linit", false);
    a.add_field("vn", vn, {"cell", "k"}, {4, 3});
    a.add_field("w", std::vector<double>(4, 0.0), {"cell"}, {4});
    a.write(path(name));
  }
};

TEST_F(Verify, KnownErrorsAndWhereTheWorstIs) {
  write_reference();
  write_result();
  const SavepointFile a(path("a.nc")), b(path("b.nc"));
  const auto strict = verify_savepoints(a, b, Tolerances{});
  EXPECT_FALSE(strict.pass);
  EXPECT_TRUE(strict.notes.empty());
  ASSERT_EQ(strict.fields.size(), 2u);
  const auto& vn = find(strict, "vn");
  EXPECT_EQ(vn.status, FieldStatus::compared);
  EXPECT_DOUBLE_EQ(vn.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(vn.max_rel, 0.5 / 8);  // at (2, 1), where B is 8; (0, 0) gives 0.01
  double ref2 = 0;
  for (int i = 1; i <= 12; ++i) ref2 += i * i;  // 650
  const double d00 = (1 + 0.01) - 1;            // the rounding of 1.01 kept
  const double d21 = (8 + 0.5) - 8;
  EXPECT_NEAR(vn.rel_l2, std::sqrt(d00 * d00 + d21 * d21) / std::sqrt(ref2), 1e-16);
  EXPECT_EQ(vn.worst_index, (std::vector<std::size_t>{2, 1}));
  EXPECT_EQ(vn.failing, 2u);
  EXPECT_FALSE(vn.pass);
  EXPECT_EQ(vn.furthest_index, (std::vector<std::size_t>{2, 1}));  // 0.5 / 8e-12 > 0.01 / 1e-12
  EXPECT_EQ(vn.problem(), "2 of 12 values outside tolerance, the furthest at (cell=2, k=1)");
  EXPECT_TRUE(find(strict, "w").furthest_index.empty());
  EXPECT_TRUE(find(strict, "w").pass);
  EXPECT_EQ(find(strict, "w").max_abs, 0.0);

  // allclose: 0.5 <= 0.05 * 8 fails, 0.01 <= 0.05 * 1 passes; rtol 0.07 passes both.
  Tolerances t;
  t.global = {0.05, 0};
  EXPECT_EQ(find(verify_savepoints(a, b, t), "vn").failing, 1u);
  t.global = {0.07, 0};
  EXPECT_TRUE(verify_savepoints(a, b, t).pass);
  t.global = {0, 0.5};  // atol alone: |a - b| <= 0.5 holds everywhere
  EXPECT_TRUE(verify_savepoints(a, b, t).pass);
  t.global = {0, 0.49};
  EXPECT_FALSE(verify_savepoints(a, b, t).pass);

  // A compared with itself: exact.
  const auto same = verify_savepoints(a, a, Tolerances{});
  EXPECT_TRUE(same.pass);
  EXPECT_EQ(find(same, "vn").max_abs, 0.0);
  EXPECT_EQ(find(same, "vn").rel_l2, 0.0);

  const auto j = to_json(strict);
  EXPECT_EQ(j["kind"], "sciproxy-verify");
  EXPECT_EQ(j["pass"], false);
  EXPECT_EQ(j["fields_failed"], 1);
  EXPECT_EQ(j["fields"][0]["worst_index"], nlohmann::json({2, 1}));
  EXPECT_EQ(j["fields"][0]["furthest_index"], nlohmann::json({2, 1}));
  EXPECT_TRUE(j["fields"][1]["furthest_index"].is_null());
}

TEST_F(Verify, TheFurthestOutsideIsNotAlwaysTheLargestError) {
  // rtol 1e-3: 1000.5 against 1000 passes (0.5 <= 1), 1.1 against 1 fails (0.1 > 0.001).
  SavepointWriter a("s"), b("s");
  a.add_field("x", std::vector<double>{1000.5, 1.1, 2}, {"n"}, {3}).write(path("a.nc"));
  b.add_field("x", std::vector<double>{1000, 1, 2}, {"n"}, {3}).write(path("b.nc"));
  Tolerances t;
  t.global = {1e-3, 0};
  const auto c = verify_savepoints(SavepointFile(path("a.nc")), SavepointFile(path("b.nc")), t);
  const auto& x = find(c, "x");
  EXPECT_EQ(x.worst_index, std::vector<std::size_t>{0});
  EXPECT_EQ(x.furthest_index, std::vector<std::size_t>{1});
  EXPECT_EQ(x.failing, 1u);
  EXPECT_EQ(x.problem(), "1 of 3 values outside tolerance, the furthest at (n=1)");
}

TEST_F(Verify, OtherTypesAreComparedAsDoublesAndNoted) {
  SavepointWriter a("s"), b("s");
  a.add_field("x", std::vector<float>{0.5f, 1.25f}, {"n"}, {2}).write(path("a.nc"));
  b.add_field("x", std::vector<double>{0.5, 1.25}, {"n"}, {2}).write(path("b.nc"));
  const auto c = verify_savepoints(SavepointFile(path("a.nc")), SavepointFile(path("b.nc")), {});
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(c.notes, std::vector<std::string>{"field x: float32 in A, float64 in B"});
}

TEST_F(Verify, PerFieldToleranceFile) {
  write_reference();
  write_result();
  const SavepointFile a(path("a.nc")), b(path("b.nc"));
  write_text("tol.txt", "# field rtol atol\nvn 0.07 0   # 0.5 <= 0.07 * 8\n\n* 0 0\n");
  Tolerances t = read_tolerances(path("tol.txt"));
  EXPECT_EQ(t.of("vn").rtol, 0.07);
  EXPECT_EQ(t.of("w").rtol, 0.0);
  EXPECT_EQ(t.source, path("tol.txt"));
  const auto c = verify_savepoints(a, b, t);
  EXPECT_TRUE(c.pass);
  EXPECT_EQ(find(c, "vn").tolerance.rtol, 0.07);

  write_text("tight.txt", "vn 0.05 0\n");  // w keeps the default (rtol 1e-12, atol 0)
  EXPECT_FALSE(verify_savepoints(a, b, read_tolerances(path("tight.txt"))).pass);

  // Fields that neither file has are an error naming them.
  write_text("unknown.txt", "vn 1 0\nrho 1 0\nexner 1 0\n");
  const std::string m =
      message_of([&] { verify_savepoints(a, b, read_tolerances(path("unknown.txt"))); });
  EXPECT_NE(m.find("'exner', 'rho'"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown.txt"), std::string::npos) << m;
  EXPECT_THROW(verify_savepoints(a, b, read_tolerances(path("unknown.txt"))), InvalidArgument);
}

TEST_F(Verify, MalformedToleranceFiles) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"vn 1e-12\n", "line 1"},           {"vn 1e-12 0 extra\n", "line 1"},
      {"# ok\nvn -1 0\n", "line 2"},      {"vn abc 0\n", "\"abc\""},
      {"vn nan 0\n", "\"nan\""},          {"vn 1 0\nvn 2 0\n", "'vn' again"},
      {"* 1 0\n* 2 0\n", "a second one"},
  };
  for (const auto& [text, expected] : bad) {
    write_text("t.txt", text);
    const std::string m = message_of([&] { read_tolerances(path("t.txt")); });
    EXPECT_NE(m.find(expected), std::string::npos) << text << " -> " << m;
    EXPECT_THROW(read_tolerances(path("t.txt")), InvalidArgument) << text;
  }
  EXPECT_THROW(read_tolerances(path("none.txt")), InvalidArgument);
}

TEST_F(Verify, FieldsInOneFileOnlyAndShapeMismatches) {
  SavepointWriter a("s"), b("s");
  a.add_field("vn", iota_values(12), {"cell", "k"}, {4, 3})
      .add_field("only_a", iota_values(2), {"two"}, {2})
      .add_field("edges", iota_values(12), {"edge", "k"}, {4, 3});
  b.add_field("vn", iota_values(15), {"cell", "k"}, {5, 3})
      .add_field("edges", iota_values(12), {"vertex", "k"}, {4, 3})
      .add_field("only_b", iota_values(1), {"one"}, {1});
  a.write(path("a.nc"));
  b.write(path("b.nc"));
  const auto c = verify_savepoints(SavepointFile(path("a.nc")), SavepointFile(path("b.nc")), {});
  EXPECT_FALSE(c.pass);
  ASSERT_EQ(c.fields.size(), 4u);
  EXPECT_EQ(c.fields[3].name, "only_b");  // A's fields first, then B's others
  EXPECT_EQ(find(c, "vn").status, FieldStatus::shape_mismatch);
  EXPECT_EQ(find(c, "vn").problem(), "shape (cell=4, k=3) in A, (cell=5, k=3) in B");
  EXPECT_EQ(find(c, "edges").status, FieldStatus::shape_mismatch);  // same lengths, other dims
  EXPECT_EQ(find(c, "edges").problem(), "shape (edge=4, k=3) in A, (vertex=4, k=3) in B");
  EXPECT_EQ(find(c, "only_a").status, FieldStatus::only_in_a);
  EXPECT_EQ(find(c, "only_a").problem(), "only in A");
  EXPECT_EQ(find(c, "only_b").status, FieldStatus::only_in_b);
  EXPECT_EQ(find(c, "only_b").shape, (std::vector<std::size_t>{1}));
  for (const auto& f : c.fields) EXPECT_FALSE(f.pass) << f.name;
}

TEST_F(Verify, NanFailsWhateverTheTolerance) {
  write_reference();
  auto vn = iota_values(12);
  vn[1 * 3 + 2] = std::numeric_limits<double>::quiet_NaN();
  vn[3 * 3 + 0] += 100;  // a larger finite error elsewhere does not hide the NaN
  SavepointWriter a("call-diffusion-exit");
  a.set("date", "2021-06-20T12:00:20.000");
  a.add_field("vn", vn, {"cell", "k"}, {4, 3});
  a.add_field("w", std::vector<double>{0, 0, std::numeric_limits<double>::infinity(), 0}, {"cell"},
              {4});
  a.write(path("a.nc"));
  Tolerances loose;
  loose.global = {1e300, 1e300};
  const auto c = verify_savepoints(SavepointFile(path("a.nc")), SavepointFile(path("b.nc")), loose);
  EXPECT_FALSE(c.pass);
  const auto& f = find(c, "vn");
  EXPECT_EQ(f.nonfinite_a, 1u);
  EXPECT_EQ(f.nonfinite_b, 0u);
  EXPECT_TRUE(std::isnan(f.max_abs));
  EXPECT_EQ(f.worst_index, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(f.failing, 1u);
  EXPECT_EQ(f.furthest_index, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(f.problem(),
            "1 of 12 values outside tolerance, the furthest at (cell=1, k=2), 1 non-finite in A");
  EXPECT_EQ(find(c, "w").nonfinite_a, 1u);
  EXPECT_FALSE(find(c, "w").pass);
  // Metadata that differ are noted, not failed on.
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_EQ(c.notes[0],
            "metadata date: \"2021-06-20T12:00:20.000\" in A, \"2021-06-20T12:00:10.000\" in B");
  EXPECT_EQ(c.notes[1], "metadata linit only in B (false)");
  EXPECT_TRUE(to_json(c)["fields"][0]["max_abs"].is_null());
}
