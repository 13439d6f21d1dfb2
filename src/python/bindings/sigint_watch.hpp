// Ctrl-C for reads of remote archives in a process whose SIGINT handler
// notes the signal and returns instead of ending the process (Python's).
//
// stop_fetches_on_sigint() makes SigintWatch the watch of every fetch
// (remote/fetch_interrupt.hpp) on a thread of Python: the main one and
// those of `threading`, not the library's own (a background save's, which
// Ctrl-C does not stop). While at least one such fetch runs, a SIGINT
// handler is chained in front of the one installed (which still runs, as
// before); the last fetch to end restores that one, so nothing stays
// installed between fetches. A SIGINT received while a fetch runs makes its
// interrupted() say "SIGINT", and the fetch throws Error(cancelled) at its
// next poll (within 100 ms), wherever the transfer is (waiting for bytes,
// for a retry, for a connection), on whichever of those threads: Python
// raises KeyboardInterrupt on its main thread only, and a read on another
// one would otherwise hold the program (which waits for its threads at
// exit) until it ends. Fetches that start after the signal are not
// affected. A disposition of SIG_DFL or SIG_IGN is left alone (the signal
// ends the process, or is ignored, as it would anyway).
#pragma once

#include <signal.h>

#include <cstdint>

#include "remote/fetch_interrupt.hpp"

namespace modelzip::python {

// Makes every fetch on a thread of Python start a SigintWatch. Thread
// safety: callable from any thread.
void stop_fetches_on_sigint() noexcept;

class SigintWatch final : public remote::FetchInterrupt {
 public:
  // Installs the chained handler unless another watch has (then shares it),
  // or does nothing when SIGINT has no handler (interrupted() stays false).
  // Thread safety: watches may start and end on any threads concurrently.
  SigintWatch() noexcept;
  // The last watch alive restores the previous handler, unless another one
  // replaced ours since.
  ~SigintWatch() override;
  SigintWatch(const SigintWatch&) = delete;
  SigintWatch& operator=(const SigintWatch&) = delete;

  // "SIGINT" if one arrived since this watch started, else nullptr.
  // Async-signal-safe.
  const char* interrupted() const noexcept override;

 private:
  bool installed_ = false;
  std::uint64_t start_ = 0;  // SIGINTs received before this watch started
};

}  // namespace modelzip::python
