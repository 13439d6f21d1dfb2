// safetensors reading and writing, following the safetensors library
// (huggingface/safetensors, safetensors/src/tensor.rs): 8-byte LE header
// size, JSON header, data area covered exactly by the tensors' offsets.
#include <algorithm>
#include <optional>
#include <ostream>
#include <set>
#include <unordered_set>

#include "convert/json_cursor.hpp"
#include "convert/tensor_bytes.hpp"
#include "core/checked.hpp"
#include "core/printable.hpp"
#include "core/utf8.hpp"
#include "io/atomic_write.hpp"
#include "modelzip/convert.hpp"

namespace modelzip::convert {
namespace {

using detail::JsonCursor;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the library's MAX_HEADER_SIZE
constexpr std::string_view kMetadataKey = "__metadata__";

struct DtypeName {
  std::string_view name;
  DType dtype;
  int alignment_rank;  // order in the library's Dtype enum (increasing alignment)
};

// F4 is float4_e2m1fn_x2 with the last dimension counted in 4-bit values,
// not in bytes (pairs): see f4_shape_from_file and f4_shape_for_file. The
// ranks 2 and 3 are F6_E2M3 and F6_E3M2, which modelzip has no type for.
constexpr DtypeName kDtypes[] = {
    {"BOOL", DType::bool_, 0},
    {"F4", DType::float4_e2m1fn_x2, 1},
    {"U8", DType::uint8, 4},
    {"I8", DType::int8, 5},
    {"F8_E5M2", DType::float8_e5m2, 6},
    {"F8_E4M3", DType::float8_e4m3fn, 7},
    {"F8_E8M0", DType::float8_e8m0fnu, 8},
    {"I16", DType::int16, 9},
    {"U16", DType::uint16, 10},
    {"F16", DType::float16, 11},
    {"BF16", DType::bfloat16, 12},
    {"I32", DType::int32, 13},
    {"U32", DType::uint32, 14},
    {"F32", DType::float32, 15},
    {"C64", DType::complex64, 16},
    {"F64", DType::float64, 17},
    {"I64", DType::int64, 18},
    {"U64", DType::uint64, 19},
};

// safetensors dtypes that exist but modelzip has no type for, and why.
struct Unsupported {
  std::string_view name;
  std::string_view why;
};
constexpr Unsupported kKnownUnsupported[] = {
    {"F6_E2M3",
     "safetensors defines 6 bits per value but not how they pack into bytes, and torch has no "
     "such dtype"},
    {"F6_E3M2",
     "safetensors defines 6 bits per value but not how they pack into bytes, and torch has no "
     "such dtype"},
    {"PackedU4", "a packed 4-bit integer type modelzip has no type for"},
    {"PackedI4", "a packed 4-bit integer type modelzip has no type for"},
};

// The shape of an F4 tensor as modelzip stores it (float4_e2m1fn_x2: the
// last dimension counts pairs), from the file's (which counts 4-bit values),
// as torch's safetensors loader converts it; nullopt when the file's shape
// has no last dimension or an odd one (a row would end in half a byte).
std::optional<Shape> f4_shape_from_file(Shape shape) {
  if (shape.empty() || shape.back() % 2 != 0) return std::nullopt;
  shape.back() /= 2;
  return shape;
}

const DtypeName* find_dtype(DType dtype) {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return &d;
  return nullptr;
}

struct Entry {
  std::string name;
  DType dtype = DType::float32;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
  std::uint64_t at = 0;  // offset of the entry's key, for messages
};

Entry parse_entry(JsonCursor& json, std::string name, std::uint64_t at, const Limits& limits) {
  Entry e;
  e.name = std::move(name);
  e.at = at;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  json.begin_object();
  std::string field;
  while (true) {
    const std::uint64_t field_at = json.offset();
    if (!json.next_key(field)) break;
    auto once = [&](bool& seen) {
      if (seen)
        json.fail_at(field_at, "tensor " + modelzip::detail::quote_name(e.name) +
                                   ": duplicate field " + modelzip::detail::quote_name(field));
      seen = true;
    };
    if (field == "dtype") {
      once(has_dtype);
      const std::uint64_t value_at = json.offset();
      const std::string dtype = json.read_string();
      const DtypeName* found = nullptr;
      for (const auto& d : kDtypes)
        if (d.name == dtype) found = &d;
      if (!found) {
        for (const auto& u : kKnownUnsupported)
          if (u.name == dtype)
            throw Error(ErrorCode::unsupported,
                        "safetensors: tensor " + modelzip::detail::quote_name(e.name) +
                            " has dtype " + dtype + ", which modelzip does not support (" +
                            std::string(u.why) + ")",
                        ErrorContext{.offset = value_at});
        json.fail_at(value_at, "tensor " + modelzip::detail::quote_name(e.name) +
                                   ": unknown dtype " + modelzip::detail::quote_name(dtype));
      }
      e.dtype = found->dtype;
    } else if (field == "shape") {
      once(has_shape);
      json.begin_array();
      while (json.next_item()) {
        const std::uint64_t dim_at = json.offset();
        detail::check_rank(e.shape.size() + 1, limits,
                           "safetensors tensor " + modelzip::detail::quote_name(e.name), dim_at);
        const std::uint64_t d = json.read_uint();
        if (d > static_cast<std::uint64_t>(INT64_MAX))
          json.fail_at(dim_at, "tensor " + modelzip::detail::quote_name(e.name) + ": dimension " +
                                   std::to_string(d) + " is too large");
        e.shape.push_back(static_cast<std::int64_t>(d));
      }
    } else if (field == "data_offsets") {
      once(has_offsets);
      json.begin_array();
      std::uint64_t values[2];
      for (int i = 0; i < 2; ++i) {
        if (!json.next_item())
          json.fail("tensor " + modelzip::detail::quote_name(e.name) +
                    ": data_offsets must hold two integers");
        values[i] = json.read_uint();
      }
      if (json.next_item())
        json.fail("tensor " + modelzip::detail::quote_name(e.name) +
                  ": data_offsets must hold two integers");
      e.begin = values[0];
      e.end = values[1];
    } else {
      json.fail_at(field_at, "tensor " + modelzip::detail::quote_name(e.name) + ": unknown field " +
                                 modelzip::detail::quote_name(field));
    }
  }
  if (!has_dtype || !has_shape || !has_offsets)
    json.fail_at(at, "tensor " + modelzip::detail::quote_name(e.name) + " lacks " +
                         std::string(!has_dtype   ? "'dtype'"
                                     : !has_shape ? "'shape'"
                                                  : "'data_offsets'"));
  return e;
}

TensorFile read_safetensors_bytes(const Bytes& data, const Limits& limits) {
  modelzip::detail::ByteReader r(data.span());
  const auto n = r.read<std::uint64_t>("safetensors header size");
  if (n > kMaxHeaderBytes)
    throw Error(ErrorCode::limit_exceeded,
                "safetensors header of " + std::to_string(n) + " bytes exceeds the limit of " +
                    std::to_string(kMaxHeaderBytes),
                ErrorContext{.offset = 0});
  const std::string_view header = r.string(n, "safetensors header");
  if (header.empty() || header[0] != '{')
    throw Error(ErrorCode::corrupt, "safetensors header does not start with '{'",
                ErrorContext{.offset = 8});
  const std::uint64_t data_start = 8 + n;

  JsonCursor json(header, 8, "safetensors header");
  TensorFile file;
  file.format = TensorFormat::safetensors;
  std::vector<Entry> entries;
  std::unordered_set<std::string> names;
  bool has_metadata = false;
  json.begin_object();
  std::string key;
  while (true) {
    const std::uint64_t key_at = json.offset();
    if (!json.next_key(key)) break;
    if (key == kMetadataKey) {
      if (has_metadata) json.fail_at(key_at, "duplicate '__metadata__'");
      has_metadata = true;
      json.begin_object();
      std::string meta_key;
      while (true) {
        const std::uint64_t meta_at = json.offset();
        if (!json.next_key(meta_key)) break;
        // The format's metadata is a map of strings to strings.
        const std::uint64_t value_at = json.offset();
        if (value_at - 8 >= header.size() || header[value_at - 8] != '"')
          json.fail_at(value_at, "metadata key " + modelzip::detail::quote_name(meta_key) +
                                     ": expected a string value (safetensors metadata maps "
                                     "strings to strings)");
        std::string value = json.read_string();
        if (!file.metadata.emplace(meta_key, std::move(value)).second)
          json.fail_at(meta_at, "duplicate metadata key " + modelzip::detail::quote_name(meta_key));
      }
      continue;
    }
    if (!names.insert(key).second)
      json.fail_at(key_at, "duplicate tensor " + modelzip::detail::quote_name(key));
    entries.push_back(parse_entry(json, key, key_at, limits));
  }
  json.finish();

  // As the library: order by offsets, then every tensor must start where the
  // previous one ended, and the last must end at the end of the file.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const std::uint64_t data_size = r.remaining();
  std::uint64_t expected = 0;
  for (auto& e : entries) {
    if (e.begin != expected || e.end < e.begin)
      throw Error(ErrorCode::corrupt,
                  "safetensors: tensor " + modelzip::detail::quote_name(e.name) +
                      " has data_offsets [" + std::to_string(e.begin) + ", " +
                      std::to_string(e.end) + "], expected to start at " +
                      std::to_string(expected) + " (tensor data must not overlap or leave gaps)",
                  ErrorContext{.offset = e.at});
    const DtypeName* d = find_dtype(e.dtype);
    const std::string file_shape = detail::shape_text(e.shape);
    if (e.dtype == DType::float4_e2m1fn_x2) {
      auto pairs = f4_shape_from_file(e.shape);
      if (!pairs) {
        const std::uint64_t values = detail::checked_byte_size(
            e.shape, 1, "safetensors tensor " + modelzip::detail::quote_name(e.name));
        // An odd count of 4-bit values ends in half a byte: the library
        // itself refuses the file (MisalignedSlice).
        const bool half_byte = values % 2 != 0;
        throw Error(half_byte ? ErrorCode::corrupt : ErrorCode::unsupported,
                    "safetensors: tensor " + modelzip::detail::quote_name(e.name) +
                        " of dtype F4 has shape " + file_shape +
                        (half_byte ? ", an odd number of 4-bit values (the data would end in "
                                     "half a byte)"
                                   : ", an odd last dimension: float4_e2m1fn_x2 (as torch "
                                     "loads F4) packs each row's values in pairs of one byte"),
                    ErrorContext{.offset = e.at});
      }
      e.shape = std::move(*pairs);
    }
    const std::uint64_t bytes =
        detail::checked_byte_size(e.shape, dtype_size(d->dtype),
                                  "safetensors tensor " + modelzip::detail::quote_name(e.name));
    if (e.end - e.begin != bytes)
      throw Error(ErrorCode::corrupt,
                  "safetensors: tensor " + modelzip::detail::quote_name(e.name) + " of dtype " +
                      std::string(d->name) + " and shape " + file_shape + " needs " +
                      std::to_string(bytes) + " bytes, its data_offsets span " +
                      std::to_string(e.end - e.begin),
                  ErrorContext{.offset = e.at});
    if (e.end > data_size)
      throw Error(ErrorCode::corrupt,
                  "safetensors: tensor " + modelzip::detail::quote_name(e.name) +
                      " ends at data offset " + std::to_string(e.end) +
                      ", past the end of the data (" + std::to_string(data_size) + " bytes)",
                  ErrorContext{.offset = e.at});
    expected = e.end;
  }
  if (expected != data_size)
    throw Error(ErrorCode::corrupt,
                "safetensors: the tensors cover " + std::to_string(expected) +
                    " bytes of data, the file holds " + std::to_string(data_size),
                ErrorContext{.offset = data_start + expected});

  file.tensors.reserve(entries.size());
  for (auto& e : entries) {
    const std::size_t element = dtype_size(e.dtype);
    Bytes values = detail::aligned_slice(data, data_start + e.begin, e.end - e.begin, element);
    file.tensors.push_back(
        {std::move(e.name), Tensor::dense(e.dtype, std::move(e.shape), std::move(values))});
  }
  return file;
}

}  // namespace

TensorFile read_safetensors(const Bytes& data, const Limits& limits, std::string_view source) {
  return detail::read_from(source, [&] { return read_safetensors_bytes(data, limits); });
}

namespace {

struct Prepared {
  std::string header;                                // size prefix, JSON, padding
  std::vector<const detail::StreamedTensor*> order;  // data order
};

Prepared prepare(std::span<const detail::StreamedTensor> tensors, const StringMap& metadata) {
  std::vector<const detail::StreamedTensor*> order;
  for (const auto& t : tensors) {
    if (t.name == kMetadataKey)
      throw Error(ErrorCode::invalid_argument,
                  "safetensors: '__metadata__' is reserved and cannot name a tensor");
    if (!modelzip::detail::utf8_valid(t.name))
      throw Error(ErrorCode::invalid_argument, "safetensors: a tensor name is not valid UTF-8");
    if (t.layout != Layout::dense)
      detail::unsupported_tensor("safetensors", t.name,
                                 t.layout == Layout::quantized
                                     ? "quantized tensors are not supported (dequantize them first)"
                                     : "sparse COO tensors are not supported");
    if (t.dtype == DType::utf8)
      detail::unsupported_tensor("safetensors", t.name, "string tensors are not supported");
    if (!find_dtype(t.dtype))
      detail::unsupported_tensor("safetensors", t.name,
                                 std::string(dtype_name(t.dtype)) +
                                     " tensors are not supported (safetensors has no such dtype" +
                                     (t.dtype == DType::complex128 ? "; C64 is complex64)" : ")"));
    if (t.dtype == DType::float4_e2m1fn_x2) {
      if (t.shape.empty())
        detail::unsupported_tensor("safetensors", t.name,
                                   "a scalar float4_e2m1fn_x2 (one pair of FP4 values) has no "
                                   "last dimension for F4 to count the values in; reshape it to "
                                   "[1]");
      if (t.shape.back() > INT64_MAX / 2)
        detail::unsupported_tensor("safetensors", t.name,
                                   "its last dimension counted in 4-bit values would overflow");
    }
    order.push_back(&t);
  }
  for (const auto& [k, v] : metadata)
    if (!modelzip::detail::utf8_valid(k) || !modelzip::detail::utf8_valid(v))
      throw Error(ErrorCode::invalid_argument, "safetensors: metadata is not valid UTF-8");
  // The library's order: descending dtype alignment, then name.
  std::sort(order.begin(), order.end(),
            [](const detail::StreamedTensor* a, const detail::StreamedTensor* b) {
              const int ra = find_dtype(a->dtype)->alignment_rank;
              const int rb = find_dtype(b->dtype)->alignment_rank;
              return ra != rb ? ra > rb : a->name < b->name;
            });
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i - 1]->name == order[i]->name)
      throw Error(ErrorCode::invalid_argument, "safetensors: duplicate tensor name " +
                                                   modelzip::detail::quote_name(order[i]->name));

  std::string json = "{";
  bool first = true;
  if (!metadata.empty()) {
    detail::append_json_string(json, kMetadataKey);
    json += ":{";
    for (const auto& [k, v] : metadata) {
      if (!first) json += ',';
      first = false;
      detail::append_json_string(json, k);
      json += ':';
      detail::append_json_string(json, v);
    }
    json += '}';
    first = false;
  }
  std::uint64_t offset = 0;
  for (const detail::StreamedTensor* t : order) {
    if (!first) json += ',';
    first = false;
    detail::append_json_string(json, t->name);
    json += ":{\"dtype\":\"";
    json += find_dtype(t->dtype)->name;
    json += "\",\"shape\":[";
    for (std::size_t i = 0; i < t->shape.size(); ++i) {
      if (i) json += ',';
      // F4 counts 4-bit values: twice float4_e2m1fn_x2's pairs in the last
      // dimension (as torch's safetensors writer doubles it).
      const bool pairs = t->dtype == DType::float4_e2m1fn_x2 && i + 1 == t->shape.size();
      json += std::to_string(pairs ? t->shape[i] * 2 : t->shape[i]);
    }
    const std::uint64_t end = offset + t->nbytes;
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
  if (json.size() > kMaxHeaderBytes)
    throw Error(ErrorCode::limit_exceeded, "safetensors: the header would need " +
                                               std::to_string(json.size()) +
                                               " bytes, more than readers accept (100 MB)");

  Prepared p;
  p.header.resize(8);
  modelzip::detail::store_le<std::uint64_t>(reinterpret_cast<std::byte*>(p.header.data()),
                                            json.size());
  p.header += json;
  p.order = std::move(order);
  return p;
}

void write_prepared(std::ostream& out, const Prepared& p) {
  detail::write_bytes(out, p.header);
  for (const detail::StreamedTensor* t : p.order) {
    const auto before = out.tellp();
    t->write(out);
    if (out && before >= 0 && static_cast<std::uint64_t>(out.tellp() - before) != t->nbytes)
      throw Error(ErrorCode::io, "safetensors: tensor " + modelzip::detail::quote_name(t->name) +
                                     " wrote " + std::to_string(out.tellp() - before) +
                                     " bytes, not " + std::to_string(t->nbytes));
  }
}

// The tensors as StreamedTensors that write their values.
std::vector<detail::StreamedTensor> as_streamed(std::span<const NamedTensor> tensors) {
  std::vector<detail::StreamedTensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors)
    out.push_back({t.name, t.tensor.dtype(), t.tensor.shape(), t.tensor.layout(),
                   t.tensor.values().size(),
                   [&t](std::ostream& o) { detail::write_bytes(o, t.tensor.values().span()); }});
  return out;
}

}  // namespace

void write_safetensors(std::ostream& out, std::span<const NamedTensor> tensors,
                       const StringMap& metadata) {
  detail::check_unique_names(tensors, "safetensors");
  const auto streamed = as_streamed(tensors);
  write_prepared(out, prepare(streamed, metadata));
}

void write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                       const StringMap& metadata) {
  detail::check_unique_names(tensors, "safetensors");
  detail::write_safetensors_streamed(path, as_streamed(tensors), metadata);
}

namespace detail {

void write_safetensors_streamed(const std::filesystem::path& path,
                                std::span<const StreamedTensor> tensors,
                                const StringMap& metadata) {
  const Prepared p = prepare(tensors, metadata);
  io::write_file_atomically(
      path, [&](std::ostream& out) { write_prepared(out, p); }, true);
}

}  // namespace detail

}  // namespace modelzip::convert
