// Counting of the heap memory the hostile suite's executable allocates with
// operator new (allocation_counter.cpp replaces the global operators).
// Memory that C libraries take with malloc (libzip, zlib) is not counted;
// it is small and bounded (inflate state, directory copies).
#pragma once

#include <cstdint>

namespace modelzip::testing {

// Bytes currently allocated through operator new (usable sizes).
std::int64_t live_heap_bytes() noexcept;

// The peak of live bytes above the level at construction, while in scope.
// Not re-entrant (one measurement at a time); allocations of other threads
// count too.
class PeakHeap {
 public:
  PeakHeap() noexcept;
  std::int64_t peak() const noexcept;  // bytes above the starting level

 private:
  std::int64_t base_;
};

}  // namespace modelzip::testing
