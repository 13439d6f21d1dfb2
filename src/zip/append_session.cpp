#include "zip/append_session.hpp"
#include "io/posix_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "io/append_journal.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"
#include "zip/archive_layout.hpp"

namespace modelzip::zip {
namespace fs = std::filesystem;
namespace {

void write_all(int fd, const fs::path& path, std::uint64_t offset, const Bytes& bytes) {
  io::pwrite_full(fd, bytes.data(), bytes.size(), offset, ErrorContext{.archive = path.string()},
                  "cannot write the previous tail back");
}

std::int64_t mtime_ns(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return 0;
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Gives the file a modification time other than `not_ns` (readers compare
// identities; writes within one clock tick may leave it unchanged).
void bump_mtime(int fd, std::int64_t not_ns) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  std::int64_t ns = static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  if (ns <= not_ns) ns = not_ns + 1;
  const timespec times[2] = {
      {0, UTIME_OMIT}, {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)}};
  ::futimens(fd, times);  // best effort: the size or change time usually differ anyway
}

// Writes `tail` back at `start`, cuts the file to start + tail size, fsyncs.
void restore_tail(int fd, const fs::path& path, std::uint64_t start, const Bytes& tail,
                  bool durable, std::int64_t old_mtime) {
  write_all(fd, path, start, tail);
  if (io::sys::ftruncate(fd, static_cast<off_t>(start + tail.size())) != 0)
    io::throw_errno(path, "cannot cut the archive back to its previous size");
  if (durable && io::sys::fsync(fd) != 0)
    io::throw_errno(path, "cannot fsync the restored archive");
  bump_mtime(fd, old_mtime);
}

}  // namespace

AppendSession::AppendSession(fs::path path, const Directory& directory, const Bytes& file,
                             std::string tail_entry, Options options)
    : path_(std::move(path)), tail_entry_(std::move(tail_entry)), options_(std::move(options)) {
  if (!appendable_in_place(directory, file.span(), tail_entry_))
    throw Error(ErrorCode::invalid_argument,
                "the archive's layout does not allow appending in place",
                ErrorContext{.archive = path_.string()});
  tail_start_ = tail_start(directory, tail_entry_);
  old_size_ = file.size();
  old_tail_ = file.slice(tail_start_, old_size_ - tail_start_).to_owned();
  for (const auto& e : directory.entries)
    if (e.name == tail_entry_) tail_info_ = e;
  nonce_ = io::new_journal_nonce();
  io::write_append_journal(
      path_, io::AppendJournal{nonce_, tail_start_, old_size_, old_tail_, options_.tags},
      options_.durable);
  journaled_ = true;
  try {
    fd_ = io::sys::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) io::throw_errno(path_, "cannot open for appending");
    old_mtime_ns_ = mtime_ns(fd_);
    writer_ = std::make_unique<StreamZipWriter>(fd_, path_.string(), tail_start_,
                                                options_.expected_bytes, options_.progress);
    if (options_.direct_data) writer_->write_large_data_directly();
    writer_->set_comment(directory.comment);  // the archive's comment stays
    for (const auto& e : directory.entries)
      if (e.name != tail_entry_ && (!options_.keep_entry || options_.keep_entry(e)))
        writer_->keep(e);
  } catch (...) {
    try {
      rollback();
    } catch (const Error&) {
    }
    throw;
  }
}

void AppendSession::protect(std::uint64_t end) {
  // For benchmarks only (checkpoint_bench and distributed_bench measure what
  // the copy costs against appends without it): never set it otherwise.
  if (const char* skip = std::getenv("MODELZIP_BENCHMARK_NO_TAIL_COPY"); skip && *skip == '1')
    return;
  constexpr std::uint64_t kPage = 4096;
  const std::uint64_t at = std::max(old_size_, end);
  const std::uint64_t copy_at = at + (kPage - at % kPage) % kPage;
  const std::vector<std::byte> copy = writer_->render_tail(
      tail_entry_, tail_info_,
      old_tail_.slice(tail_info_.data_offset - tail_start_, tail_info_.compressed_size), copy_at);
  io::pwrite_full(fd_, copy.data(), copy.size(), copy_at, ErrorContext{.archive = path_.string()},
                  "cannot write the copy of the archive's tail");
}

AppendSession::~AppendSession() {
  if (!committed_ && journaled_) {
    try {
      rollback();
    } catch (const Error&) {
      // The journal stays: readers and the next writer restore from it.
    }
  }
  close_file();
}

void AppendSession::close_file() noexcept {
  if (fd_ >= 0) io::sys::close(fd_);
  fd_ = -1;
}

std::uint64_t AppendSession::commit(const std::vector<Bytes>& tail_contents) {
  writer_->add_stored(tail_entry_, tail_contents);
  const std::uint64_t size = writer_->finish([&] {
    if (options_.durable && io::sys::fsync(fd_) != 0) io::throw_errno(path_, "fsync failed");
  });
  if (options_.durable && io::sys::fsync(fd_) != 0) io::throw_errno(path_, "fsync failed");
  // A new archive as long as the old one (an in-place removal can make
  // one): readers tell the two apart by the modification time (FORMAT.md
  // section 8.3), which writes within one clock tick may leave unchanged.
  if (size == old_size_) bump_mtime(fd_, old_mtime_ns_);
  writer_.reset();
  const int fd = fd_;
  fd_ = -1;
  if (io::sys::close(fd) != 0) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);  // for the rollback
    io::throw_errno(path_, "cannot write file");
  }
  bool removed = false;
  try {
    io::remove_append_journal(path_, options_.durable, &removed);
  } catch (...) {
    committed_ = removed;
    if (!committed_) fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    throw;
  }
  committed_ = true;
  journaled_ = false;
  return size;
}

void AppendSession::rollback() {
  if (committed_ || !journaled_) return;
  writer_.reset();  // waits for its CRC worker; writes nothing more
  if (fd_ < 0) {
    fd_ = io::sys::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) io::throw_errno(path_, "cannot open to restore the previous archive");
  }
  restore_tail(fd_, path_, tail_start_, old_tail_, options_.durable, old_mtime_ns_);
  close_file();
  io::remove_append_journal(path_, options_.durable);
  journaled_ = false;
}

void AppendSession::abandon() noexcept {
  writer_.reset();
  close_file();
  journaled_ = false;  // the journal stays: the destructor leaves it alone
}

std::string rollback_notice(const std::vector<std::string>& tags) {
  std::string out = "rolled back an interrupted save";
  for (std::size_t i = 0; i < tags.size(); ++i)
    out += (i == 0 ? (tags.size() == 1 ? " of tag " : " of tags ")
                   : (i + 1 == tags.size() ? " and " : ", ")) +
           tags[i];
  return out;
}

std::optional<std::vector<std::string>> recover_append(const fs::path& path, bool durable) {
  io::JournalState state = io::read_append_journal(path);
  if (state.kind == io::JournalState::Kind::absent) return std::nullopt;
  if (state.kind == io::JournalState::Kind::valid) {
    const io::AppendJournal& j = state.journal;
    int fd = io::sys::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      // The archive was removed after the interrupted save: the journal can
      // restore nothing, and a new archive may be written in its place.
      io::remove_append_journal(path, durable);
      return std::nullopt;
    }
    if (fd < 0) io::throw_errno(path, "cannot open to restore the previous archive");
    struct Closer {
      int fd;
      ~Closer() { io::sys::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) io::throw_errno(path, "cannot stat");
    if (static_cast<std::uint64_t>(st.st_size) < j.tail_start)
      throw Error(ErrorCode::corrupt,
                  "the append journal saves a tail from offset " + std::to_string(j.tail_start) +
                      ", but the archive has only " + std::to_string(st.st_size) +
                      " bytes (remove " + io::append_journal_path(path).filename().string() +
                      " if it does not belong to this archive)",
                  ErrorContext{.archive = path.string()});
    try {
      restore_tail(fd, path, j.tail_start, j.tail, durable, mtime_ns(fd));
    } catch (const Error& e) {
      throw Error(ErrorCode::io,
                  "cannot restore the archive from an interrupted append: " + e.message(),
                  ErrorContext{.archive = path.string()});
    }
  }
  io::remove_append_journal(path, durable);
  if (state.kind != io::JournalState::Kind::valid) return std::nullopt;
  return std::move(state.journal.tags);
}

}  // namespace modelzip::zip
