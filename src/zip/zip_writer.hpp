// (Superseded by StreamZipWriter for checkpoints; kept as the libzip-based
// writer that interoperability tests compare against.)
//
// Writes a new zip archive with libzip, placing the data of every stored
// entry at a 64-byte aligned file offset (so readers can map tensors in
// place) and streaming entry data from the caller's buffers without copying
// it into intermediate buffers.
//
// Alignment: libzip writes a new archive's entries in index order without
// data descriptors, so each local header's offset is known in advance; a
// local-only padding extra field (id kPaddingExtraId) of the right length
// moves the data to the next multiple of 64 (design notes section 2). Stored
// entries are therefore added before all deflated ones. close() re-reads the
// result's directory and fails if any stored entry is misaligned.
//
// Lifetime: the Bytes given to add_* are kept until close() returns.
// Not thread-safe. Errors: Error(io) naming the path; Error(cancelled) when
// the progress callback returns false.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "modelzip/bytes.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_stream_writer.hpp"  // kPaddingExtraId, kDataAlignment

namespace modelzip::zip {

// Fixed modification time of every entry (1980-01-01 12:00 UTC), so that the
// same content always gives the same archive.
inline constexpr std::int64_t kEntryMtime = 315576000;

class LibzipArchive;  // an archive opened for reading (zip_reader.hpp)

class ZipWriter {
 public:
  // `path` must not exist; it is created by close().
  explicit ZipWriter(std::filesystem::path path);
  ~ZipWriter();
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  // An entry whose content is the concatenation of `pieces`.
  void add_stored(std::string name, std::vector<Bytes> pieces);
  void add_deflated(std::string name, std::vector<Bytes> pieces);
  // Copies the compressed data of a deflated entry of `source` unchanged.
  void add_raw_copy(std::string name, std::shared_ptr<LibzipArchive> source,
                    const EntryInfo& entry);

  // Writes the archive. `progress(done, total)` is called with bytes of
  // entry data; returning false cancels. Returns the archive's size.
  std::uint64_t close(const std::function<bool(std::uint64_t, std::uint64_t)>& progress);

 private:
  struct Pending;
  std::filesystem::path path_;
  std::vector<Pending> stored_, deflated_;
};

}  // namespace modelzip::zip
