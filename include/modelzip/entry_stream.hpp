// EntryStream: one zip entry of an Archive read front to back in parts.
//
// Each read continues where the last one ended, so a deflated entry is
// decompressed once, however many parts it is read in (Archive::entry_part
// decompresses it from its start on every call: a walk through an entry in
// parts with entry_part costs the square of the number of parts). Memory is
// bounded by the caller's buffer and zlib's state, whatever the entry's size.
//
// Lifetime: a stream keeps the archive's state alive (it stays usable after
// the Archive is destroyed). A remote archive's deflated entry is fetched
// whole when the stream is opened, a stored one part by part as it is read.
//
// Thread safety: one thread at a time (a read moves the position); several
// streams, of one entry or several, may be read at once.
//
// Errors: open throws Error(not_found) for a missing entry. A read throws
// Error(corrupt) naming the archive and the entry for damaged data (invalid
// deflate data, a size or CRC-32 other than the declared one), or Error(io)
// when those bytes do not match because another writer changed the file
// since the Archive opened it (as Archive::entry_part); after a failure,
// every read throws it again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "modelzip/archive.hpp"
#include "modelzip/export.hpp"

namespace modelzip {

class MODELZIP_API EntryStream {
 public:
  // A stream at the start of entry `entry_name` of `archive`.
  static EntryStream open(const Archive& archive, std::string_view entry_name);
  // A braced list of strings where the entry name goes (`open(a, {"a",
  // "b"})`, which would make the name string_view("a", "b"): undefined
  // behaviour) does not compile (error.hpp, detail::braced_list_is_a_tag).
  template <std::size_t N>
  requires(N >= 2) static EntryStream open(const Archive& archive, const char* const (&)[N]) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "open(archive, {\"a\", \"b\"}): an entry name is one string, as in "
                  "open(archive, \"step-1/params.txt\")");
    return open(archive, std::string_view{});
  }

  EntryStream(EntryStream&&) noexcept;
  EntryStream& operator=(EntryStream&&) noexcept;
  ~EntryStream();

  // Copies the next bytes of the entry into `out` and returns how many:
  // out.size(), or fewer at the entry's end, 0 once it is read (or for an
  // empty `out`). The read that returns the last bytes checks the entry's
  // size and CRC-32 before returning. On a moved-from stream, throws
  // Error(invalid_argument).
  std::size_t read(std::span<std::byte> out);
  // Bytes read so far.
  std::uint64_t position() const noexcept;
  // The entry's size, as Archive::entry_size declares it.
  std::uint64_t size() const noexcept;
  // Whether the entry's data is compressed (deflated), rather than stored,
  // as the central directory declares it, known without reading it: a
  // stored entry's Archive::entry_part is a view of the archive, a
  // compressed one's is decompressed. False on a moved-from stream.
  bool compressed() const noexcept;

  // The stream's state (opaque: defined and used only inside modelzip).
  struct State;

 private:
  explicit EntryStream(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace modelzip
