#include "remote/cache_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "io/mapped_file.hpp"
#include "io/posix_file.hpp"
#include "modelzip/error.hpp"

namespace modelzip::remote {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMagic = "modelzip-cache-2";
// The boot-id word of a ranges file whose bytes were synced (fdatasync)
// before it was written: trusted after a reboot too.
constexpr const char* kSynced = "synced";

std::string hex_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits, twice with different seeds
  std::uint64_t g = 0x84222325cbf29ce4ull;
  for (unsigned char c : text) {
    h = (h ^ c) * 1099511628211ull;
    g = (g ^ c) * 0x100000001b3ull + 1;
  }
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(h),
                static_cast<unsigned long long>(g));
  return out;
}

// Bytes the file takes on disk (sparse files: only what was written).
std::uint64_t allocated(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

// This boot of the kernel (/proc/sys/kernel/random/boot_id), or "" if it
// cannot be read. Page-cache bytes written in one boot are what every
// reader sees until the machine stops, synced or not.
const std::string& boot_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string word;
    if (!(in >> word) || word == kSynced) return std::string();
    return word;
  }();
  return id;
}

// The ranges a .ranges file records for a bytes file of `size` bytes and
// inode `inode`; nothing if it is missing, for another file, malformed, or
// written unsynced in an earlier boot (its bytes may not have reached the
// disk before the machine stopped).
RangeSet read_ranges(const fs::path& p, std::uint64_t size, std::uint64_t inode) {
  RangeSet out;
  std::ifstream in(p);
  std::string magic, boot;
  std::uint64_t s = 0, ino = 0;
  if (!(in >> magic >> s >> ino >> boot) || magic != kMagic || s != size || ino != inode)
    return out;
  if (boot != kSynced && (boot_id().empty() || boot != boot_id())) return out;
  std::uint64_t b = 0, e = 0;
  for (int lines = 0; lines < 10'000'000 && (in >> b >> e); ++lines)
    if (b < e && e <= size) out.add(b, e);
  return out;
}

// Removes `p` if it is a `<key>.ranges.tmp<pid>` file (save()) of a
// process that no longer runs, e.g. one killed between writing and
// renaming it; says whether `p` is such a file (removed or not).
bool remove_if_orphan(const fs::path& p) noexcept {
  const std::string name = p.filename().string();
  const auto at = name.rfind(".ranges.tmp");
  if (at == std::string::npos) return false;
  const std::string digits = name.substr(at + std::strlen(".ranges.tmp"));
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const pid_t pid = static_cast<pid_t>(std::stol(digits));
  if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
    std::error_code ec;
    fs::remove(p, ec);
  }
  return true;
}

}  // namespace

CacheFile::CacheFile(const fs::path& folder, std::uint64_t limit, const std::string& identity,
                     std::uint64_t size, const std::string& name)
    : folder_(folder), limit_(limit), size_(size), name_(name), key_(hex_hash(identity)) {
  if (folder_.empty()) {
    fd_ = ::memfd_create("modelzip-remote", MFD_CLOEXEC);
    if (fd_ < 0) io::throw_errno(name_, "cannot create an in-memory cache");
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      ::close(fd_);
      io::throw_errno(name_, "cannot size the in-memory cache");
    }
  } else {
    std::error_code ec;
    fs::create_directories(folder_, ec);
    const fs::path bytes = folder_ / (key_ + ".bytes");
    fd_ = ::open(bytes.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) io::throw_errno(name_, "cannot open the cache file " + bytes.string());
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      io::throw_errno(name_, "cannot stat the cache file " + bytes.string());
    }
    inode_ = static_cast<std::uint64_t>(st.st_ino);
    if (static_cast<std::uint64_t>(st.st_size) == size_) {
      present_ = read_ranges(folder_ / (key_ + ".ranges"), size_, inode_);
    } else if (::ftruncate(fd_, 0) != 0 || ::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      ::close(fd_);
      io::throw_errno(name_, "cannot size the cache file " + bytes.string());
    } else {
      dirty_ = true;  // sized anew: its record (empty) at once
      save();
    }
    // Used now: the most recent for eviction.
    ::utimensat(AT_FDCWD, (folder_ / (key_ + ".ranges")).c_str(), nullptr, 0);
    ::futimens(fd_, nullptr);
    evict(key_);
  }
  try {
    mapping_ = io::map_shared(fd_, size_, name_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

CacheFile::~CacheFile() {
  save();
  if (fd_ >= 0) ::close(fd_);
  if (on_disk()) evict(key_);
  if (on_disk() && allocated(folder_ / (key_ + ".bytes")) > limit_) {
    std::error_code ec;
    fs::remove(folder_ / (key_ + ".ranges"), ec);
    fs::remove(folder_ / (key_ + ".bytes"), ec);
  }
}

void CacheFile::write(std::uint64_t offset, const void* data, std::size_t length) {
  const auto* p = static_cast<const char*>(data);
  while (length > 0) {
    ssize_t n = ::pwrite(fd_, p, length, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io::throw_errno(name_, "cannot write the cache file");
    p += n;
    offset += static_cast<std::uint64_t>(n);
    length -= static_cast<std::size_t>(n);
  }
}

void CacheFile::mark_present(std::uint64_t offset, std::uint64_t length) {
  present_.add(offset, offset + length);
  dirty_ = true;
}

void CacheFile::save() noexcept {
  if (!on_disk() || !dirty_) return;
  // Removed meanwhile (evicted by another process): recording its ranges
  // could vouch for a new file that happens to get the same inode.
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || st.st_nlink == 0) return;
  // The bytes are not synced (the kernel writes them back in its own time;
  // a sync here would bound a cold read by the disk's write speed): the
  // record names this boot, and readers of a later boot ignore it. Only
  // where the boot cannot be told are the bytes synced first.
  std::string boot = boot_id();
  if (boot.empty()) {
    if (::fdatasync(fd_) != 0) return;  // unsynced bytes are never vouched for
    boot = kSynced;
  }
  const fs::path path = folder_ / (key_ + ".ranges");
  // Another process may have recorded ranges of the same file meanwhile.
  RangeSet all = read_ranges(path, size_, inode_);
  for (const auto& [b, e] : present_.ranges()) all.add(b, e);
  std::ostringstream text;
  text << kMagic << ' ' << size_ << ' ' << inode_ << ' ' << boot << '\n';
  for (const auto& [b, e] : all.ranges()) text << b << ' ' << e << '\n';
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text.str();
    if (!out.flush()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  dirty_ = false;
}

void CacheFile::evict(const std::string& keep) noexcept {
  struct Item {
    std::string key;
    fs::file_time_type used;
    std::uint64_t bytes;
  };
  std::vector<Item> items;
  std::uint64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(folder_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (remove_if_orphan(p)) continue;
    if (p.extension() != ".bytes") continue;
    std::string key = p.stem().string();
    std::error_code ec2;
    auto used = fs::last_write_time(folder_ / (key + ".ranges"), ec2);
    if (ec2) used = fs::last_write_time(p, ec2);
    std::uint64_t bytes = allocated(p);
    total += bytes;
    if (key != keep) items.push_back({key, used, bytes});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.used < b.used; });
  for (const auto& item : items) {
    if (total <= limit_) break;
    fs::remove(folder_ / (item.key + ".ranges"), ec);
    fs::remove(folder_ / (item.key + ".bytes"), ec);
    total -= item.bytes;
  }
}

}  // namespace modelzip::remote
