// Interrupts of remote fetches besides modelzip::request_cancel() (which
// every fetch polls): a program that notices an interrupt itself (the Python
// binding: Ctrl-C, python/bindings/sigint_watch.hpp) names how to watch for
// one. Each fetch (remote_source.cpp) starts a watch on its own thread when
// it begins, polls it at least every 100 ms, throws Error(cancelled, "read
// cancelled (<what interrupted()>)") once it says so, and destroys it when
// the fetch ends.
#pragma once

#include <memory>

namespace modelzip::remote {

class FetchInterrupt {
 public:
  virtual ~FetchInterrupt() = default;
  // What interrupted the fetch ("SIGINT"), or nullptr while nothing did.
  virtual const char* interrupted() const noexcept = 0;
};

// Starts a watch for the calling thread (nullptr: nothing to watch there).
using FetchInterruptStart = std::unique_ptr<FetchInterrupt> (*)();

// Sets the function every fetch starts its watch with (nullptr: none, the
// default; the last call wins). Thread safety: callable from any thread.
void watch_fetches_with(FetchInterruptStart start) noexcept;

// A watch for a fetch starting on the calling thread, or nullptr.
std::unique_ptr<FetchInterrupt> start_fetch_interrupt();

}  // namespace modelzip::remote
