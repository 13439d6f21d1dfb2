// Fuzz target: the append journal parser (src/io/append_journal), which
// reads a file beside the archive that a crash may have left torn at any
// byte, or anyone may have written.
//
// Invariants, for every input:
//  - parse_append_journal never throws; a journal it accepts has a tail of
//    exactly old_size - tail_start bytes; a version 2 journal re-encodes to
//    the input byte for byte, a version 1 journal has an empty tail at its
//    old size;
//  - the input used as the tail of a new journal round-trips through
//    encode_append_journal and parse_append_journal, and that journal with
//    its last byte cut off, or with any one byte changed, reads as torn
//    (the CRC-32 detects every burst error of up to 32 bits).
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "core/checked.hpp"
#include "fuzz_support.hpp"
#include "io/append_journal.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes input = input_bytes(data, size);
  const std::span<const std::byte> bytes = input.span();
  if (auto j = io::parse_append_journal(bytes)) {
    FUZZ_CHECK(j->old_size >= j->tail_start);
    FUZZ_CHECK(j->tail.size() == j->old_size - j->tail_start);
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (text.starts_with("modelzip-append v3\n")) {
      const std::vector<std::byte> again = io::encode_append_journal(*j);
      FUZZ_CHECK(again.size() == size && (size == 0 || std::memcmp(again.data(), data, size) == 0));
    } else if (text.starts_with("modelzip-append v2\n")) {
      FUZZ_CHECK(j->tags.empty() && size == 47 + j->tail.size());
    } else {
      FUZZ_CHECK(text.starts_with("modelzip-append v1 "));
      FUZZ_CHECK(j->nonce == 0 && j->tail.empty() && j->tail_start == j->old_size);
    }
  }

  // The input as the saved tail of a journal (fields from its first bytes).
  io::AppendJournal made;
  made.nonce = size >= 8 ? detail::load_le<std::uint64_t>(bytes.data()) : size;
  made.tail_start = size >= 16 ? detail::load_le<std::uint64_t>(bytes.data() + 8) >> 8 : 0;
  made.old_size = made.tail_start + size;
  made.tail = input;
  std::vector<std::byte> file = io::encode_append_journal(made);
  auto back = io::parse_append_journal(file);
  FUZZ_CHECK(back && back->nonce == made.nonce && back->tail_start == made.tail_start &&
             back->old_size == made.old_size && back->tail.size() == size &&
             (size == 0 || std::memcmp(back->tail.data(), data, size) == 0));
  FUZZ_CHECK(!io::parse_append_journal(std::span(file).first(file.size() - 1)));
  const std::size_t at = (made.nonce ^ size) % file.size();
  const auto flip = static_cast<std::byte>(size % 255 + 1);  // never 0: the byte changes
  file[at] ^= flip;
  FUZZ_CHECK(!io::parse_append_journal(file));
  return 0;
}
