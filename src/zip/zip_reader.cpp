#include "zip/zip_reader.hpp"

#include <zip.h>
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <future>
#include <vector>

#include "modelzip/error.hpp"

namespace modelzip::zip {
namespace {

[[noreturn]] void corrupt(const EntryInfo& e, const std::string& what) {
  throw Error(ErrorCode::corrupt, what, ErrorContext{.entry = e.name});
}

// Copies `src` to `dst` and returns the CRC-32 of the bytes, in one pass:
// each chunk is checksummed right after it is copied, while it is in cache.
std::uint32_t copy_and_crc(const std::byte* src, std::byte* dst, std::size_t size) noexcept {
  constexpr std::size_t chunk = std::size_t{256} << 10;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (std::size_t done = 0; done < size;) {
    std::size_t n = std::min(chunk, size - done);
    std::memcpy(dst + done, src + done, n);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(dst + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<std::uint32_t>(crc);
}

// An owned, CRC-checked copy of a stored entry's bytes. Large entries are
// split in two halves, one copied on a second thread (the CRCs are combined).
Bytes copy_checked(const Bytes& stored, const EntryInfo& entry) {
  const std::size_t size = stored.size();
  std::shared_ptr<std::byte[]> owned = std::make_shared_for_overwrite<std::byte[]>(size);
  const std::byte* src = stored.data();
  std::byte* dst = owned.get();
  constexpr std::size_t parallel_from = std::size_t{16} << 20;
  std::uint32_t crc;
  if (size >= parallel_from) {
    const std::size_t half = size / 2;
    auto second = std::async(std::launch::async, copy_and_crc, src + half, dst + half, size - half);
    std::uint32_t first = copy_and_crc(src, dst, half);
    crc = crc32_concat(first, second.get(), size - half);
  } else {
    crc = copy_and_crc(src, dst, size);
  }
  if (crc != entry.crc32) corrupt(entry, "CRC-32 mismatch: the entry data is damaged");
  return Bytes::borrow({dst, size}, std::move(owned));
}

}  // namespace

std::uint32_t crc32_of(std::span<const std::byte> data) noexcept {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  std::size_t left = data.size();
  while (left > 0) {
    auto n = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<std::uint32_t>(crc);
}

std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b,
                           std::uint64_t length_b) noexcept {
  return static_cast<std::uint32_t>(
      ::crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(length_b)));
}

LibzipArchive::LibzipArchive(Bytes file) : file_(std::move(file)) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* src = zip_source_buffer_create(file_.data(), file_.size(), 0, &error);
  if (src) {
    za_ = zip_open_from_source(src, ZIP_RDONLY, &error);
    if (!za_) zip_source_free(src);
  }
  if (!za_) {
    std::string msg = zip_error_strerror(&error);
    zip_error_fini(&error);
    throw Error(ErrorCode::corrupt, "libzip cannot open the archive: " + msg);
  }
  zip_error_fini(&error);
}

LibzipArchive::~LibzipArchive() {
  if (za_) zip_discard(za_);
}

std::uint64_t LibzipArchive::index_of(const EntryInfo& entry) const {
  zip_int64_t i = zip_name_locate(za_, entry.name.c_str(), ZIP_FL_ENC_RAW);
  if (i < 0) corrupt(entry, "libzip does not find the entry");
  return static_cast<std::uint64_t>(i);
}

Bytes LibzipArchive::read(const EntryInfo& entry, std::uint64_t length) const {
  std::lock_guard lock(mutex_);
  zip_file_t* f = zip_fopen_index(za_, index_of(entry), 0);
  if (!f) corrupt(entry, std::string("cannot open entry: ") + zip_strerror(za_));
  std::vector<std::byte> out(length);
  std::uint64_t done = 0;
  std::string failure;
  while (done < length) {
    zip_int64_t n =
        zip_fread(f, out.data() + done, std::min<std::uint64_t>(length - done, 1u << 30));
    if (n < 0) {
      failure = zip_error_strerror(zip_file_get_error(f));
      break;
    }
    if (n == 0) {
      failure =
          "data ends after " + std::to_string(done) + " of " + std::to_string(length) + " bytes";
      break;
    }
    done += static_cast<std::uint64_t>(n);
  }
  if (failure.empty() && length == entry.uncompressed_size) {
    // Read past the end so that libzip checks the CRC and the true size.
    std::byte extra;
    zip_int64_t n = zip_fread(f, &extra, 1);
    if (n < 0)
      failure = zip_error_strerror(zip_file_get_error(f));
    else if (n > 0)
      failure = "entry holds more data than its declared size";
  }
  zip_fclose(f);
  if (!failure.empty()) corrupt(entry, "cannot read entry: " + failure);
  return Bytes::take(std::move(out));
}

std::shared_ptr<LibzipArchive> EntryReader::libzip() const {
  std::call_once(libzip_once_, [&] { libzip_ = std::make_shared<LibzipArchive>(file_); });
  return libzip_;
}

Bytes EntryReader::read(const EntryInfo& entry, bool check_crc) const {
  if (entry.stored()) {
    Bytes b = file_.slice(entry.data_offset, entry.compressed_size);
    if (check_crc && crc32_of(b.span()) != entry.crc32)
      corrupt(entry, "CRC-32 mismatch: the entry data is damaged");
    return b;
  }
  return libzip()->read(entry, entry.uncompressed_size);
}

Bytes EntryReader::read_owned(const EntryInfo& entry) const {
  if (entry.stored()) return copy_checked(file_.slice(entry.data_offset, entry.compressed_size), entry);
  return libzip()->read(entry, entry.uncompressed_size);
}

Bytes EntryReader::read_prefix(const EntryInfo& entry, std::uint64_t length) const {
  length = std::min(length, entry.uncompressed_size);
  if (entry.stored()) return file_.slice(entry.data_offset, length);
  return libzip()->read(entry, length);
}

}  // namespace modelzip::zip
