#include "io/anonymous_buffer.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace modelzip::io {

void AnonymousUnmapper::operator()(std::byte*) const noexcept {
  if (mapping != nullptr) ::munmap(mapping, length);
}

AnonymousBuffer anonymous_buffer(std::size_t size, bool huge_pages) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (size > SIZE_MAX - kHuge) throw std::bad_alloc();
  const std::size_t length = size + kHuge;
  void* mapping =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto at = reinterpret_cast<std::uintptr_t>(mapping);
  std::byte* data = static_cast<std::byte*>(mapping) + (kHuge - at % kHuge) % kHuge;
#ifdef MADV_HUGEPAGE
  if (huge_pages && size > 0) ::madvise(data, size, MADV_HUGEPAGE);  // a hint: else ordinary pages
#endif
  return AnonymousBuffer(data, AnonymousUnmapper{mapping, length});
}

}  // namespace modelzip::io
