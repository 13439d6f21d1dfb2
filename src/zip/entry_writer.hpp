// The one writer of zip entries (FORMAT.md section 1): every new entry of
// every writer (StreamZipWriter, the collective commit's ranks and root,
// the append path) is placed, written and finished through these, so that
// local headers and central records agree byte for byte whoever writes:
//  1. EntryPlan: reserve an entry at an offset: its local header's length
//     (the alignment padding extra field 0x7A6D for stored data, the ZIP64
//     extra field where the sizes need it, the UTF-8 flag for non-ASCII
//     names) and so where its data starts and ends. Pure, no I/O.
//  2. write its pieces at offsets in its data into an io::ByteSink, from
//     any thread, or any rank with its own sink onto the same result;
//  3. finish it with its CRC: the local header, written once (a sink
//     holds its range back until then: EntryWriter reserves it), and the
//     entry's central-directory EntryInfo.
//
// Thread safety: EntryPlan is a value; EntryWriter::write may be called
// from several threads if the sink allows it (io::ByteSink does),
// finish() once after every write. Errors: Error(invalid_argument) for a
// name over 65535 bytes or sizes the plan cannot hold; the sink's errors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/byte_sink.hpp"
#include "modelzip/bytes.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::zip {

inline constexpr std::uint16_t kPaddingExtraId = 0x7A6D;  // "mz"
inline constexpr std::uint64_t kDataAlignment = 64;
// DOS time of every entry: 1980-01-01 12:00, so equal content gives equal archives.
inline constexpr std::uint16_t kDosTime = 12u << 11;
inline constexpr std::uint16_t kDosDate = (1u << 5) | 1u;

// The fields of a local header, and its bytes for a header written at
// `offset`: with `align`, a padding extra field moves the data to a multiple
// of kDataAlignment; `zip64` adds the ZIP64 extra field (sizes in it, 32-bit
// fields 0xFFFFFFFF). Prefer EntryPlan, which decides these; this is for
// code that checks or repairs headers (free ranges, tests).
struct LocalHeader {
  std::string_view name;
  std::uint16_t method = kMethodStore;
  std::uint16_t flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0, uncompressed = 0;
  bool zip64 = false;
};
std::vector<std::byte> encode_local_header(const LocalHeader& header, std::uint64_t offset,
                                           bool align);
// General purpose flags for an entry name: bit 11 (UTF-8) unless ASCII.
std::uint16_t name_flags(std::string_view name) noexcept;
// Whether a stored entry of `size` bytes gets the ZIP64 local extra field.
inline bool needs_zip64_local(std::uint64_t size) noexcept {
  return size >= 0xFFFFFFFFull;
}

// Where a new entry lies and what its headers say.
struct EntryPlan {
  std::string name;
  std::uint16_t method = kMethodStore;
  std::uint16_t flags = 0;
  std::uint64_t local_offset = 0;
  std::uint64_t data_offset = 0;  // local_offset + the local header's length
  // Sizes of the data; a deflated entry's compressed size is known only at
  // finish (0 until then).
  std::uint64_t compressed = 0, uncompressed = 0;
  bool zip64 = false;    // ZIP64 extra field in the local header
  bool aligned = false;  // data at a multiple of kDataAlignment (stored entries)

  std::uint64_t end() const noexcept { return data_offset + compressed; }
  std::uint64_t header_size() const noexcept { return data_offset - local_offset; }
  // The local header's bytes with `crc` (and the plan's sizes).
  std::vector<std::byte> local_header(std::uint32_t crc) const;
  // The entry's central-directory record with `crc`.
  EntryInfo info(std::uint32_t crc) const;
};

// A new stored entry `name` of `size` bytes with its local header at
// `local_offset` (data aligned; ZIP64 from 4 GiB - 1).
EntryPlan plan_stored(std::string name, std::uint64_t local_offset, std::uint64_t size);
// A new deflated entry of `uncompressed` bytes (not aligned; ZIP64 when
// the uncompressed size or zlib's bound on the compressed one needs it).
EntryPlan plan_deflated(std::string name, std::uint64_t local_offset, std::uint64_t uncompressed);
// A copy named `name` of the entry `e` of another archive, its compressed
// bytes as they are (method, CRC, sizes kept; aligned if stored; the UTF-8
// flag from `e` or the new name).
EntryPlan plan_copy(std::string name, const EntryInfo& e, std::uint64_t local_offset);

// The complete entry `plan` with `crc` whose data is `data` (plan.compressed
// bytes), written into `sink` with its header in one write; returns its
// central-directory record. For entries whose CRC is known before writing.
EntryInfo write_entry(io::ByteSink& sink, const EntryPlan& plan, std::uint32_t crc,
                      std::span<const std::byte> data);
// The same with the data in pieces (concatenated).
EntryInfo write_entry(io::ByteSink& sink, const EntryPlan& plan, std::uint32_t crc,
                      const std::vector<Bytes>& pieces);
// Finishes an entry whose data is written: its local header with `crc`
// into `sink` (whose range was reserved, or left to this call), and its
// central-directory record. The root of a collective commit finishes the
// entries the ranks wrote this way.
EntryInfo finish_entry(io::ByteSink& sink, const EntryPlan& plan, std::uint32_t crc);

// An entry whose data is written in pieces before its CRC is known: the
// header's range is reserved in the sink at construction and written by
// finish(). The sink must outlive the writer.
class EntryWriter {
 public:
  EntryWriter(io::ByteSink& sink, EntryPlan plan);
  const EntryPlan& plan() const noexcept { return plan_; }
  // `piece` at `offset` in the entry's data (sink lifetime rules).
  void write(std::uint64_t offset, const Bytes& piece) {
    sink_.write(plan_.data_offset + offset, piece);
  }
  void write_copy(std::uint64_t offset, std::span<const std::byte> piece) {
    sink_.write_copy(plan_.data_offset + offset, piece);
  }
  // Writes the local header with `crc`; for a deflated entry, also the
  // compressed size now known. Returns the central-directory record.
  // Error(io) if a deflated entry outgrew what its header can hold.
  EntryInfo finish(std::uint32_t crc);
  EntryInfo finish(std::uint32_t crc, std::uint64_t compressed);

 private:
  io::ByteSink& sink_;
  EntryPlan plan_;
};

}  // namespace modelzip::zip
