#include "zip/archive_snapshot.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "io/append_journal.hpp"
#include "io/file_identity.hpp"
#include "io/mapped_file.hpp"
#include "io/posix_file.hpp"
#include "modelzip/error.hpp"
#include "zip/archive_layout.hpp"

namespace modelzip::zip {
namespace {

io::FileIdentity identity_of(int fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) io::throw_errno(path, "cannot stat");
  io::require_regular_file(st, path);
  auto ns = [](const timespec& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  return io::FileIdentity{static_cast<std::uint64_t>(st.st_dev),
                          static_cast<std::uint64_t>(st.st_ino),
                          static_cast<std::uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
}

// The file's bytes [from, to) into owned memory.
std::vector<std::byte> read_range(int fd, const std::filesystem::path& path, std::uint64_t from,
                                  std::uint64_t to) {
  std::vector<std::byte> out(static_cast<std::size_t>(to - from));
  // A file that shrank meanwhile gives fewer bytes: the identity check sees it.
  out.resize(io::pread_full(fd, out.data(), out.size(), from, path));
  return out;
}

// The whole file mapped as it is now (a live view: it may change).
Bytes map_live(int fd, const std::filesystem::path& path, std::uint64_t size) {
  if (size == 0) return Bytes();
  void* address = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) io::throw_errno(path, "cannot map");
  struct Unmap {
    Unmap(void* address, std::size_t length) : a(address), n(length) {}
    Unmap(const Unmap&) = delete;
    Unmap& operator=(const Unmap&) = delete;
    ~Unmap() { ::munmap(a, n); }
    void* a;
    std::size_t n;
  };
  auto keeper = std::make_shared<const Unmap>(address, static_cast<std::size_t>(size));
  return Bytes::borrow(std::span<const std::byte>(static_cast<const std::byte*>(address), size),
                       keeper);
}

// The journal state of `path`: beside the name as given, or, when that is
// a symbolic link, beside its target (where a writer that resolves links
// keeps it).
io::JournalState journal_state(const std::filesystem::path& path,
                               const std::filesystem::path& resolved) {
  io::JournalState state = io::read_append_journal(path);
  if (state.kind == io::JournalState::Kind::absent && resolved != path)
    state = io::read_append_journal(resolved);
  return state;
}

// `state` without the journal's copy of the tail (same_as needs no bytes).
io::JournalState without_tail(io::JournalState state) {
  state.journal.tail = Bytes();
  state.journal.tags.clear();
  return state;
}

// The path the journal of `path` is looked for beside, besides its own:
// its target when it is a symbolic link.
std::filesystem::path resolved_path(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return path;
  std::filesystem::path resolved = std::filesystem::canonical(path, ec);
  return ec ? path : resolved;
}

// What made an attempt start again.
enum class Change { none, journal, file };

// What changed since `path` was seen with journal state `journal` and,
// when `identity` is given, the file open as `fd` had that identity: the
// journal state first, then the file's identity.
Change change_since(const std::filesystem::path& path, const std::filesystem::path& resolved,
                    const io::JournalState& journal, int fd, const io::FileIdentity* identity) {
  if (!journal_state(path, resolved).same_as(journal)) return Change::journal;
  if (identity && !(identity_of(fd, path) == *identity)) return Change::file;
  return Change::none;
}

// The same for the snapshot `file` of `path`.
Change change_since(const std::filesystem::path& path, const std::filesystem::path& resolved,
                    const SnapshotFile& file) {
  return change_since(path, resolved, file.journal, file.fd->get(),
                      file.identity ? &*file.identity : nullptr);
}

// One attempt of the reader protocol (FORMAT.md 8.3, steps 1 to 4): the
// snapshot it accepted, or nullopt and `*change` set when the journal or
// the file changed during it.
std::optional<Snapshot> attempt_snapshot(const std::filesystem::path& path,
                                         const std::filesystem::path& resolved,
                                         std::string_view tail_entry, const Limits& limits,
                                         Change* change) {
  using Kind = io::JournalState::Kind;
  const io::JournalState before = journal_state(path, resolved);
  io::UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.valid()) io::throw_errno(path, "cannot open");
  const io::FileIdentity id = identity_of(f.get(), path);

  if (before.kind == Kind::valid) {
    const io::AppendJournal& j = before.journal;
    const bool fits = id.size >= j.tail_start;
    Bytes snapshot;
    if (fits) snapshot = io::map_prefix_with_tail(f.get(), path, j.tail_start, j.tail.span());
    // The same journal still there: it existed all along, so the file we
    // opened is its archive (no rewrite happens while a journal exists).
    if ((*change = change_since(path, resolved, before, f.get(), nullptr)) != Change::none)
      return std::nullopt;
    if (!fits)
      throw Error(ErrorCode::corrupt,
                  "the append journal saves a tail from offset " + std::to_string(j.tail_start) +
                      ", but the archive has only " + std::to_string(id.size) + " bytes (remove " +
                      io::append_journal_path(path).filename().string() +
                      " if it does not belong to this archive)",
                  ErrorContext{.archive = path.string()});
    return Snapshot{std::move(snapshot),
                    std::nullopt,
                    {std::make_shared<const io::UniqueFd>(std::move(f)),
                     j.tail_start,
                     {},
                     without_tail(before)}};
  }

  // No journal (or a torn one): the file is the archive, unless a writer
  // changes its tail while we look. Map it only once the journal state and
  // the identity are confirmed after the first look: a size taken while no
  // append was in progress is one the file never shrinks below (a
  // rolled-back append restores the size it started from), so the mapping
  // cannot fault.
  auto changed = [&] {
    return (*change = change_since(path, resolved, before, f.get(), &id)) != Change::none;
  };
  if (changed()) return std::nullopt;
  std::optional<Directory> parsed;
  std::optional<Error> parse_error;
  std::uint64_t tail_from = id.size;
  {
    Bytes live = map_live(f.get(), path, id.size);
    try {
      parsed = parse_directory(live.span(), limits);
      tail_from = tail_start(*parsed, tail_entry);
    } catch (const Error& e) {
      parse_error = e;
    }
  }
  const std::vector<std::byte> tail = read_range(f.get(), path, tail_from, id.size);
  if (changed()) return std::nullopt;
  if (parse_error) throw *parse_error;
  Bytes snapshot = io::map_prefix_with_tail(f.get(), path, tail_from, tail);
  return Snapshot{
      std::move(snapshot),
      std::move(parsed),
      {std::make_shared<const io::UniqueFd>(std::move(f)), tail_from, id, without_tail(before)}};
}

}  // namespace

bool snapshot_current(const std::filesystem::path& path, const SnapshotFile& file) {
  return file.fd && change_since(path, resolved_path(path), file) == Change::none;
}

bool same_file(const std::filesystem::path& path, const SnapshotFile& file) {
  if (!file.fd) return false;
  const std::optional<io::FileIdentity> now = io::identity_of(path);
  if (!now) return false;
  const io::FileIdentity mine = identity_of(file.fd->get(), path);
  return now->device == mine.device && now->inode == mine.inode;
}

std::optional<Directory> current_directory(const std::filesystem::path& path,
                                           std::string_view tail_entry, const SnapshotFile& file,
                                           const Limits& limits) {
  if (!file.fd) return std::nullopt;
  const io::FileIdentity mine = identity_of(file.fd->get(), path);
  std::optional<Directory> out;
  read_snapshot(path, tail_entry, limits, [&](Snapshot& now) {
    out.reset();
    const io::FileIdentity theirs = identity_of(now.file.fd->get(), path);
    if (theirs.device != mine.device || theirs.inode != mine.inode) return;
    out = now.directory ? std::move(*now.directory) : parse_directory(now.bytes.span(), limits);
  });
  return out;
}

std::optional<SnapshotFile> same_committed_state(const std::filesystem::path& path,
                                                 std::string_view tail_entry,
                                                 const SnapshotFile& file, const Bytes& bytes,
                                                 const Limits& limits) {
  if (!file.fd || file.stable_prefix > bytes.size()) return std::nullopt;
  const io::FileIdentity mine = identity_of(file.fd->get(), path);
  const std::span<const std::byte> my_tail = bytes.span().subspan(file.stable_prefix);
  std::optional<SnapshotFile> out;
  try {
    read_snapshot(path, tail_entry, limits, [&](Snapshot& now) {
      out.reset();
      const io::FileIdentity theirs = identity_of(now.file.fd->get(), path);
      if (theirs.device != mine.device || theirs.inode != mine.inode ||
          now.file.stable_prefix != file.stable_prefix || now.bytes.size() != bytes.size())
        return;
      const std::span<const std::byte> tail = now.bytes.span().subspan(now.file.stable_prefix);
      if (!std::equal(tail.begin(), tail.end(), my_tail.begin(), my_tail.end())) return;
      out = SnapshotFile{file.fd, now.file.stable_prefix, now.file.identity, now.file.journal};
    });
  } catch (const Error&) {  // does not parse, kept changing: not the state it was
    return std::nullopt;
  }
  return out;
}

bool same_entry(const Directory& now, const EntryInfo& entry) {
  const EntryInfo* e = now.find(entry.name);
  return e && e->local_header_offset == entry.local_header_offset && e->method == entry.method &&
         e->crc32 == entry.crc32 && e->compressed_size == entry.compressed_size &&
         e->uncompressed_size == entry.uncompressed_size;
}

void read_snapshot(const std::filesystem::path& path, std::string_view tail_entry,
                   const Limits& limits, const std::function<void(Snapshot&)>& use) {
  const std::filesystem::path resolved = resolved_path(path);
  int journal_changes = 0;
  int file_changes = 0;
  for (int attempt = 0; attempt < kSnapshotAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(attempt, 10)));
    Change change = Change::none;
    if (std::optional<Snapshot> snapshot =
            attempt_snapshot(path, resolved, tail_entry, limits, &change)) {
      const SnapshotFile file = snapshot->file;  // `use` may move from the snapshot
      std::exception_ptr use_error;
      try {
        use(*snapshot);
      } catch (const Error&) {
        use_error = std::current_exception();
      }
      change = change_since(path, resolved, file);
      if (change == Change::none) {
        if (use_error) std::rethrow_exception(use_error);
        return;
      }
    }
    ++(change == Change::journal ? journal_changes : file_changes);
  }
  errno = EAGAIN;
  io::throw_errno(path, "the archive kept changing while it was being opened: in each of " +
                            std::to_string(kSnapshotAttempts) + " attempts its append journal (" +
                            std::to_string(journal_changes) +
                            " times) or the file's size or times (" + std::to_string(file_changes) +
                            " times) changed while it was read");
}

}  // namespace modelzip::zip
