#include "dist/rank_locks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <locale>
#include <sstream>
#include <thread>

#include "modelzip/error.hpp"

namespace modelzip::dist {
namespace {

struct flock range_lock(short type, std::uint64_t start, std::uint64_t length) {
  struct flock l {};
  l.l_type = type;
  l.l_whence = SEEK_SET;
  l.l_start = static_cast<off_t>(start);
  l.l_len = static_cast<off_t>(length);
  return l;
}

int set_lock(int fd, short type, std::uint64_t start, std::uint64_t length) {
  struct flock l = range_lock(type, start, length);
  int r;
  do r = ::fcntl(fd, F_OFD_SETLK, &l);
  while (r != 0 && errno == EINTR);
  return r;
}

}  // namespace

RankLocks::RankLocks(const std::filesystem::path& file, int rank) : file_(file), rank_(rank) {
  fd_ = io::UniqueFd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd_.valid()) io::throw_errno(file, "cannot open the archive to take the rank's lock");
  if (set_lock(fd_.get(), F_RDLCK, kAliveLocks + static_cast<std::uint64_t>(rank), 1) != 0)
    io::throw_errno(file, "cannot take the rank's lock on the archive");
}

namespace {

// FNV-1a: the same file name on every rank of a host, whatever the key holds.
std::string host_lock_name(const std::string& key) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  static const char digits[] = "0123456789abcdef";
  std::string out = "modelzip-ranks-";
  for (int shift = 60; shift >= 0; shift -= 4) out += digits[(h >> shift) & 15];
  return out;
}

// Empty when there is no temporary folder.
std::filesystem::path host_lock_path(const std::string& key) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  return ec ? std::filesystem::path() : dir / host_lock_name(key);
}

}  // namespace

RankLocks::RankLocks(const OnThisHost& where, int rank)
    : file_(host_lock_path(where.key)), rank_(rank), marked_(true), remove_(where.remove) {
  // O_NOFOLLOW and 0600: the name is in a shared folder, and only this
  // user's ranks have a reason to open it.
  fd_ = io::UniqueFd(::open(file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  const char mark = 1;
  if (!fd_.valid() ||
      set_lock(fd_.get(), F_RDLCK, kAliveLocks + static_cast<std::uint64_t>(rank), 1) != 0 ||
      ::pwrite(fd_.get(), &mark, 1, static_cast<off_t>(rank)) != 1)
    fd_ = io::UniqueFd();  // names no rank (the commit does not depend on it)
}

RankLocks::~RankLocks() {
  if (remove_ && fd_.valid()) ::unlink(file_.c_str());
}

void RankLocks::begin_writes() {
  if (set_lock(fd_.get(), F_RDLCK, kWritingLocks + static_cast<std::uint64_t>(rank_), 1) == 0)
    return;
  if (errno == EAGAIN || errno == EACCES)
    throw Error(ErrorCode::io,
                "the commit is being undone (another rank failed): rank " + std::to_string(rank_) +
                    " writes nothing",
                ErrorContext{.archive = file_.string()});
  io::throw_errno(file_, "cannot take the rank's writing lock on the archive");
}

void RankLocks::end_writes() noexcept {
  set_lock(fd_.get(), F_UNLCK, kWritingLocks + static_cast<std::uint64_t>(rank_), 1);
}

std::vector<int> RankLocks::lost(int size) const {
  std::vector<int> out;
  if (!fd_.valid()) return out;
  for (int r = 0; r < size; ++r) {
    if (r == rank_) continue;
    char mark = 0;
    if (marked_ && ::pread(fd_.get(), &mark, 1, static_cast<off_t>(r)) != 1) continue;
    if (marked_ && mark != 1) continue;
    struct flock l = range_lock(F_WRLCK, kAliveLocks + static_cast<std::uint64_t>(r), 1);
    if (::fcntl(fd_.get(), F_OFD_GETLK, &l) == 0 && l.l_type == F_UNLCK) out.push_back(r);
  }
  return out;
}

void allow_rank_locks(int lock_fd, const std::filesystem::path& file) {
  if (set_lock(lock_fd, F_UNLCK, kWritingLocks, kRankLocksEnd - kWritingLocks) != 0)
    io::throw_errno(file, "cannot open the archive's lock to the ranks");
}

bool wait_for_writers(int fd, std::chrono::milliseconds timeout) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (set_lock(fd, F_WRLCK, kWritingLocks, kAliveLocks - kWritingLocks) == 0) return true;
    if (errno != EAGAIN && errno != EACCES) return false;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::chrono::milliseconds writers_timeout(std::optional<std::chrono::milliseconds> option) {
  if (option) {
    if (option->count() < 0)
      throw Error(ErrorCode::invalid_argument, "rank_lock_timeout must not be negative (got " +
                                                   std::to_string(option->count()) + " ms)");
    return *option;
  }
  const char* text = std::getenv("MODELZIP_RANK_LOCK_TIMEOUT");
  if (text == nullptr || *text == '\0') return kWritersTimeout;
  // Parsed in the "C" locale's format whatever the process's locale is.
  double seconds = -1;
  std::istringstream in(text);
  in.imbue(std::locale::classic());
  in >> seconds;
  if (in.fail() || !in.eof() || !(seconds >= 0) || seconds > 1e9)
    throw Error(ErrorCode::invalid_argument,
                std::string("MODELZIP_RANK_LOCK_TIMEOUT must be a number of seconds >= 0, not '") +
                    text + "'");
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000 + 0.5));
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace modelzip::dist
