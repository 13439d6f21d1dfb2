// Quantized tensors as plain arrays (modelzip/convert.hpp, "Quantized
// tensors as plain arrays"): the split for writing .npz and .safetensors
// files, and the join that turns such arrays back into quantized tensors
// through the same checks as the tensor blob reader (Tensor::quantized).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "convert/json_cursor.hpp"
#include "convert/tensor_bytes.hpp"
#include "core/checked.hpp"
#include "core/json_text.hpp"
#include "core/printable.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/error.hpp"

namespace modelzip::convert {
namespace {

constexpr std::string_view kScales = ".scales";
constexpr std::string_view kZeroPoints = ".zero_points";
constexpr std::string_view kDescription = ".quantization";
constexpr std::uint64_t kVersion = 1;

// NAME + suffix with a non-empty NAME.
bool has_suffix(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.ends_with(suffix);
}

// The shape of NAME.scales (and NAME.zero_points) for `q` over `shape`:
// [] per tensor, [C] per axis, shape[:axis] + [B] block-wise. Throws
// Error(invalid_argument) when axis or block size do not fit the shape.
Shape scales_shape(const Quantization& q, std::span<const std::int64_t> shape) {
  switch (q.scheme) {
    case QuantScheme::affine_per_tensor:
      return {};
    case QuantScheme::affine_per_axis:
      return {static_cast<std::int64_t>(q.scale_count(shape))};
    case QuantScheme::block_symmetric: {
      const std::uint64_t k = q.row_length(shape);
      if (q.block_size == 0)
        throw Error(ErrorCode::invalid_argument,
                    "quantization.block_size is 0; it must be at least 1");
      Shape out(shape.begin(), shape.begin() + q.axis);
      out.push_back(static_cast<std::int64_t>(k / q.block_size + (k % q.block_size != 0)));
      return out;
    }
  }
  throw Error(ErrorCode::invalid_argument, "quantization: unknown scheme");
}

std::string description_json(const Tensor& t) {
  const Quantization& q = *t.quantization();
  std::string json = "{\"version\":" + std::to_string(kVersion) + ",\"scheme\":";
  modelzip::detail::append_json_string(json, quant_scheme_name(q.scheme));
  json += ",\"storage\":";
  modelzip::detail::append_json_string(json, quant_storage_name(q.storage));
  json += ",\"bits\":" + std::to_string(quant_storage_bits(q.storage));
  if (q.scheme != QuantScheme::affine_per_tensor) json += ",\"axis\":" + std::to_string(q.axis);
  if (q.scheme == QuantScheme::block_symmetric)
    json += ",\"block_size\":" + std::to_string(q.block_size);
  json += ",\"dtype\":";
  modelzip::detail::append_json_string(json, dtype_name(t.dtype()));
  return json + "}";
}

// The integers one per element: int8 and uint8 as stored (a view), int4
// unpacked to one int8 each.
Tensor integers(const Tensor& t) {
  const Quantization& q = *t.quantization();
  if (q.storage == QuantStorage::uint8) return Tensor::dense(DType::uint8, t.shape(), t.values());
  if (q.storage == QuantStorage::int8) return Tensor::dense(DType::int8, t.shape(), t.values());
  const std::uint64_t n = t.numel();
  std::vector<std::byte> out(n);
  for (std::uint64_t i = 0; i < n; ++i)
    out[i] = static_cast<std::byte>(
        static_cast<std::int8_t>(quant_value_at(q.storage, t.values().data(), i)));
  return Tensor::dense(DType::int8, t.shape(), Bytes::take(std::move(out)));
}

Bytes scalar_bytes(const void* value) {
  return Bytes::copy_of(std::span(static_cast<const std::byte*>(value), 8));
}

}  // namespace

std::vector<NamedTensor> quantized_to_arrays(std::span<const NamedTensor> tensors,
                                             TensorFormat format, StringMap& metadata) {
  std::vector<NamedTensor> out;
  out.reserve(tensors.size());
  for (const auto& nt : tensors) {
    const Tensor& t = nt.tensor;
    if (t.layout() != Layout::quantized) {
      out.push_back(nt);
      continue;
    }
    if (format != TensorFormat::npz && format != TensorFormat::safetensors)
      throw Error(ErrorCode::unsupported,
                  std::string(tensor_format_name(format)) + " cannot hold quantized tensor " +
                      modelzip::detail::quote_name(nt.name) + ": its integers go with scales" +
                      (format == TensorFormat::npy ? std::string(" and a .npy file holds one array")
                                                   : std::string(" and a description, and BTF has "
                                                                 "neither names nor metadata")) +
                      "; write .npz or .safetensors, or dequantize it (export --dequantize)");
    const Quantization& q = *t.quantization();
    out.push_back({nt.name, integers(t)});
    const Shape sshape = scales_shape(q, t.shape());
    switch (q.scheme) {
      case QuantScheme::affine_per_tensor:
        out.push_back({nt.name + std::string(kScales),
                       Tensor::dense(DType::float64, {}, scalar_bytes(&q.scale))});
        out.push_back({nt.name + std::string(kZeroPoints),
                       Tensor::dense(DType::int64, {}, scalar_bytes(&q.zero_point))});
        break;
      case QuantScheme::affine_per_axis:
        out.push_back(
            {nt.name + std::string(kScales), Tensor::dense(DType::float64, sshape, q.scales)});
        out.push_back({nt.name + std::string(kZeroPoints),
                       Tensor::dense(DType::int64, sshape, q.zero_points)});
        break;
      case QuantScheme::block_symmetric:
        out.push_back(
            {nt.name + std::string(kScales), Tensor::dense(q.scale_dtype, sshape, q.scales)});
        break;
    }
    const std::string key = nt.name + std::string(kDescription);
    const std::string json = description_json(t);
    if (format == TensorFormat::npz) {
      out.push_back({key, Tensor::strings({}, std::vector<std::string>{json})});
    } else if (!metadata.emplace(key, json).second) {
      throw Error(ErrorCode::invalid_argument, "safetensors: metadata key " +
                                                   modelzip::detail::quote_name(key) +
                                                   " is given, but it describes quantized tensor " +
                                                   modelzip::detail::quote_name(nt.name));
    }
  }
  // A parameter named like another's scales: say which, not just "duplicate".
  std::map<std::string_view, std::size_t> seen;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (auto [it, fresh] = seen.emplace(out[i].name, i); !fresh)
      throw Error(ErrorCode::invalid_argument,
                  std::string(tensor_format_name(format)) + ": the name " +
                      modelzip::detail::quote_name(out[i].name) +
                      " is used twice (a quantized tensor NAME is written as NAME, NAME.scales, "
                      "NAME.zero_points and NAME.quantization)");
  return out;
}

namespace {

// What NAME.quantization says.
struct Description {
  Quantization q;
  DType original = DType::float32;
};

Description parse_description(std::string_view json, const std::string& key) {
  const std::string what = modelzip::detail::quote_name(key);
  detail::JsonCursor c(json, 0, what);
  Description d;
  std::optional<std::uint64_t> version, bits, axis, block_size;
  std::optional<std::string> scheme, storage, dtype;
  c.begin_object();
  std::string field;
  for (;;) {
    const std::uint64_t at = c.offset();
    if (!c.next_key(field)) break;
    auto once = [&](auto& slot, auto read) {
      if (slot) c.fail_at(at, "duplicate key " + modelzip::detail::quote_name(field));
      slot = read();
    };
    if (field == "version")
      once(version, [&] { return c.read_uint(); });
    else if (field == "bits")
      once(bits, [&] { return c.read_uint(); });
    else if (field == "axis")
      once(axis, [&] { return c.read_uint(); });
    else if (field == "block_size")
      once(block_size, [&] { return c.read_uint(); });
    else if (field == "scheme")
      once(scheme, [&] { return c.read_string(); });
    else if (field == "storage")
      once(storage, [&] { return c.read_string(); });
    else if (field == "dtype")
      once(dtype, [&] { return c.read_string(); });
    else
      c.fail_at(at, "unknown key " + modelzip::detail::quote_name(field));
  }
  c.finish();
  auto bad = [&](const std::string& problem) -> Error {
    return Error(ErrorCode::corrupt, what + ": " + problem);
  };
  if (!version) throw bad("\"version\" is missing");
  if (*version != kVersion)
    throw Error(ErrorCode::unsupported, what + ": quantization description version " +
                                            std::to_string(*version) +
                                            " is not supported (version 1 is)");
  if (!scheme || !storage || !bits || !dtype)
    throw bad("\"scheme\", \"storage\", \"bits\" and \"dtype\" are required");
  bool known = false;
  for (auto s :
       {QuantScheme::affine_per_tensor, QuantScheme::affine_per_axis, QuantScheme::block_symmetric})
    if (quant_scheme_name(s) == *scheme) d.q.scheme = s, known = true;
  if (!known)
    throw Error(ErrorCode::unsupported, what + ": unknown scheme '" + *scheme +
                                            "' (affine-per-tensor, affine-per-axis, "
                                            "block-symmetric)");
  known = false;
  for (auto s : {QuantStorage::int8, QuantStorage::uint8, QuantStorage::int4})
    if (quant_storage_name(s) == *storage) d.q.storage = s, known = true;
  if (!known)
    throw Error(ErrorCode::unsupported,
                what + ": unknown storage '" + *storage + "' (int8, uint8, int4)");
  if (*bits != quant_storage_bits(d.q.storage))
    throw bad("\"bits\" is " + std::to_string(*bits) + ", storage " + *storage + " has " +
              std::to_string(quant_storage_bits(d.q.storage)));
  const auto original = dtype_from_name(*dtype);
  if (!original) throw bad("unknown dtype '" + *dtype + "'");
  d.original = *original;
  const bool wants_axis = d.q.scheme != QuantScheme::affine_per_tensor;
  const bool wants_block = d.q.scheme == QuantScheme::block_symmetric;
  if (axis.has_value() != wants_axis)
    throw bad(std::string("\"axis\" is ") + (wants_axis ? "required" : "not allowed") + " with " +
              *scheme);
  if (block_size.has_value() != wants_block)
    throw bad(std::string("\"block_size\" is ") + (wants_block ? "required" : "not allowed") +
              " with " + *scheme);
  if (axis) {
    if (*axis > static_cast<std::uint64_t>(INT64_MAX)) throw bad("\"axis\" is too large");
    d.q.axis = static_cast<std::int64_t>(*axis);
  }
  if (block_size) d.q.block_size = *block_size;
  return d;
}

// The int4 values of `ints` (int8, one per element) packed two per byte;
// Error(corrupt) naming the array at the first value outside [-8, 7].
Bytes pack_int4(const Tensor& ints, const std::string& name) {
  const std::uint64_t n = ints.numel();
  std::vector<std::byte> out(quant_values_bytes(QuantStorage::int4, n));
  const std::byte* in = ints.values().data();
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::int8_t>(in[i]);
    if (v < -8 || v > 7)
      throw Error(ErrorCode::corrupt, modelzip::detail::quote_name(name) + "[" + std::to_string(i) +
                                          "] is " + std::to_string(v) +
                                          ", outside the int4 range [-8, 7]");
    const auto nibble = static_cast<std::uint8_t>(v) & 0x0F;
    out[i / 2] |= static_cast<std::byte>(i % 2 == 0 ? nibble : nibble << 4);
  }
  return Bytes::take(std::move(out));
}

}  // namespace

void arrays_to_quantized(TensorFile& file) {
  // The descriptions: safetensors metadata entries, or 0-d string arrays.
  std::map<std::string, std::string> descriptions;  // NAME -> JSON
  for (auto it = file.metadata.begin(); it != file.metadata.end();) {
    if (file.format == TensorFormat::safetensors && has_suffix(it->first, kDescription)) {
      descriptions[it->first.substr(0, it->first.size() - kDescription.size())] = it->second;
      it = file.metadata.erase(it);
    } else {
      ++it;
    }
  }
  std::map<std::string, std::size_t> index;  // array name -> position in file.tensors
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    const auto& nt = file.tensors[i];
    index.emplace(nt.name, i);
    if (file.format == TensorFormat::npz && has_suffix(nt.name, kDescription) &&
        nt.tensor.dtype() == DType::utf8 && nt.tensor.layout() == Layout::dense) {
      if (nt.tensor.rank() != 0)
        throw Error(ErrorCode::corrupt,
                    "quantization description " + modelzip::detail::quote_name(nt.name) +
                        " must be a 0-d string array, its shape is " +
                        detail::shape_text(nt.tensor.shape()),
                    {.entry = nt.name});
      descriptions[nt.name.substr(0, nt.name.size() - kDescription.size())] =
          std::string(nt.tensor.string_at(0));
    }
  }
  if (descriptions.empty()) return;

  std::vector<bool> consumed(file.tensors.size(), false);
  std::map<std::size_t, Tensor> joined;  // position of NAME -> its quantized tensor
  for (const auto& description : descriptions) {
    // Named copies, not structured bindings: clang 14 cannot capture those.
    const std::string& name = description.first;
    const std::string& json = description.second;
    const std::string key = name + std::string(kDescription);
    if (file.format == TensorFormat::npz) consumed[index.at(key)] = true;
    Description d;
    try {
      d = parse_description(json, key);
    } catch (const Error& e) {
      throw e.with_context({.entry = key});
    }
    Quantization& q = d.q;
    auto fail = [&](const std::string& array, const std::string& problem) -> Error {
      return Error(ErrorCode::corrupt,
                   "quantized tensor " + modelzip::detail::quote_name(name) + ": " + problem,
                   {.entry = array});
    };
    auto find = [&](const std::string& array, bool required) -> const Tensor* {
      auto it = index.find(array);
      if (it == index.end()) {
        if (required) throw fail(key, modelzip::detail::quote_name(array) + " is missing");
        return nullptr;
      }
      const Tensor& t = file.tensors[it->second].tensor;
      if (t.layout() != Layout::dense)
        throw fail(array, modelzip::detail::quote_name(array) + " is not a dense array");
      consumed[it->second] = true;
      return &t;
    };
    auto expect = [&](const std::string& array, const Tensor& t, std::span<const DType> dtypes,
                      const Shape& shape) {
      if (std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end()) {
        std::string allowed;
        for (DType dt : dtypes)
          allowed += (allowed.empty() ? "" : " or ") + std::string(dtype_name(dt));
        throw fail(array, modelzip::detail::quote_name(array) + " has dtype " +
                              std::string(dtype_name(t.dtype())) + ", expected " + allowed);
      }
      if (t.shape() != shape)
        throw fail(array, modelzip::detail::quote_name(array) + " has shape " +
                              detail::shape_text(t.shape()) + ", expected " +
                              detail::shape_text(shape));
    };

    const Tensor& ints = *find(name, true);
    const DType int_type = q.storage == QuantStorage::uint8 ? DType::uint8 : DType::int8;
    expect(name, ints, std::span(&int_type, 1), ints.shape());
    Shape sshape;
    try {
      sshape = scales_shape(q, ints.shape());
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) throw;
      throw fail(key, e.message());
    }
    const std::string scales_name = name + std::string(kScales);
    const std::string zp_name = name + std::string(kZeroPoints);
    const Tensor& scales = *find(scales_name, true);
    const Tensor* zps = find(zp_name, q.scheme != QuantScheme::block_symmetric);
    if (q.scheme == QuantScheme::block_symmetric) {
      if (zps)
        throw fail(zp_name, modelzip::detail::quote_name(zp_name) +
                                " is not allowed: block-symmetric has none");
      static constexpr DType kBlockScales[] = {DType::float16, DType::float32};
      expect(scales_name, scales, kBlockScales, sshape);
      q.scale_dtype = scales.dtype();
      q.scales = scales.values();
    } else {
      static constexpr DType kF64 = DType::float64, kI64 = DType::int64;
      expect(scales_name, scales, std::span(&kF64, 1), sshape);
      expect(zp_name, *zps, std::span(&kI64, 1), sshape);
      if (q.scheme == QuantScheme::affine_per_tensor) {
        q.scale = modelzip::detail::load_le<double>(scales.values().data());
        q.zero_point = modelzip::detail::load_le<std::int64_t>(zps->values().data());
      } else {
        q.scale_dtype = DType::float64;
        q.scales = scales.values();
        q.zero_points = zps->values();
      }
    }
    const Bytes values = q.storage == QuantStorage::int4
                             ? [&] {
                                 try {
                                   return pack_int4(ints, name);
                                 } catch (const Error& e) {
                                   throw fail(name, e.message());
                                 }
                               }()
                             : ints.values();
    try {
      joined.emplace(index.at(name), Tensor::quantized(d.original, ints.shape(), q, values));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) throw;
      // Messages name the field: quantization.scales[i] is NAME.scales[i].
      const bool about_scales = e.message().find("scale") != std::string::npos;
      const bool about_zero_points = e.message().find("zero_point") != std::string::npos;
      throw fail(about_zero_points ? zp_name : about_scales ? scales_name : key, e.message());
    }
  }
  std::vector<NamedTensor> out;
  out.reserve(file.tensors.size());
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    if (auto it = joined.find(i); it != joined.end())
      out.push_back({std::move(file.tensors[i].name), it->second});
    else if (!consumed[i])
      out.push_back(std::move(file.tensors[i]));
  }
  file.tensors = std::move(out);
}

}  // namespace modelzip::convert
