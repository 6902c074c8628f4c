// Savepoints in the manner of Serialbox, stored as NetCDF-4: a writer of one savepoint per file
// (name, typed metadata, named fields), a reader, a directory convention, and the comparison of
// two savepoints field by field (`sciproxy verify`). Generic: any granule may write them.
//
// The file (docs/savepoints.md has the full description):
//   - global attributes: `savepoint` (its name), `savepoint_format` ("sciproxy-savepoint 1") and
//     one attribute per metadata entry: string (text), int (int64), double, bool (ubyte 0 or 1);
//   - one variable per field (float64, float32 or int32) over named dimensions, stored in the
//     order of its dimensions as NetCDF does (C order: the last dimension varies fastest).
//     Data handed over in Fortran (column-major) order are transposed on writing, so a field
//     with dimensions (cell, k) reads as (cell, k) whichever language wrote it; the variable
//     then carries the attribute `source_layout = "column_major"`, for the record;
//   - written under a temporary name in the target's directory and renamed when complete: a
//     failed write leaves no file (and an older file at the path untouched).
// A directory of savepoints names its files `<prefix>_<savepoint>_<n>.nc`, n = 0, 1, ... the
// occurrences of that savepoint (Serialbox's serializer prefix and savepoint names).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace sciproxy::savepoint {

// The order of a field's values in memory. row_major: C order, the last dimension varies
// fastest; column_major: Fortran order, the first dimension varies fastest.
enum class Layout { row_major, column_major };

// A metadata value: Serialbox's metadata types (bool, int, double, string).
using MetaValue = std::variant<bool, std::int64_t, double, std::string>;
using Metadata = std::map<std::string, MetaValue>;

std::string to_string(const MetaValue& value);  // true, 42, 10.5, "text" (quoted)

// A field as a file holds it.
struct FieldInfo {
  std::string name;
  std::string dtype;               // float64, float32, int32 (others only in foreign files)
  std::vector<std::string> dims;   // slowest first, as stored
  std::vector<std::size_t> shape;  // one length per dimension; empty: a scalar
  Layout source_layout = Layout::row_major;  // how the writer was handed the data
  std::size_t size() const;                  // number of values (1 for a scalar)
};

// "(cell=20, k=5)", "()" for a scalar.
std::string shape_text(const std::vector<std::string>& dims, const std::vector<std::size_t>& shape);

// One savepoint: fields and metadata gathered in memory, then written to one file.
class SavepointWriter {
 public:
  // name: the savepoint's name ("call-diffusion-init"): letters, digits, '_', '-', '.', '+'.
  explicit SavepointWriter(std::string name);

  const std::string& name() const { return name_; }

  // Metadata (linit, date, dtime, ...); a key set twice keeps the last value. Keys: a letter,
  // then letters, digits, '_', '-', '.'; `savepoint` and `savepoint_format` are reserved.
  SavepointWriter& set(const std::string& key, bool value);
  // Any integer type (int, std::size_t, ...); stored as int64 (InvalidArgument above its range).
  template <std::integral I>
  requires(!std::same_as<I, bool>) SavepointWriter& set(const std::string& key, I value) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t))
      if (value > static_cast<I>(std::numeric_limits<std::int64_t>::max()))
        return set_unsigned_out_of_range(key);
    set_value(key, static_cast<std::int64_t>(value));
    return *this;
  }
  SavepointWriter& set(const std::string& key, double value);
  SavepointWriter& set(const std::string& key, const std::string& value);
  SavepointWriter& set(const std::string& key, const char* value);  // not taken as a bool

  // A field: its values (copied), its dimensions' names and lengths, and the order of the values
  // in `data`. A dimension's length must agree across the fields that name it. InvalidArgument
  // on a bad name, a repeated field, a size that is not the product of the shape, or a
  // dimension whose length disagrees.
  SavepointWriter& add_field(const std::string& name, std::span<const double> data,
                             const std::vector<std::string>& dims,
                             const std::vector<std::size_t>& shape,
                             Layout layout = Layout::row_major);
  SavepointWriter& add_field(const std::string& name, std::span<const float> data,
                             const std::vector<std::string>& dims,
                             const std::vector<std::size_t>& shape,
                             Layout layout = Layout::row_major);
  SavepointWriter& add_field(const std::string& name, std::span<const std::int32_t> data,
                             const std::vector<std::string>& dims,
                             const std::vector<std::size_t>& shape,
                             Layout layout = Layout::row_major);

  // Writes the file atomically (IoError when it cannot; nothing is left behind then).
  void write(const std::string& path) const;

 private:
  struct Field {
    FieldInfo info;
    std::variant<std::vector<double>, std::vector<float>, std::vector<std::int32_t>> values;
  };
  template <class T>
  SavepointWriter& add(const std::string& name, std::span<const T> data,
                       const std::vector<std::string>& dims, const std::vector<std::size_t>& shape,
                       Layout layout, const char* dtype);
  void set_value(const std::string& key, MetaValue value);
  [[noreturn]] SavepointWriter& set_unsigned_out_of_range(const std::string& key);

  std::string name_;
  Metadata metadata_;
  std::vector<Field> fields_;  // in the order added
  std::map<std::string, std::size_t> dim_lengths_;
};

// A savepoint file opened for reading. Any NetCDF file reads: its numeric variables are its
// fields (the name is empty where the `savepoint` attribute is absent).
class SavepointFile {
 public:
  // InvalidArgument when the file is missing, a directory or not NetCDF; IoError when it
  // cannot be read.
  explicit SavepointFile(std::string path);

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  const Metadata& metadata() const { return metadata_; }
  const std::vector<FieldInfo>& fields() const { return fields_; }

  bool has_field(const std::string& name) const;
  const FieldInfo& field(const std::string& name) const;  // InvalidArgument naming it if absent

  // The values of a field as doubles, in the order asked (row_major: as the file stores them).
  std::vector<double> load(const std::string& name, Layout layout = Layout::row_major) const;
  // The same, checked against the shape the caller expects (InvalidArgument when it differs).
  std::vector<double> load(const std::string& name, const std::vector<std::size_t>& expected_shape,
                           Layout layout = Layout::row_major) const;

 private:
  std::string path_, name_;
  Metadata metadata_;
  std::vector<FieldInfo> fields_;
};

// --- A directory of savepoints: <dir>/<prefix>_<savepoint>_<n>.nc -----------------------------

std::string savepoint_path(const std::string& dir, const std::string& prefix,
                           const std::string& savepoint, int occurrence);

struct SavepointEntry {
  std::string path, savepoint;
  int occurrence = 0;
};

// The savepoint files of `prefix` in `dir` (of one savepoint when `savepoint` is not empty),
// sorted by savepoint name, then occurrence. InvalidArgument when dir is not a directory.
std::vector<SavepointEntry> list_savepoints(const std::string& dir, const std::string& prefix,
                                            const std::string& savepoint = "");

// Writes `writer` as the next occurrence of its savepoint in `dir` and returns the path. The
// next number comes from listing the directory: one writer per directory and prefix (an MPI
// rank's own prefix, as Serialbox gives each rank its own serializer).
std::string write_next(const SavepointWriter& writer, const std::string& dir,
                       const std::string& prefix);

// --- Comparison ---------------------------------------------------------------------------------

// numpy.allclose's test of a value a against its reference b: |a - b| <= atol + rtol * |b|.
struct FieldTolerance {
  double rtol = 1e-12;  // ICON4Py's savepoint tests
  double atol = 0;
};

struct Tolerances {
  FieldTolerance global;                         // for every field not listed below
  std::map<std::string, FieldTolerance> fields;  // per field
  std::string source;                            // the file they came from ("" for global)

  const FieldTolerance& of(const std::string& field) const;
};

// A tolerance file: one line per field, `name rtol atol`; `*` as the name sets the default of
// the fields not listed (else the global default); '#' starts a comment; blank lines are
// skipped. InvalidArgument naming the file and line when one is malformed, negative or repeated.
Tolerances read_tolerances(const std::string& path);

enum class FieldStatus { compared, only_in_a, only_in_b, shape_mismatch };

struct FieldComparison {
  std::string name;
  FieldStatus status = FieldStatus::compared;
  std::vector<std::string> dims;  // A's (B's when only in B)
  std::vector<std::size_t> shape;
  std::vector<std::string> dims_b;  // B's, when the shapes differ
  std::vector<std::size_t> shape_b;
  FieldTolerance tolerance;
  double max_abs = 0;                    // max |a - b| (NaN when a NaN is present)
  double max_rel = 0;                    // max |a - b| / |b| over b != 0
  double rel_l2 = 0;                     // ||a - b|| / ||b|| (||a - b|| when ||b|| = 0)
  std::vector<std::size_t> worst_index;  // where |a - b| is largest (a NaN first), per dimension
  std::size_t failing = 0;               // values outside the tolerance (non-finite ones included)
  // The value furthest outside the tolerance: the largest |a - b| / (atol + rtol |b|), a
  // non-finite one first. Empty when every value passes. Not always the worst absolute error:
  // a small value of B tolerates less.
  std::vector<std::size_t> furthest_index;
  std::size_t nonfinite_a = 0, nonfinite_b = 0;
  bool pass = false;

  std::string problem() const;  // why it failed in words ("" when it passed)
};

struct SavepointComparison {
  std::string path_a, path_b, savepoint_a, savepoint_b;
  std::vector<FieldComparison> fields;  // A's fields in order, then those only in B
  std::vector<std::string> notes;  // differences that are not failures: names, metadata, dtypes
  bool pass = false;
};

// Compares the savepoint in `a` (the result) with the one in `b` (the reference), field by field.
// A field present in one file only, or with other dimensions or shape, fails; so does any
// non-finite value. InvalidArgument when the tolerances name a field neither file has.
SavepointComparison verify_savepoints(const SavepointFile& a, const SavepointFile& b,
                                      const Tolerances& tolerances);

}  // namespace sciproxy::savepoint
