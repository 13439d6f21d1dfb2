#include "remote/fetch_interrupt.hpp"

#include <atomic>

namespace modelzip::remote {
namespace {

std::atomic<FetchInterruptStart> starter{nullptr};

}  // namespace

void watch_fetches_with(FetchInterruptStart start) noexcept {
  starter.store(start, std::memory_order_release);
}

std::unique_ptr<FetchInterrupt> start_fetch_interrupt() {
  const FetchInterruptStart start = starter.load(std::memory_order_acquire);
  return start ? start() : nullptr;
}

}  // namespace modelzip::remote
