#include "zip/entry_writer.hpp"

#include <zlib.h>

#include <algorithm>

#include "core/checked.hpp"
#include "modelzip/error.hpp"

namespace modelzip::zip {
namespace {

constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::uint64_t k32 = 0xFFFFFFFFull;

void put16(std::vector<std::byte>& out, std::uint16_t v) {
  std::byte b[2];
  detail::store_le(b, v);
  out.insert(out.end(), b, b + 2);
}
void put32(std::vector<std::byte>& out, std::uint32_t v) {
  std::byte b[4];
  detail::store_le(b, v);
  out.insert(out.end(), b, b + 4);
}
void put64(std::vector<std::byte>& out, std::uint64_t v) {
  std::byte b[8];
  detail::store_le(b, v);
  out.insert(out.end(), b, b + 8);
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Length of the padding extra field (header included) that moves data from
// `unpadded` to a multiple of kDataAlignment: 0, or 4..67.
std::uint16_t padding_length(std::uint64_t unpadded) {
  std::uint64_t pad = (kDataAlignment - unpadded % kDataAlignment) % kDataAlignment;
  if (pad != 0 && pad < 4) pad += kDataAlignment;
  return static_cast<std::uint16_t>(pad);
}

void check_name(std::string_view name) {
  if (name.size() > 0xFFFF)
    throw Error(ErrorCode::invalid_argument, "entry name longer than 65535 bytes",
                ErrorContext{.entry = std::string(name.substr(0, 200))});
}

// The local header's length for `plan` (name, zip64 and alignment set) at
// its local_offset.
std::uint64_t header_length(const EntryPlan& plan) {
  check_name(plan.name);
  const std::uint64_t unpadded = 30 + plan.name.size() + (plan.zip64 ? 20 : 0);
  const std::uint64_t at = detail::checked_add(plan.local_offset, unpadded, "archive");
  return unpadded + (plan.aligned ? padding_length(at) : 0);
}

EntryPlan placed(EntryPlan plan) {
  plan.data_offset = plan.local_offset + header_length(plan);
  detail::checked_add(plan.data_offset, plan.compressed, "archive");
  return plan;
}

}  // namespace

std::vector<std::byte> encode_local_header(const LocalHeader& w, std::uint64_t offset, bool align) {
  const std::string_view name = w.name;
  check_name(name);
  const bool zip64 = w.zip64;
  const std::uint64_t zip64_len = zip64 ? 20 : 0;
  const std::uint16_t pad = align ? padding_length(offset + 30 + name.size() + zip64_len) : 0;
  std::vector<std::byte> h;
  h.reserve(30 + name.size() + zip64_len + pad);
  put32(h, kLocalSignature);
  put16(h, zip64 ? 45 : 20);
  put16(h, w.flags);
  put16(h, w.method);
  put16(h, kDosTime);
  put16(h, kDosDate);
  put32(h, w.crc);
  put32(h, zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.compressed));
  put32(h, zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(w.uncompressed));
  put16(h, static_cast<std::uint16_t>(name.size()));
  put16(h, static_cast<std::uint16_t>(zip64_len + pad));
  const auto* text = reinterpret_cast<const std::byte*>(name.data());
  h.insert(h.end(), text, text + name.size());
  if (zip64) {
    put16(h, 0x0001);
    put16(h, 16);
    put64(h, w.uncompressed);
    put64(h, w.compressed);
  }
  if (pad) {
    put16(h, kPaddingExtraId);
    put16(h, static_cast<std::uint16_t>(pad - 4));
    h.insert(h.end(), pad - 4u, std::byte{0});
  }
  return h;
}

std::uint16_t name_flags(std::string_view name) noexcept {
  return is_ascii(name) ? 0 : 0x0800;
}

std::vector<std::byte> EntryPlan::local_header(std::uint32_t crc) const {
  return encode_local_header(LocalHeader{.name = name,
                                         .method = method,
                                         .flags = flags,
                                         .crc = crc,
                                         .compressed = compressed,
                                         .uncompressed = uncompressed,
                                         .zip64 = zip64},
                             local_offset, aligned);
}

EntryInfo EntryPlan::info(std::uint32_t crc) const {
  EntryInfo e;
  e.name = name;
  e.method = method;
  e.flags = flags;
  e.crc32 = crc;
  e.compressed_size = compressed;
  e.uncompressed_size = uncompressed;
  e.local_header_offset = local_offset;
  e.data_offset = data_offset;
  e.area_end = end();
  return e;
}

EntryPlan plan_stored(std::string name, std::uint64_t local_offset, std::uint64_t size) {
  EntryPlan p;
  p.flags = name_flags(name);
  p.name = std::move(name);
  p.local_offset = local_offset;
  p.compressed = p.uncompressed = size;
  p.zip64 = needs_zip64_local(size);
  p.aligned = true;
  return placed(std::move(p));
}

EntryPlan plan_deflated(std::string name, std::uint64_t local_offset, std::uint64_t uncompressed) {
  EntryPlan p;
  p.flags = name_flags(name);
  p.name = std::move(name);
  p.method = kMethodDeflate;
  p.local_offset = local_offset;
  p.uncompressed = uncompressed;
  p.zip64 = uncompressed >= k32 || ::deflateBound(nullptr, static_cast<uLong>(uncompressed)) >= k32;
  return placed(std::move(p));
}

EntryPlan plan_copy(std::string name, const EntryInfo& e, std::uint64_t local_offset) {
  EntryPlan p;
  p.flags = static_cast<std::uint16_t>((e.flags & 0x0800) | name_flags(name));
  p.name = std::move(name);
  p.method = e.method;
  p.local_offset = local_offset;
  p.compressed = e.compressed_size;
  p.uncompressed = e.uncompressed_size;
  p.zip64 = std::max(p.compressed, p.uncompressed) >= k32;
  p.aligned = e.method == kMethodStore;
  return placed(std::move(p));
}

EntryInfo write_entry(io::ByteSink& sink, const EntryPlan& plan, std::uint32_t crc,
                      std::span<const std::byte> data) {
  return write_entry(sink, plan, crc, std::vector<Bytes>{Bytes::borrow(data, nullptr)});
}

EntryInfo write_entry(io::ByteSink& sink, const EntryPlan& plan, std::uint32_t crc,
                      const std::vector<Bytes>& pieces) {
  std::uint64_t size = 0;
  for (const Bytes& p : pieces) size += p.size();
  if (size != plan.compressed)
    throw Error(ErrorCode::invalid_argument,
                "entry data of " + std::to_string(size) + " bytes for a plan of " +
                    std::to_string(plan.compressed),
                ErrorContext{.entry = plan.name});
  std::vector<std::byte> out = plan.local_header(crc);
  out.reserve(out.size() + size);
  for (const Bytes& p : pieces) out.insert(out.end(), p.data(), p.data() + p.size());
  sink.write(plan.local_offset, Bytes::take(std::move(out)));
  return plan.info(crc);
}

EntryInfo finish_entry(io::ByteSink& sink, const EntryPlan& plan, std::uint32_t crc) {
  sink.write(plan.local_offset, Bytes::take(plan.local_header(crc)));
  return plan.info(crc);
}

EntryWriter::EntryWriter(io::ByteSink& sink, EntryPlan plan) : sink_(sink), plan_(std::move(plan)) {
  sink_.reserve(io::ByteRange{plan_.local_offset, plan_.header_size()});
}

EntryInfo EntryWriter::finish(std::uint32_t crc) {
  return finish_entry(sink_, plan_, crc);
}

EntryInfo EntryWriter::finish(std::uint32_t crc, std::uint64_t compressed) {
  if (!plan_.zip64 && compressed >= k32)
    throw Error(ErrorCode::io, "deflated entry exceeded its size estimate",
                ErrorContext{.entry = plan_.name});
  plan_.compressed = compressed;
  return finish_entry(sink_, plan_, crc);
}

}  // namespace modelzip::zip
