// Savepoints as NetCDF-4 files (netCDF-C): the writer (atomic: a temporary file renamed when
// complete), the reader, the directory convention and the field-by-field comparison behind
// `sciproxy verify`. The format is described in include/sciproxy/core/savepoint.hpp and
// docs/savepoints.md.
#include "sciproxy/core/savepoint.hpp"

#include <fmt/format.h>
#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/json.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::savepoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kNameAttribute = "savepoint";
constexpr const char* kFormatAttribute = "savepoint_format";
constexpr const char* kFormat = "sciproxy-savepoint 1";
constexpr const char* kLayoutAttribute = "source_layout";

// NetCDF names and file-name parts kept to a portable set: a letter first (NetCDF reserves a
// leading underscore), then letters, digits, '_', '-' and '.'.
bool is_netcdf_name(const std::string& s) {
  if (s.empty() || s.size() >= NC_MAX_NAME || !std::isalpha(static_cast<unsigned char>(s[0])))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// A savepoint name or a prefix becomes part of a file name: no '/', no leading '.'.
bool is_file_part(const std::string& s) {
  if (s.empty() || s.size() > 200 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == '+';
  });
}

std::string join(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

std::string shape_only(const std::vector<std::size_t>& shape) {
  std::vector<std::string> parts;
  for (auto n : shape) parts.push_back(std::to_string(n));
  return "(" + join(parts) + ")";
}

// The values of `in` (its shape given slowest first) moved between the two orders: from
// column-major to row-major when `to_row_major`, else the reverse.
template <class T>
std::vector<T> reorder(std::span<const T> in, const std::vector<std::size_t>& shape,
                       bool to_row_major) {
  std::vector<T> out(in.size());
  if (shape.size() < 2) {
    std::copy(in.begin(), in.end(), out.begin());
    return out;
  }
  const std::size_t d = shape.size();
  std::vector<std::size_t> column_stride(d, 1);  // Fortran order: the first dimension fastest
  for (std::size_t j = 1; j < d; ++j) column_stride[j] = column_stride[j - 1] * shape[j - 1];
  std::vector<std::size_t> index(d, 0);
  std::size_t column = 0;
  for (std::size_t row = 0; row < in.size(); ++row) {  // row-major walk, the last dim fastest
    if (to_row_major)
      out[row] = in[column];
    else
      out[column] = in[row];
    for (std::size_t j = d; j-- > 0;) {
      column += column_stride[j];
      if (++index[j] < shape[j]) break;
      column -= column_stride[j] * shape[j];
      index[j] = 0;
    }
  }
  return out;
}

std::vector<std::size_t> unravel(std::size_t flat, const std::vector<std::size_t>& shape) {
  std::vector<std::size_t> index(shape.size(), 0);
  for (std::size_t j = shape.size(); j-- > 0;) {
    index[j] = flat % shape[j];
    flat /= shape[j];
  }
  return index;
}

std::string nc_message(int status) {
  return nc_strerror(status);
}

// A NetCDF-4 file created under a temporary name beside `path` and renamed onto it by commit();
// destroyed before that (an error), it closes and removes the temporary.
class AtomicNetcdfFile {
 public:
  explicit AtomicNetcdfFile(const std::string& path) : path_(path) {
    if (path.empty()) throw_invalid_argument("savepoint file", "a file name", "an empty string");
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (fs::is_directory(target, ec))
      throw_invalid_argument("savepoint file", "a file name",
                             fmt::format("'{}', which is a directory", path));
    if (!fs::is_directory(dir, ec))
      throw IoError(fmt::format("savepoint: cannot write '{}': the directory '{}' does not exist",
                                path, dir.string()));
    static std::atomic<unsigned> counter{0};
    tmp_ = dir / fmt::format(".{}.tmp{}.{}", target.filename().string(), getpid(), counter++);
    const int status = nc_create(tmp_.c_str(), NC_NETCDF4 | NC_CLOBBER, &ncid_);
    if (status != NC_NOERR) {
      ncid_ = -1;
      fs::remove(tmp_, ec);
      throw IoError(fmt::format(
          "savepoint: cannot write '{}': {}", path,
          access(dir.c_str(), W_OK) != 0
              ? fmt::format("the directory '{}' is not writable", dir.string())
              : "could not create a file in '" + dir.string() + "': " + nc_message(status)));
    }
  }
  ~AtomicNetcdfFile() {
    if (ncid_ >= 0) nc_close(ncid_);
    if (!committed_) {
      std::error_code ec;
      fs::remove(tmp_, ec);
    }
  }
  AtomicNetcdfFile(const AtomicNetcdfFile&) = delete;
  AtomicNetcdfFile& operator=(const AtomicNetcdfFile&) = delete;

  int id() const { return ncid_; }

  void check(int status, std::string_view doing) const {
    if (status != NC_NOERR)
      throw IoError(fmt::format("savepoint: could not write '{}' ({}): {}", path_, doing,
                                nc_message(status)));
  }

  void commit() {
    const int status = nc_close(ncid_);
    ncid_ = -1;
    check(status, "closing it");
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec)
      throw IoError(fmt::format("savepoint: could not write '{}' (renaming the temporary file: {})",
                                path_, ec.message()));
    committed_ = true;
  }

 private:
  std::string path_;
  fs::path tmp_;
  int ncid_ = -1;
  bool committed_ = false;
};

// A NetCDF file open for reading, closed on scope exit.
class NetcdfReader {
 public:
  explicit NetcdfReader(const std::string& path) : path_(path) {
    if (path.empty())
      throw_invalid_argument("savepoint file", "a NetCDF file name", "an empty string");
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw_invalid_argument("savepoint file", "an existing NetCDF file",
                             fmt::format("'{}' (no such file)", path));
    if (fs::is_directory(path, ec))
      throw_invalid_argument("savepoint file", "a NetCDF file",
                             fmt::format("'{}', which is a directory", path));
    const int status = nc_open(path.c_str(), NC_NOWRITE, &ncid_);
    if (status != NC_NOERR) {
      ncid_ = -1;
      if (access(path.c_str(), R_OK) != 0)
        throw IoError(fmt::format("savepoint: could not read '{}' (permission denied)", path));
      throw_invalid_argument("savepoint file", "a NetCDF file",
                             fmt::format("'{}', which is not one ({})", path, nc_message(status)));
    }
  }
  ~NetcdfReader() {
    if (ncid_ >= 0) nc_close(ncid_);
  }
  NetcdfReader(const NetcdfReader&) = delete;
  NetcdfReader& operator=(const NetcdfReader&) = delete;

  int id() const { return ncid_; }

  void check(int status, std::string_view doing) const {
    if (status != NC_NOERR)
      throw IoError(
          fmt::format("savepoint: could not read '{}' ({}): {}", path_, doing, nc_message(status)));
  }

  // A text attribute (NC_CHAR or NC_STRING) of `varid`, or nothing when absent or not text.
  std::optional<std::string> text_attribute(int varid, const char* name) const {
    nc_type type = NC_NAT;
    std::size_t length = 0;
    if (nc_inq_att(ncid_, varid, name, &type, &length) != NC_NOERR) return std::nullopt;
    if (type == NC_CHAR) {
      std::string text(length, '\0');
      if (length > 0) check(nc_get_att_text(ncid_, varid, name, text.data()), name);
      while (!text.empty() && text.back() == '\0') text.pop_back();
      return text;
    }
    if (type == NC_STRING && length == 1) {
      char* value = nullptr;
      check(nc_get_att_string(ncid_, varid, name, &value), name);
      std::string text = value ? value : "";
      nc_free_string(1, &value);
      return text;
    }
    return std::nullopt;
  }

 private:
  std::string path_;
  int ncid_ = -1;
};

const char* dtype_name(nc_type type) {
  switch (type) {
    case NC_DOUBLE:
      return "float64";
    case NC_FLOAT:
      return "float32";
    case NC_INT:
      return "int32";
    case NC_UINT:
      return "uint32";
    case NC_SHORT:
      return "int16";
    case NC_USHORT:
      return "uint16";
    case NC_BYTE:
      return "int8";
    case NC_UBYTE:
      return "uint8";
    case NC_INT64:
      return "int64";
    case NC_UINT64:
      return "uint64";
    default:
      return nullptr;  // text and user-defined types are not fields
  }
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& n : names) q.push_back("'" + n + "'");
  return join(q);
}

}  // namespace

// --- Values and shapes -------------------------------------------------------------------------

std::string to_string(const MetaValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>)
          return v ? "true" : "false";
        else if constexpr (std::is_same_v<V, std::string>)
          return "\"" + v + "\"";
        else
          return fmt::format("{}", v);
      },
      value);
}

std::size_t FieldInfo::size() const {
  std::size_t n = 1;
  for (auto length : shape) n *= length;
  return n;
}

std::string shape_text(const std::vector<std::string>& dims,
                       const std::vector<std::size_t>& shape) {
  std::vector<std::string> parts;
  for (std::size_t j = 0; j < shape.size(); ++j)
    parts.push_back(fmt::format("{}={}", j < dims.size() ? dims[j] : "?", shape[j]));
  return "(" + join(parts) + ")";
}

// --- Writer --------------------------------------------------------------------------------------

SavepointWriter::SavepointWriter(std::string name) : name_(std::move(name)) {
  if (!is_file_part(name_))
    throw_invalid_argument("savepoint name",
                           "letters, digits, '_', '-', '.' or '+' (not starting with '.')",
                           fmt::format("\"{}\"", name_));
}

void SavepointWriter::set_value(const std::string& key, MetaValue value) {
  if (!is_netcdf_name(key))
    throw_invalid_argument("metadata key", "a letter, then letters, digits, '_', '-' or '.'",
                           fmt::format("\"{}\"", key));
  if (key == kNameAttribute || key == kFormatAttribute)
    throw_invalid_argument("metadata key", "a name other than 'savepoint' and 'savepoint_format'",
                           fmt::format("\"{}\"", key));
  metadata_[key] = std::move(value);
}

SavepointWriter& SavepointWriter::set(const std::string& key, bool value) {
  set_value(key, value);
  return *this;
}
SavepointWriter& SavepointWriter::set_unsigned_out_of_range(const std::string& key) {
  throw_invalid_argument(fmt::format("metadata {}", key), "an integer of at most 2^63 - 1",
                         "a larger one");
}
SavepointWriter& SavepointWriter::set(const std::string& key, double value) {
  set_value(key, value);
  return *this;
}
SavepointWriter& SavepointWriter::set(const std::string& key, const std::string& value) {
  set_value(key, value);
  return *this;
}
SavepointWriter& SavepointWriter::set(const std::string& key, const char* value) {
  set_value(key, std::string(value ? value : ""));
  return *this;
}

template <class T>
SavepointWriter& SavepointWriter::add(const std::string& name, std::span<const T> data,
                                      const std::vector<std::string>& dims,
                                      const std::vector<std::size_t>& shape, Layout layout,
                                      const char* dtype) {
  const std::string what = fmt::format("field '{}'", name);
  if (!is_netcdf_name(name))
    throw_invalid_argument("field name", "a letter, then letters, digits, '_', '-' or '.'",
                           fmt::format("\"{}\"", name));
  for (const auto& f : fields_)
    if (f.info.name == name)
      throw_invalid_argument(what, "a field name not used before in this savepoint",
                             "a repeated name");
  if (dim_lengths_.count(name))
    throw_invalid_argument(what, "a name other than a dimension's", fmt::format("'{}'", name));
  if (dims.size() != shape.size())
    throw_invalid_argument(what, fmt::format("one dimension name per length ({})", shape.size()),
                           fmt::format("{} names", dims.size()));
  std::size_t count = 1;
  for (std::size_t j = 0; j < dims.size(); ++j) {
    const std::string& dim = dims[j];
    if (!is_netcdf_name(dim))
      throw_invalid_argument(what + " dimension", "a letter, then letters, digits, '_', '-' or '.'",
                             fmt::format("\"{}\"", dim));
    if (std::count(dims.begin(), dims.end(), dim) > 1)
      throw_invalid_argument(what, "distinct dimension names", fmt::format("'{}' twice", dim));
    for (const auto& f : fields_)
      if (f.info.name == dim)
        throw_invalid_argument(what + " dimension", "a name other than a field's",
                               fmt::format("'{}'", dim));
    // A NetCDF dimension of length 0 would be an unlimited one.
    if (shape[j] == 0)
      throw_invalid_argument(fmt::format("{} dimension '{}'", what, dim), "a length of at least 1",
                             "0");
    if (auto known = dim_lengths_.find(dim);
        known != dim_lengths_.end() && known->second != shape[j])
      throw_invalid_argument(
          fmt::format("{} dimension '{}'", what, dim),
          fmt::format("the length the savepoint's other fields give it ({})", known->second),
          std::to_string(shape[j]));
    if (count > std::numeric_limits<std::size_t>::max() / shape[j])
      throw_invalid_argument(what, "a shape whose size fits in memory", shape_only(shape));
    count *= shape[j];
  }
  if (data.size() != count)
    throw_invalid_argument(what,
                           fmt::format("{} values for shape {}", count, shape_text(dims, shape)),
                           std::to_string(data.size()));

  Field field;
  field.info = FieldInfo{name, dtype, dims, shape, layout};
  // The file always holds C order over the dimensions as named (see the header).
  field.values = layout == Layout::column_major ? reorder(data, shape, true)
                                                : std::vector<T>(data.begin(), data.end());
  for (std::size_t j = 0; j < dims.size(); ++j) dim_lengths_[dims[j]] = shape[j];
  fields_.push_back(std::move(field));
  return *this;
}

SavepointWriter& SavepointWriter::add_field(const std::string& name, std::span<const double> data,
                                            const std::vector<std::string>& dims,
                                            const std::vector<std::size_t>& shape, Layout layout) {
  return add(name, data, dims, shape, layout, "float64");
}
SavepointWriter& SavepointWriter::add_field(const std::string& name, std::span<const float> data,
                                            const std::vector<std::string>& dims,
                                            const std::vector<std::size_t>& shape, Layout layout) {
  return add(name, data, dims, shape, layout, "float32");
}
SavepointWriter& SavepointWriter::add_field(const std::string& name,
                                            std::span<const std::int32_t> data,
                                            const std::vector<std::string>& dims,
                                            const std::vector<std::size_t>& shape, Layout layout) {
  return add(name, data, dims, shape, layout, "int32");
}

void SavepointWriter::write(const std::string& path) const {
  AtomicNetcdfFile file(path);
  const int nc = file.id();
  auto put_text = [&](int varid, const std::string& key, const std::string& text) {
    file.check(nc_put_att_text(nc, varid, key.c_str(), text.size(), text.c_str()),
               fmt::format("attribute {}", key));
  };
  put_text(NC_GLOBAL, kNameAttribute, name_);
  put_text(NC_GLOBAL, kFormatAttribute, kFormat);
  for (const auto& [key, value] : metadata_) {
    const std::string doing = fmt::format("metadata {}", key);
    if (const auto* b = std::get_if<bool>(&value)) {
      const unsigned char byte = *b ? 1 : 0;
      file.check(nc_put_att_uchar(nc, NC_GLOBAL, key.c_str(), NC_UBYTE, 1, &byte), doing);
    } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
      const long long v = *i;
      file.check(nc_put_att_longlong(nc, NC_GLOBAL, key.c_str(), NC_INT64, 1, &v), doing);
    } else if (const auto* d = std::get_if<double>(&value)) {
      file.check(nc_put_att_double(nc, NC_GLOBAL, key.c_str(), NC_DOUBLE, 1, d), doing);
    } else {
      put_text(NC_GLOBAL, key, std::get<std::string>(value));
    }
  }

  std::map<std::string, int> dim_ids;
  for (const auto& [dim, length] : dim_lengths_) {
    int id = 0;
    file.check(nc_def_dim(nc, dim.c_str(), length, &id), fmt::format("dimension {}", dim));
    dim_ids[dim] = id;
  }
  std::vector<int> var_ids;
  for (const auto& field : fields_) {
    std::vector<int> ids;
    for (const auto& dim : field.info.dims) ids.push_back(dim_ids.at(dim));
    const nc_type type = std::holds_alternative<std::vector<double>>(field.values)  ? NC_DOUBLE
                         : std::holds_alternative<std::vector<float>>(field.values) ? NC_FLOAT
                                                                                    : NC_INT;
    int varid = 0;
    file.check(nc_def_var(nc, field.info.name.c_str(), type, static_cast<int>(ids.size()),
                          ids.data(), &varid),
               fmt::format("field {}", field.info.name));
    if (field.info.source_layout == Layout::column_major)
      put_text(varid, kLayoutAttribute, "column_major");
    var_ids.push_back(varid);
  }
  file.check(nc_enddef(nc), "ending its definitions");
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    const std::string doing = fmt::format("the values of {}", fields_[f].info.name);
    std::visit(
        [&](const auto& values) {
          using V = typename std::decay_t<decltype(values)>::value_type;
          if constexpr (std::is_same_v<V, double>)
            file.check(nc_put_var_double(nc, var_ids[f], values.data()), doing);
          else if constexpr (std::is_same_v<V, float>)
            file.check(nc_put_var_float(nc, var_ids[f], values.data()), doing);
          else
            file.check(nc_put_var_int(nc, var_ids[f], values.data()), doing);
        },
        fields_[f].values);
  }
  file.commit();
}

// --- Reader --------------------------------------------------------------------------------------

SavepointFile::SavepointFile(std::string path) : path_(std::move(path)) {
  NetcdfReader file(path_);
  const int nc = file.id();
  int ndims = 0, nvars = 0, natts = 0, unlimited = 0;
  file.check(nc_inq(nc, &ndims, &nvars, &natts, &unlimited), "its header");

  for (int a = 0; a < natts; ++a) {
    char name[NC_MAX_NAME + 1] = {};
    file.check(nc_inq_attname(nc, NC_GLOBAL, a, name), "a global attribute");
    nc_type type = NC_NAT;
    std::size_t length = 0;
    file.check(nc_inq_att(nc, NC_GLOBAL, name, &type, &length), name);
    const std::string key = name;
    if (key == kFormatAttribute) continue;
    if (key == kNameAttribute) {
      name_ = file.text_attribute(NC_GLOBAL, name).value_or("");
      continue;
    }
    // Metadata are single values; attributes holding several (foreign files) are left out.
    if (type == NC_CHAR || type == NC_STRING) {
      if (auto text = file.text_attribute(NC_GLOBAL, name)) metadata_[key] = *text;
    } else if (length != 1) {
      continue;
    } else if (type == NC_UBYTE) {
      unsigned char v = 0;
      file.check(nc_get_att_uchar(nc, NC_GLOBAL, name, &v), name);
      metadata_[key] = v != 0;
    } else if (type == NC_FLOAT || type == NC_DOUBLE) {
      double v = 0;
      file.check(nc_get_att_double(nc, NC_GLOBAL, name, &v), name);
      metadata_[key] = v;
    } else if (dtype_name(type)) {
      long long v = 0;
      file.check(nc_get_att_longlong(nc, NC_GLOBAL, name, &v), name);
      metadata_[key] = static_cast<std::int64_t>(v);
    }
  }

  for (int v = 0; v < nvars; ++v) {
    char name[NC_MAX_NAME + 1] = {};
    nc_type type = NC_NAT;
    int nd = 0;
    file.check(nc_inq_varndims(nc, v, &nd), "a variable");
    std::vector<int> dimids(static_cast<std::size_t>(nd));
    file.check(nc_inq_var(nc, v, name, &type, &nd, dimids.data(), nullptr), "a variable");
    const char* dtype = dtype_name(type);
    if (!dtype) continue;
    FieldInfo info;
    info.name = name;
    info.dtype = dtype;
    for (int id : dimids) {
      char dim[NC_MAX_NAME + 1] = {};
      std::size_t length = 0;
      file.check(nc_inq_dim(nc, id, dim, &length), fmt::format("the dimensions of {}", name));
      info.dims.emplace_back(dim);
      info.shape.push_back(length);
    }
    if (file.text_attribute(v, kLayoutAttribute).value_or("") == "column_major")
      info.source_layout = Layout::column_major;
    fields_.push_back(std::move(info));
  }
}

bool SavepointFile::has_field(const std::string& name) const {
  return std::any_of(fields_.begin(), fields_.end(),
                     [&](const FieldInfo& f) { return f.name == name; });
}

const FieldInfo& SavepointFile::field(const std::string& name) const {
  for (const auto& f : fields_)
    if (f.name == name) return f;
  std::vector<std::string> names;
  for (const auto& f : fields_) names.push_back(f.name);
  throw_invalid_argument(
      "field",
      fmt::format("a field of '{}' ({})", path_, names.empty() ? "it has none" : join(names)),
      fmt::format("'{}'", name));
}

std::vector<double> SavepointFile::load(const std::string& name, Layout layout) const {
  const FieldInfo& info = field(name);
  NetcdfReader file(path_);
  int varid = 0;
  file.check(nc_inq_varid(file.id(), name.c_str(), &varid), fmt::format("field {}", name));
  std::vector<double> values(info.size());
  file.check(nc_get_var_double(file.id(), varid, values.data()),
             fmt::format("the values of {}", name));
  if (layout == Layout::column_major && info.shape.size() > 1)
    return reorder(std::span<const double>(values), info.shape, false);
  return values;
}

std::vector<double> SavepointFile::load(const std::string& name,
                                        const std::vector<std::size_t>& expected_shape,
                                        Layout layout) const {
  const FieldInfo& info = field(name);
  if (info.shape != expected_shape)
    throw_invalid_argument(fmt::format("field '{}' of '{}'", name, path_),
                           fmt::format("shape {}", shape_only(expected_shape)),
                           shape_text(info.dims, info.shape));
  return load(name, layout);
}

// --- Directory convention ------------------------------------------------------------------------

std::string savepoint_path(const std::string& dir, const std::string& prefix,
                           const std::string& savepoint, int occurrence) {
  if (!is_file_part(prefix))
    throw_invalid_argument("savepoint prefix",
                           "letters, digits, '_', '-', '.' or '+' (not starting with '.')",
                           fmt::format("\"{}\"", prefix));
  if (!is_file_part(savepoint))
    throw_invalid_argument("savepoint name",
                           "letters, digits, '_', '-', '.' or '+' (not starting with '.')",
                           fmt::format("\"{}\"", savepoint));
  if (occurrence < 0)
    throw_invalid_argument("savepoint occurrence", "0 or more", std::to_string(occurrence));
  return (fs::path(dir) / fmt::format("{}_{}_{}.nc", prefix, savepoint, occurrence)).string();
}

std::vector<SavepointEntry> list_savepoints(const std::string& dir, const std::string& prefix,
                                            const std::string& savepoint) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw_invalid_argument("savepoint directory", "an existing directory",
                           fmt::format("'{}'", dir));
  const std::string head = prefix + "_";
  std::vector<SavepointEntry> entries;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    // <prefix>_<savepoint>_<n>.nc; the savepoint's name may itself hold '_': n follows the last.
    if (file.size() <= head.size() + 3 || file.compare(0, head.size(), head) != 0 ||
        file.compare(file.size() - 3, 3, ".nc") != 0)
      continue;
    const std::string middle = file.substr(head.size(), file.size() - head.size() - 3);
    const auto last = middle.rfind('_');
    if (last == std::string::npos || last == 0 || last + 1 == middle.size()) continue;
    const std::string digits = middle.substr(last + 1);
    if (digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    SavepointEntry e{entry.path().string(), middle.substr(0, last), std::stoi(digits)};
    if (savepoint.empty() || e.savepoint == savepoint) entries.push_back(std::move(e));
  }
  if (ec)
    throw IoError(
        fmt::format("savepoint: could not list the directory '{}': {}", dir, ec.message()));
  std::sort(entries.begin(), entries.end(), [](const auto& x, const auto& y) {
    return std::tie(x.savepoint, x.occurrence) < std::tie(y.savepoint, y.occurrence);
  });
  return entries;
}

std::string write_next(const SavepointWriter& writer, const std::string& dir,
                       const std::string& prefix) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw_invalid_argument("savepoint directory", "an existing directory",
                           fmt::format("'{}'", dir));
  int occurrence = 0;
  for (const auto& e : list_savepoints(dir, prefix, writer.name()))
    occurrence = std::max(occurrence, e.occurrence + 1);
  const std::string path = savepoint_path(dir, prefix, writer.name(), occurrence);
  writer.write(path);
  return path;
}

// --- Tolerances ----------------------------------------------------------------------------------

const FieldTolerance& Tolerances::of(const std::string& field) const {
  const auto it = fields.find(field);
  return it != fields.end() ? it->second : global;
}

Tolerances read_tolerances(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw_invalid_argument("tolerance file", "an existing file",
                           fmt::format("'{}' (no such file)", path));
  if (fs::is_directory(path, ec))
    throw_invalid_argument("tolerance file", "a file",
                           fmt::format("'{}', which is a directory", path));
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("tolerance file: could not read '{}'", path));
  Tolerances t;
  t.source = path;
  bool default_seen = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    const std::string where = fmt::format("tolerance file '{}' line {}", path, number);
    if (w.size() != 3)
      throw_invalid_argument(where, "'FIELD RTOL ATOL' (or '* RTOL ATOL')",
                             fmt::format("\"{}\"", join(w, " ")));
    auto number_of = [&](const std::string& text, const char* what) {
      char* end = nullptr;
      errno = 0;
      const double x = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(x) || x < 0)
        throw_invalid_argument(where, fmt::format("a finite {} of 0 or more", what),
                               fmt::format("\"{}\"", text));
      return x;
    };
    const FieldTolerance tol{number_of(w[1], "rtol"), number_of(w[2], "atol")};
    if (w[0] == "*") {
      if (default_seen) throw_invalid_argument(where, "one '*' line", "a second one");
      default_seen = true;
      t.global = tol;
    } else if (!t.fields.emplace(w[0], tol).second) {
      throw_invalid_argument(where, "each field once", fmt::format("'{}' again", w[0]));
    }
  }
  return t;
}

// --- Comparison ----------------------------------------------------------------------------------

std::string FieldComparison::problem() const {
  switch (status) {
    case FieldStatus::only_in_a:
      return "only in A";
    case FieldStatus::only_in_b:
      return "only in B";
    case FieldStatus::shape_mismatch:
      return fmt::format("shape {} in A, {} in B", shape_text(dims, shape),
                         shape_text(dims_b, shape_b));
    case FieldStatus::compared:
      break;
  }
  if (pass) return "";
  std::size_t count = 1;
  for (auto n : shape) count *= n;
  std::vector<std::string> parts{fmt::format("{} of {} values outside tolerance", failing, count)};
  if (!furthest_index.empty())
    parts.back() += fmt::format(", the furthest at {}", shape_text(dims, furthest_index));
  if (nonfinite_a) parts.push_back(fmt::format("{} non-finite in A", nonfinite_a));
  if (nonfinite_b) parts.push_back(fmt::format("{} non-finite in B", nonfinite_b));
  return join(parts);
}

namespace {

void compare_values(FieldComparison& c, const std::vector<double>& a,
                    const std::vector<double>& b) {
  const double rtol = c.tolerance.rtol, atol = c.tolerance.atol;
  double diff2 = 0, ref2 = 0;
  std::size_t worst = 0, furthest = 0;
  double furthest_excess = 0;
  bool furthest_nonfinite = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool finite_a = std::isfinite(a[i]), finite_b = std::isfinite(b[i]);
    if (!finite_a) ++c.nonfinite_a;
    if (!finite_b) ++c.nonfinite_b;
    const double d = std::abs(a[i] - b[i]);
    // A NaN difference is the worst of all and stays so (the first one found).
    const bool worse =
        std::isnan(d) ? !std::isnan(c.max_abs) : (!std::isnan(c.max_abs) && d > c.max_abs);
    if (worse) {
      c.max_abs = d;
      worst = i;
    }
    if (b[i] != 0 && std::isfinite(d)) c.max_rel = std::max(c.max_rel, d / std::abs(b[i]));
    const double allowed = atol + rtol * std::abs(b[i]);
    if (!(finite_a && finite_b && d <= allowed)) {
      // How far outside: a non-finite value first, then the excess over what is allowed
      // (infinite where nothing may differ); the first of equals is kept.
      const bool nonfinite = !(finite_a && finite_b);
      const double excess =
          !nonfinite && allowed > 0 ? d / allowed : std::numeric_limits<double>::infinity();
      if (c.failing == 0 || (nonfinite && !furthest_nonfinite) ||
          (nonfinite == furthest_nonfinite && excess > furthest_excess)) {
        furthest_excess = excess;
        furthest_nonfinite = nonfinite;
        furthest = i;
      }
      ++c.failing;
    }
    diff2 += d * d;
    ref2 += b[i] * b[i];
  }
  const double ref_norm = std::sqrt(ref2);
  c.rel_l2 = ref_norm > 0 ? std::sqrt(diff2) / ref_norm : std::sqrt(diff2);
  if (!a.empty()) c.worst_index = unravel(worst, c.shape);  // a foreign file's empty field: none
  if (c.failing > 0) c.furthest_index = unravel(furthest, c.shape);
  c.pass = c.failing == 0;
}

}  // namespace

SavepointComparison verify_savepoints(const SavepointFile& a, const SavepointFile& b,
                                      const Tolerances& tolerances) {
  std::vector<std::string> unknown;
  for (const auto& [name, tol] : tolerances.fields)
    if (!a.has_field(name) && !b.has_field(name)) unknown.push_back(name);
  if (!unknown.empty())
    throw InvalidArgument(fmt::format("{}: names fields neither savepoint has: {}",
                                      tolerances.source.empty()
                                          ? std::string("tolerances")
                                          : fmt::format("tolerance file '{}'", tolerances.source),
                                      quoted_list(unknown)));

  SavepointComparison result;
  result.path_a = a.path();
  result.path_b = b.path();
  result.savepoint_a = a.name();
  result.savepoint_b = b.name();
  if (a.name() != b.name())
    result.notes.push_back(
        fmt::format("the savepoints differ: \"{}\" in A, \"{}\" in B", a.name(), b.name()));
  std::set<std::string> keys;
  for (const auto& [k, v] : a.metadata()) keys.insert(k);
  for (const auto& [k, v] : b.metadata()) keys.insert(k);
  for (const auto& k : keys) {
    const auto ia = a.metadata().find(k), ib = b.metadata().find(k);
    if (ia == a.metadata().end())
      result.notes.push_back(fmt::format("metadata {} only in B ({})", k, to_string(ib->second)));
    else if (ib == b.metadata().end())
      result.notes.push_back(fmt::format("metadata {} only in A ({})", k, to_string(ia->second)));
    else if (ia->second != ib->second)
      result.notes.push_back(fmt::format("metadata {}: {} in A, {} in B", k, to_string(ia->second),
                                         to_string(ib->second)));
  }

  for (const auto& fa : a.fields()) {
    FieldComparison c;
    c.name = fa.name;
    c.dims = fa.dims;
    c.shape = fa.shape;
    c.tolerance = tolerances.of(fa.name);
    if (!b.has_field(fa.name)) {
      c.status = FieldStatus::only_in_a;
    } else if (const FieldInfo& fb = b.field(fa.name); fb.dims != fa.dims || fb.shape != fa.shape) {
      c.status = FieldStatus::shape_mismatch;
      c.dims_b = fb.dims;
      c.shape_b = fb.shape;
    } else {
      if (fa.dtype != b.field(fa.name).dtype)
        result.notes.push_back(
            fmt::format("field {}: {} in A, {} in B", fa.name, fa.dtype, b.field(fa.name).dtype));
      compare_values(c, a.load(fa.name), b.load(fa.name));
    }
    result.fields.push_back(std::move(c));
  }
  for (const auto& fb : b.fields()) {
    if (a.has_field(fb.name)) continue;
    FieldComparison c;
    c.name = fb.name;
    c.status = FieldStatus::only_in_b;
    c.dims = fb.dims;
    c.shape = fb.shape;
    c.tolerance = tolerances.of(fb.name);
    result.fields.push_back(std::move(c));
  }
  result.pass = std::all_of(result.fields.begin(), result.fields.end(),
                            [](const FieldComparison& c) { return c.pass; });
  return result;
}

}  // namespace sciproxy::savepoint

namespace sciproxy {

namespace {
nlohmann::json number_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json to_json(const savepoint::Metadata& metadata) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : metadata) std::visit([&](const auto& v) { j[key] = v; }, value);
  return j;
}

nlohmann::json to_json(const savepoint::SavepointComparison& comparison) {
  using savepoint::FieldStatus;
  nlohmann::json fields = nlohmann::json::array();
  std::size_t failed = 0;
  for (const auto& c : comparison.fields) {
    if (!c.pass) ++failed;
    nlohmann::json f = {{"name", c.name},
                        {"status", c.status == FieldStatus::compared    ? "compared"
                                   : c.status == FieldStatus::only_in_a ? "only_in_a"
                                   : c.status == FieldStatus::only_in_b ? "only_in_b"
                                                                        : "shape_mismatch"},
                        {"dims", c.dims},
                        {"shape", c.shape},
                        {"rtol", c.tolerance.rtol},
                        {"atol", c.tolerance.atol},
                        {"pass", c.pass}};
    if (c.status == FieldStatus::shape_mismatch) {
      f["dims_b"] = c.dims_b;
      f["shape_b"] = c.shape_b;
    }
    if (c.status == FieldStatus::compared) {
      // NaN and infinities are not JSON: null stands for them.
      f["max_abs"] = number_or_null(c.max_abs);
      f["max_rel"] = number_or_null(c.max_rel);
      f["rel_l2"] = number_or_null(c.rel_l2);
      // No difference anywhere: no place is the worst.
      f["worst_index"] = c.max_abs != 0 ? nlohmann::json(c.worst_index) : nlohmann::json(nullptr);
      f["failing"] = c.failing;
      f["furthest_index"] =
          c.failing > 0 ? nlohmann::json(c.furthest_index) : nlohmann::json(nullptr);
      f["nonfinite_a"] = c.nonfinite_a;
      f["nonfinite_b"] = c.nonfinite_b;
    }
    if (!c.pass) f["problem"] = c.problem();
    fields.push_back(std::move(f));
  }
  return {{"kind", "sciproxy-verify"},
          {"a", {{"path", comparison.path_a}, {"savepoint", comparison.savepoint_a}}},
          {"b", {{"path", comparison.path_b}, {"savepoint", comparison.savepoint_b}}},
          {"pass", comparison.pass},
          {"fields_compared", comparison.fields.size()},
          {"fields_failed", failed},
          {"notes", comparison.notes},
          {"fields", fields}};
}

}  // namespace sciproxy
