// Fuzz target: the zip layer alone (src/zip), below the archive format, so
// the fuzzer explores zip structures without needing a valid tags.txt.
// parse_directory, then every entry read whole (CRC checked), owned, and
// as a prefix.
//
// Invariants: every entry the directory accepts lies inside the file and a
// read entry has its declared uncompressed size.
#include <algorithm>
#include <cstdint>

#include "fuzz_support.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"

using namespace modelzip;
namespace mzip = modelzip::zip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes file = input_bytes(data, size);
  const Limits limits;
  mzip::Directory directory;
  if (!attempt([&] { directory = mzip::parse_directory(file.span(), limits); })) return 0;
  FUZZ_CHECK(directory.end_of_archive <= size);
  mzip::EntryReader reader(file, limits);
  for (const mzip::EntryInfo& entry : directory.entries) {
    FUZZ_CHECK(entry.data_offset <= size && entry.compressed_size <= size - entry.data_offset);
    for (bool check_crc : {false, true}) {
      attempt([&] {
        Bytes contents = reader.read(entry, check_crc);
        FUZZ_CHECK(contents.size() == entry.uncompressed_size);
        keep(touch(contents));
      });
    }
    attempt([&] {
      Bytes contents = reader.read_owned(entry);
      FUZZ_CHECK(contents.size() == entry.uncompressed_size);
      keep(touch(contents));
    });
    attempt([&] {
      const std::uint64_t length = std::min<std::uint64_t>(entry.uncompressed_size, 100);
      Bytes prefix = reader.read_prefix(entry, length);
      FUZZ_CHECK(prefix.size() == length);
      keep(touch(prefix));
    });
  }
  return 0;
}
