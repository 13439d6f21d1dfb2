#include "io/append_journal.hpp"
#include "io/posix_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/crc32.hpp"
#include "io/durable_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kMagicV3 = "modelzip-append v3\n";
constexpr std::string_view kMagicV2 = "modelzip-append v2\n";
constexpr std::string_view kMagicV1 = "modelzip-append v1 ";
constexpr std::size_t kHeaderV2 = 19 + 8 + 8 + 8;  // magic, nonce, tail_start, old_size
constexpr std::size_t kHeaderV3 = kHeaderV2 + 8;   // ... and the tag list's length

fs::path folder_of(const fs::path& p) {
  return p.parent_path().empty() ? fs::path(".") : p.parent_path();
}

using io::throw_errno;

// fsyncs the archive's folder; errors name the archive.
void sync_folder(const fs::path& archive, const char* after) {
  try {
    sync_path(folder_of(archive), true);
  } catch (const Error& e) {
    throw Error(ErrorCode::io,
                std::string("cannot fsync the folder after ") + after + ": " + e.message() + " (" +
                    e.context().archive + ")",
                ErrorContext{.archive = archive.string()});
  }
}

}  // namespace

std::optional<AppendJournal> parse_append_journal(std::span<const std::byte> bytes) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.starts_with(kMagicV1)) {
    std::string_view number = text.substr(kMagicV1.size());
    if (!number.ends_with("\n")) return std::nullopt;
    number.remove_suffix(1);
    std::uint64_t size = 0;
    auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), size);
    if (ec != std::errc() || p != number.data() + number.size() || number.empty())
      return std::nullopt;
    return AppendJournal{0, size, size, Bytes()};
  }
  const bool v3 = text.starts_with(kMagicV3);
  if (!v3 && !text.starts_with(kMagicV2)) return std::nullopt;
  const std::size_t header = v3 ? kHeaderV3 : kHeaderV2;
  if (bytes.size() < header + 4) return std::nullopt;
  AppendJournal j;
  j.nonce = detail::load_le<std::uint64_t>(bytes.data() + 19);
  j.tail_start = detail::load_le<std::uint64_t>(bytes.data() + 27);
  j.old_size = detail::load_le<std::uint64_t>(bytes.data() + 35);
  const std::uint64_t tags = v3 ? detail::load_le<std::uint64_t>(bytes.data() + 43) : 0;
  if (j.old_size < j.tail_start) return std::nullopt;
  const std::uint64_t tail = j.old_size - j.tail_start;
  const std::uint64_t room = bytes.size() - header - 4;  // tags + tail
  if (tags > room || tail != room - tags) return std::nullopt;
  const std::size_t crc_at = bytes.size() - 4;
  if (detail::crc32_of(std::span(bytes.data(), crc_at)) !=
      detail::load_le<std::uint32_t>(bytes.data() + crc_at))
    return std::nullopt;
  std::string_view list(text.substr(header, static_cast<std::size_t>(tags)));
  if (!list.empty() && !list.ends_with('\n')) return std::nullopt;
  for (std::size_t at = 0; at < list.size();) {
    const std::size_t end = list.find('\n', at);
    j.tags.emplace_back(list.substr(at, end - at));
    at = end + 1;
  }
  j.tail = Bytes::copy_of(
      std::span<const std::byte>(bytes.data() + header + static_cast<std::size_t>(tags), tail));
  return j;
}

std::vector<std::byte> encode_append_journal(const AppendJournal& journal) {
  if (journal.old_size < journal.tail_start ||
      journal.tail.size() != journal.old_size - journal.tail_start)
    throw Error(ErrorCode::invalid_argument, "append journal: tail size mismatch");
  std::string list;
  for (const auto& t : journal.tags) {
    if (t.find('\n') != std::string::npos)
      throw Error(ErrorCode::invalid_argument, "append journal: a tag holds a line break");
    list += t + "\n";
  }
  const std::size_t tail = journal.tail.size();
  const std::size_t body = kHeaderV3 + list.size() + tail;
  std::vector<std::byte> out(body + 4);
  std::memcpy(out.data(), kMagicV3.data(), kMagicV3.size());
  detail::store_le<std::uint64_t>(out.data() + 19, journal.nonce);
  detail::store_le<std::uint64_t>(out.data() + 27, journal.tail_start);
  detail::store_le<std::uint64_t>(out.data() + 35, journal.old_size);
  detail::store_le<std::uint64_t>(out.data() + 43, list.size());
  if (!list.empty()) std::memcpy(out.data() + kHeaderV3, list.data(), list.size());
  if (tail > 0) std::memcpy(out.data() + kHeaderV3 + list.size(), journal.tail.data(), tail);
  detail::store_le<std::uint32_t>(out.data() + body, detail::crc32_of(std::span(out.data(), body)));
  return out;
}

bool JournalState::same_as(const JournalState& other) const noexcept {
  if (kind != other.kind) return false;
  switch (kind) {
    case Kind::absent:
      return true;
    case Kind::valid:
      return journal.nonce == other.journal.nonce &&
             journal.tail_start == other.journal.tail_start &&
             journal.old_size == other.journal.old_size;
    case Kind::torn:
      return identity == other.identity;
  }
  return false;
}

fs::path append_journal_path(const fs::path& archive) {
  return folder_of(archive) / ("." + archive.filename().string() + ".modelzip-append");
}

JournalState read_append_journal(const fs::path& archive) {
  const fs::path path = append_journal_path(archive);
  JournalState state;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return state;
    throw_errno(path, "cannot open the append journal");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno(path, "cannot stat the append journal");
  auto ns = [](const timespec& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  state.identity =
      FileIdentity{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                   static_cast<std::uint64_t>(st.st_size), ns(st.st_mtim), ns(st.st_ctim)};
  state.kind = JournalState::Kind::torn;
  if (!S_ISREG(st.st_mode)) return state;
  // Read what is there (one byte more than fstat said, to see growth).
  std::vector<std::byte> bytes(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(path, "cannot read the append journal");
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  if (auto j = parse_append_journal(bytes)) {
    state.kind = JournalState::Kind::valid;
    state.journal = std::move(*j);
  }
  return state;
}

std::uint64_t new_journal_nonce() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

void write_append_journal(const fs::path& archive, const AppendJournal& journal, bool durable) {
  const fs::path path = append_journal_path(archive);
  std::vector<std::byte> bytes;
  try {
    bytes = encode_append_journal(journal);
  } catch (const Error& e) {
    throw e.with_context({.archive = archive.string()});
  }

  int fd = sys::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {  // names the folder: a user may write the archive but not beside it
    std::string folder = folder_of(archive).string();
    if (folder.back() != '/') folder += '/';
    throw_errno(path,
                "cannot create the append journal " + path.filename().string() + " in " + folder);
  }
  bool ok = true;
  std::uint64_t offset = 0;
  auto put = [&](const std::byte* data, std::size_t size) {
    while (ok && size > 0) {
      ssize_t n =
          sys::pwrite(fd, data, std::min<std::size_t>(size, 1u << 30), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) errno = ENOSPC;
      ok = n > 0;
      if (ok) {
        data += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
      }
    }
  };
  put(bytes.data(), bytes.size());
  ok = ok && (!durable || sys::fsync(fd) == 0);
  int error = ok ? 0 : errno;
  if (sys::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    // A partial journal reads as torn; remove it all the same.
    sys::unlink(path.c_str());
    errno = error;
    throw_errno(path, "cannot write the append journal");
  }
  if (!durable) return;
  try {
    sync_folder(archive, "writing the append journal");
  } catch (const Error&) {
    sys::unlink(path.c_str());
    throw;
  }
}

void remove_append_journal(const fs::path& archive, bool durable, bool* removed) {
  if (removed) *removed = false;
  if (sys::unlink(append_journal_path(archive).c_str()) != 0 && errno != ENOENT)
    throw_errno(append_journal_path(archive), "cannot remove the append journal");
  if (removed) *removed = true;
  if (durable) sync_folder(archive, "removing the append journal");
}

}  // namespace modelzip::io
