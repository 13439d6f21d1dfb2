// Ctrl-C for reads of remote archives in a process whose SIGINT handler
// notes the signal and returns instead of ending the process (Python's).
//
// The binding names the thread whose fetches SIGINT stops
// (stop_fetches_on_sigint()) and makes SigintWatch the watch of every fetch
// (remote/fetch_interrupt.hpp). A fetch (remote_source.cpp) on that thread
// holds a SigintWatch while it runs: it chains a SIGINT handler in front of
// the one installed (which still runs, as before) and restores that one when
// the fetch ends, so nothing stays installed between fetches. A SIGINT
// received meanwhile makes interrupted() say "SIGINT", and the fetch throws
// Error(cancelled) at its next poll (within 100 ms), wherever the transfer
// is (waiting for bytes, for a retry, for a connection). Fetches on other
// threads are not watched: a process delivers SIGINT to the thread that
// handles it (Python: the main thread), and only there can it interrupt.
// A disposition of SIG_DFL or SIG_IGN is left alone (the signal ends the
// process, or is ignored, as it would anyway).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <memory>

#include "remote/fetch_interrupt.hpp"

namespace modelzip::python {

// Names the thread whose fetches SIGINT stops (at most one; the last call
// wins) and makes every fetch start a SigintWatch. Thread safety: callable
// from any thread.
void stop_fetches_on_sigint(pthread_t thread) noexcept;

class SigintWatch final : public remote::FetchInterrupt {
 public:
  // Installs the chained handler when called on the thread named and SIGINT
  // has a handler; inside another watch of that thread, shares its handler;
  // otherwise does nothing (interrupted() stays false).
  SigintWatch() noexcept;
  // Restores the previous handler, unless another one replaced ours since.
  ~SigintWatch() override;
  SigintWatch(const SigintWatch&) = delete;
  SigintWatch& operator=(const SigintWatch&) = delete;

  // "SIGINT" if one arrived since this watch installed its handler, else
  // nullptr.
  const char* interrupted() const noexcept override;

 private:
  bool installed_ = false;
  bool nested_ = false;
};

}  // namespace modelzip::python
