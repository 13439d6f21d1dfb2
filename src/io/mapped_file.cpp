#include "io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include "io/posix_file.hpp"
#include "modelzip/error.hpp"

namespace modelzip {

// Sets Bytes' mapped flag for the views made here.
class Bytes::MappedAccess {
 public:
  static Bytes mark_mapped(Bytes b) {
    b.mapped_ = true;
    return b;
  }
};

namespace io {
namespace {

// Owns one mapping; not copyable, so exactly one munmap happens.
class Mapping {
 public:
  Mapping(void* address, std::size_t length) : address_(address), length_(length) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { ::munmap(address_, length_); }

 private:
  void* address_;
  std::size_t length_;
};

}  // namespace

Bytes map_file(const std::filesystem::path& path) {
  const UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.valid()) throw_errno(path, "cannot open");
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw_errno(path, "cannot stat");
  require_regular_file(st, path);
  if (st.st_size == 0) return Bytes::take({});
  auto length = static_cast<std::size_t>(st.st_size);
  void* address = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, f.get(), 0);
  if (address == MAP_FAILED) throw_errno(path, "cannot map");
  auto mapping = std::make_shared<const Mapping>(address, length);
  return Bytes::MappedAccess::mark_mapped(Bytes::borrow(
      std::span<const std::byte>(static_cast<const std::byte*>(address), length), mapping));
}

Bytes map_prefix_with_tail(int fd, const std::filesystem::path& path, std::uint64_t prefix,
                           std::span<const std::byte> tail) {
  const std::uint64_t total = prefix + tail.size();
  if (total == 0) return Bytes::take({});
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t split = prefix / page * page;  // mapped from the file below this
  const auto length = static_cast<std::size_t>(total);
  // Reserve the whole range (no memory committed), then fill it in place.
  void* base =
      ::mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) throw_errno(path, "cannot reserve memory for the archive");
  auto mapping = std::make_shared<const Mapping>(base, length);
  auto* bytes = static_cast<std::byte*>(base);
  if (split > 0 && ::mmap(base, static_cast<std::size_t>(split), PROT_READ, MAP_PRIVATE | MAP_FIXED,
                          fd, 0) == MAP_FAILED)
    throw_errno(path, "cannot map");
  if (total > split) {
    const auto rest = static_cast<std::size_t>(total - split);
    if (::mmap(bytes + split, rest, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS,
               -1, 0) == MAP_FAILED)
      throw_errno(path, "cannot allocate memory for the archive's tail");
    const auto head = static_cast<std::size_t>(prefix - split);
    if (pread_full(fd, bytes + split, head, split, path) != head) {
      errno = EIO;
      throw_errno(path, "the file is shorter than its recorded prefix");
    }
    if (!tail.empty()) std::memcpy(bytes + prefix, tail.data(), tail.size());
    ::mprotect(bytes + split, rest, PROT_READ);
  }
  return Bytes::MappedAccess::mark_mapped(
      Bytes::borrow(std::span<const std::byte>(bytes, length), mapping));
}

Bytes map_shared(int fd, std::uint64_t length, const std::string& name) {
  if (length == 0) return Bytes::take({});
  if (length > SIZE_MAX) {
    errno = EFBIG;
    throw_errno(name, "cannot map");
  }
  void* address = ::mmap(nullptr, static_cast<std::size_t>(length), PROT_READ, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) throw_errno(name, "cannot map");
  auto mapping = std::make_shared<const Mapping>(address, static_cast<std::size_t>(length));
  return Bytes::MappedAccess::mark_mapped(Bytes::borrow(
      std::span<const std::byte>(static_cast<const std::byte*>(address), length), mapping));
}

Bytes map_private_writable(int fd, std::uint64_t offset, std::uint64_t length,
                           const std::string& name) {
  if (length == 0) return Bytes::take({});
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  std::uint64_t span = 0;
  if (__builtin_add_overflow(length, offset - start, &span) || span > SIZE_MAX ||
      start > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
    errno = EFBIG;
    throw_errno(name, "cannot map");
  }
  void* address = ::mmap(nullptr, static_cast<std::size_t>(span), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE, fd, static_cast<off_t>(start));
  if (address == MAP_FAILED) throw_errno(name, "cannot map privately");
  auto mapping = std::make_shared<const Mapping>(address, static_cast<std::size_t>(span));
  return Bytes::MappedAccess::mark_mapped(Bytes::borrow(
      std::span<const std::byte>(static_cast<const std::byte*>(address) + (offset - start),
                                 static_cast<std::size_t>(length)),
      mapping));
}

Bytes read_file(const std::filesystem::path& path) {
  const UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.valid()) throw_errno(path, "cannot open");
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw_errno(path, "cannot stat");
  std::vector<std::byte> data(static_cast<std::size_t>(st.st_size));
  data.resize(pread_full(f.get(), data.data(), data.size(), 0, path));
  return Bytes::take(std::move(data));
}

void advise(const Bytes& bytes, Access access) noexcept {
  if (!bytes.is_mapped() || bytes.empty()) return;
  static const long page = ::sysconf(_SC_PAGESIZE);
  auto begin = reinterpret_cast<std::uintptr_t>(bytes.data());
  auto aligned = begin / page * page;
  int advice = MADV_NORMAL;
  switch (access) {
    case Access::normal:
      advice = MADV_NORMAL;
      break;
    case Access::sequential:
      advice = MADV_SEQUENTIAL;
      break;
    case Access::random:
      advice = MADV_RANDOM;
      break;
    case Access::will_need:
      advice = MADV_WILLNEED;
      break;
  }
  ::madvise(reinterpret_cast<void*>(aligned), bytes.size() + (begin - aligned), advice);
}

}  // namespace io
}  // namespace modelzip
