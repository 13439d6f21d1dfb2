// TFRT Binary Tensor Format (BTF) reading and writing, as implemented by
// tensorflow/runtime: include/tfrt/tensor/btf.h (TensorHeader, dtype and
// layout numbers), lib/tensor/btf_util.cc (writer: 8-byte padding after each
// record's data), tools/btf_info_tool (reader of dense and COO records,
// 8-byte aligned record offsets) and lib/tensor/coo_host_tensor_kernels.cc
// (COO payload: dims, then indices and values as dense payloads).
#include <algorithm>
#include <functional>
#include <optional>
#include <ostream>

#include "convert/tensor_bytes.hpp"
#include "core/checked.hpp"
#include "io/atomic_write.hpp"
#include "modelzip/convert.hpp"

namespace modelzip::convert {
namespace {

using modelzip::detail::ByteReader;
using modelzip::detail::checked_add;
using modelzip::detail::checked_mul;

constexpr std::uint64_t kAlignment = 8;
constexpr std::uint64_t kRecordHeaderSize = 16;   // rank u64, dtype u8, layout u8, 6 reserved
constexpr std::uint8_t kLayoutDense = 0;          // TensorLayout::kRMD
constexpr std::uint8_t kLayoutCoo = 1;            // TensorLayout::kCOO_EXPERIMENTAL
constexpr std::uint8_t kLayoutCooDocumented = 2;  // "COO := 2" in binary_tensor_format.md

// btf::TensorDType numbering (persisted; do not change).
constexpr DType kBtfDtypes[] = {DType::int8,    DType::int16,   DType::int32, DType::int64,
                                DType::float32, DType::float64, DType::uint8, DType::uint16,
                                DType::uint32,  DType::uint64};

std::optional<std::uint8_t> btf_code(DType dtype) {
  for (std::uint8_t i = 0; i < std::size(kBtfDtypes); ++i)
    if (kBtfDtypes[i] == dtype) return i;
  return std::nullopt;
}

Shape read_dims(ByteReader& r, std::uint64_t rank, std::string_view what) {
  // rank is checked against Limits and the reader checks the bytes exist.
  r.require(checked_mul(rank, 8, what), what);
  Shape dims;
  dims.reserve(rank);
  for (std::uint64_t i = 0; i < rank; ++i) {
    const std::uint64_t at = r.absolute_position();
    const auto d = r.read<std::uint64_t>(what);
    if (d > static_cast<std::uint64_t>(INT64_MAX))
      throw Error(ErrorCode::corrupt,
                  std::string(what) + ": dimension " + std::to_string(d) + " is too large",
                  ErrorContext{.offset = at});
    dims.push_back(static_cast<std::int64_t>(d));
  }
  return dims;
}

struct Record {
  Tensor tensor;
  std::uint64_t end = 0;  // one past the payload
};

Record read_record(const Bytes& data, std::uint64_t offset, std::uint64_t index,
                   const Limits& limits) {
  const std::string what = "BTF tensor " + std::to_string(index);
  ByteReader r(data.span());
  r.seek(offset, what);
  const auto rank = r.read<std::uint64_t>(what + " rank");
  detail::check_rank(rank, limits, what, offset);
  const std::uint64_t dtype_at = r.absolute_position();
  const auto code = r.read<std::uint8_t>(what + " dtype");
  const auto layout = r.read<std::uint8_t>(what + " layout");
  r.skip(6, what + " header");  // reserved; TFRT's writer leaves it uninitialized
  if (code >= std::size(kBtfDtypes))
    throw Error(ErrorCode::corrupt, what + ": unknown dtype " + std::to_string(code),
                ErrorContext{.offset = dtype_at});
  const DType dtype = kBtfDtypes[code];
  const std::uint64_t element = dtype_size(dtype);
  Shape shape = read_dims(r, rank, what + " dims");

  Record rec;
  if (layout == kLayoutDense) {
    const std::uint64_t at = r.absolute_position();
    const std::uint64_t size = detail::checked_byte_size(shape, element, what + " data");
    r.require(size, what + " data");
    r.skip(size, what + " data");
    Bytes values = detail::aligned_slice(data, at, size, element);
    rec.tensor = Tensor::dense(dtype, std::move(shape), std::move(values));
  } else if (layout == kLayoutCoo || layout == kLayoutCooDocumented) {
    const std::uint64_t indices_dims_at = r.absolute_position();
    Shape index_dims = read_dims(r, 2, what + " COO indices dims");
    if (static_cast<std::uint64_t>(index_dims[1]) != rank)
      throw Error(ErrorCode::corrupt,
                  what + ": COO indices have " + std::to_string(index_dims[1]) +
                      " columns, the tensor's rank is " + std::to_string(rank),
                  ErrorContext{.offset = indices_dims_at});
    const auto nnz = static_cast<std::uint64_t>(index_dims[0]);
    const std::uint64_t indices_at = r.absolute_position();
    const std::uint64_t indices_size =
        detail::checked_byte_size(index_dims, 8, what + " COO indices");
    r.skip(indices_size, what + " COO indices");
    const std::uint64_t values_dims_at = r.absolute_position();
    Shape value_dims = read_dims(r, 1, what + " COO values dims");
    if (static_cast<std::uint64_t>(value_dims[0]) != nnz)
      throw Error(ErrorCode::corrupt,
                  what + ": COO has " + std::to_string(nnz) + " indices but " +
                      std::to_string(value_dims[0]) + " values",
                  ErrorContext{.offset = values_dims_at});
    const std::uint64_t values_at = r.absolute_position();
    const std::uint64_t values_size = detail::checked_byte_size(value_dims, element, what);
    r.skip(values_size, what + " COO values");
    Bytes indices = detail::aligned_slice(data, indices_at, indices_size, 8);
    Bytes values = detail::aligned_slice(data, values_at, values_size, element);
    rec.tensor = detail::build_tensor(
        [&] {
          return Tensor::sparse_coo(dtype, std::move(shape), nnz, std::move(indices),
                                    std::move(values));
        },
        what, indices_at);
  } else {
    throw Error(ErrorCode::corrupt, what + ": unknown layout " + std::to_string(layout),
                ErrorContext{.offset = dtype_at + 1});
  }
  rec.end = r.absolute_position();
  return rec;
}

std::vector<NamedTensor> read_btf_bytes(const Bytes& data, const Limits& limits) {
  ByteReader r(data.span());
  const auto count = r.read<std::uint64_t>("BTF tensor count");
  if (count > r.remaining() / 8)
    throw Error(ErrorCode::corrupt,
                "BTF declares " + std::to_string(count) + " tensors, the file has room for " +
                    std::to_string(r.remaining() / 8) + " record offsets",
                ErrorContext{.offset = 0});
  const std::uint64_t table_end = 8 + count * 8;
  std::vector<std::uint64_t> offsets(count);
  for (auto& o : offsets) {
    const std::uint64_t at = r.absolute_position();
    o = r.read<std::uint64_t>("BTF record offset");
    if (o % kAlignment != 0 || o < table_end || o > data.size())
      throw Error(ErrorCode::corrupt,
                  "BTF record offset " + std::to_string(o) +
                      (o % kAlignment != 0 ? " is not a multiple of 8"
                       : o < table_end     ? " points into the offset table"
                                           : " is past the end of the file"),
                  ErrorContext{.offset = at});
  }
  // Records may not overlap (a file pointing many offsets at one large
  // record would otherwise multiply the work).
  std::vector<std::uint64_t> order(count);
  for (std::uint64_t i = 0; i < count; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::uint64_t a, std::uint64_t b) { return offsets[a] < offsets[b]; });
  std::vector<NamedTensor> out(count);
  std::uint64_t previous_end = table_end;
  for (std::uint64_t i : order) {
    if (offsets[i] < previous_end)
      throw Error(ErrorCode::corrupt,
                  "BTF tensor " + std::to_string(i) + " overlaps the previous record",
                  ErrorContext{.offset = 8 + i * 8});
    Record rec = read_record(data, offsets[i], i, limits);
    previous_end = rec.end;
    out[i] = {std::to_string(i), std::move(rec.tensor)};
  }
  return out;
}

}  // namespace

std::vector<NamedTensor> read_btf(const Bytes& data, const Limits& limits,
                                  std::string_view source) {
  return detail::read_from(source, [&] { return read_btf_bytes(data, limits); });
}

namespace {

// One record to write: what its header needs, the bytes of its COO indices
// (empty when dense) and a callback that writes its values.
struct PlannedRecord {
  DType dtype;
  Shape shape;
  Layout layout;
  std::uint64_t nnz;
  std::span<const std::byte> indices;
  std::uint64_t value_bytes;
  std::function<void(std::ostream&)> write_values;
  std::uint8_t code = 0;
  std::uint64_t size = 0;  // including padding
};

void plan_record(PlannedRecord& r, std::string_view name) {
  if (r.layout != Layout::dense && r.layout != Layout::sparse_coo)
    detail::unsupported_tensor(
        "BTF", name,
        std::string(layout_name(r.layout)) + " tensors have no BTF form (dequantize them first)");
  auto code = btf_code(r.dtype);
  if (!code)
    detail::unsupported_tensor("BTF", name,
                               "dtype " + std::string(dtype_name(r.dtype)) +
                                   " has no BTF number (BTF holds int8-64, uint8-64, float32, "
                                   "float64)");
  r.code = *code;
  std::uint64_t size = kRecordHeaderSize + 8 * r.shape.size();
  if (r.layout == Layout::sparse_coo) size += 16 + r.indices.size() + 8;
  size += r.value_bytes;
  r.size = modelzip::detail::align_up(size, kAlignment);
}

std::vector<PlannedRecord> plan(std::span<const NamedTensor> tensors) {
  std::vector<PlannedRecord> records;
  for (const auto& t : tensors) {
    const Tensor& x = t.tensor;
    records.push_back(
        {x.dtype(), x.shape(), x.layout(), x.layout() == Layout::sparse_coo ? x.nnz() : 0,
         x.layout() == Layout::sparse_coo ? x.indices().span() : std::span<const std::byte>(),
         x.values().size(),
         [&x](std::ostream& out) { detail::write_bytes(out, x.values().span()); }});
    plan_record(records.back(), t.name);
  }
  return records;
}

void write_records(std::ostream& out, const std::vector<PlannedRecord>& records) {
  std::vector<std::byte> table((records.size() + 1) * 8);
  modelzip::detail::store_le<std::uint64_t>(table.data(), records.size());
  std::uint64_t offset = table.size();
  for (std::size_t i = 0; i < records.size(); ++i) {
    modelzip::detail::store_le<std::uint64_t>(table.data() + (i + 1) * 8, offset);
    offset = checked_add(offset, records[i].size, "BTF file size");
  }
  detail::write_bytes(out, table);
  auto put_u64s = [&](std::span<const std::int64_t> values) {
    std::vector<std::byte> b(values.size() * 8);
    for (std::size_t i = 0; i < values.size(); ++i)
      modelzip::detail::store_le<std::uint64_t>(b.data() + i * 8,
                                                static_cast<std::uint64_t>(values[i]));
    detail::write_bytes(out, b);
  };
  for (const auto& rec : records) {
    std::byte header[kRecordHeaderSize] = {};
    modelzip::detail::store_le<std::uint64_t>(header, rec.shape.size());
    header[8] = static_cast<std::byte>(rec.code);
    header[9] = static_cast<std::byte>(rec.layout == Layout::dense ? kLayoutDense : kLayoutCoo);
    detail::write_bytes(out, header);
    put_u64s(rec.shape);
    std::uint64_t written = kRecordHeaderSize + 8 * rec.shape.size() + rec.value_bytes;
    if (rec.layout == Layout::sparse_coo) {
      const std::int64_t nnz = static_cast<std::int64_t>(rec.nnz);
      const std::int64_t index_dims[2] = {nnz, static_cast<std::int64_t>(rec.shape.size())};
      put_u64s(index_dims);
      detail::write_bytes(out, rec.indices);
      const std::int64_t value_dims[1] = {nnz};
      put_u64s(value_dims);
      written += 16 + rec.indices.size() + 8;
    }
    rec.write_values(out);
    static constexpr std::byte kZeros[kAlignment] = {};
    detail::write_bytes(out, std::span(kZeros, rec.size - written));
  }
}

}  // namespace

void write_btf(std::ostream& out, std::span<const NamedTensor> tensors) {
  write_records(out, plan(tensors));
}

void write_btf(const std::filesystem::path& path, std::span<const NamedTensor> tensors) {
  auto records = plan(tensors);
  io::write_file_atomically(
      path, [&](std::ostream& out) { write_records(out, records); }, true);
}

namespace detail {

void write_btf_streamed(const std::filesystem::path& path,
                        std::span<const StreamedTensor> tensors) {
  std::vector<PlannedRecord> records;
  for (const auto& t : tensors) {
    if (t.layout != Layout::dense)
      throw Error(ErrorCode::invalid_argument, "BTF: a streamed tensor must be dense");
    records.push_back({t.dtype, t.shape, t.layout, 0, {}, t.nbytes, t.write});
    plan_record(records.back(), t.name);
  }
  io::write_file_atomically(
      path, [&](std::ostream& out) { write_records(out, records); }, true);
}

}  // namespace detail

}  // namespace modelzip::convert
