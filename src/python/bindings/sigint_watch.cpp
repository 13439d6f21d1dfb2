#include "sigint_watch.hpp"

#include <Python.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <mutex>

namespace modelzip::python {
namespace {

// SIGINTs received while the chained handler was installed.
std::atomic<std::uint64_t> received{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "a signal handler may only touch lock-free atomics");
// Guards `previous` and `watches` (never taken by the handler).
std::mutex installing;
// The handler ours chains to; written under `installing` only while ours
// is not installed; read by the handler.
struct sigaction previous {};
// Watches alive that share the installed handler.
int watches = 0;

extern "C" void on_sigint(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  received.fetch_add(1, std::memory_order_relaxed);
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  }
  errno = saved;
}

// Python's threads only: a thread the library started (a background
// save's) has no thread state of its own outside the GIL.
std::unique_ptr<remote::FetchInterrupt> start_watch() {
  if (PyGILState_GetThisThreadState() == nullptr) return nullptr;
  return std::make_unique<SigintWatch>();
}

}  // namespace

void stop_fetches_on_sigint() noexcept {
  remote::watch_fetches_with(&start_watch);
}

SigintWatch::SigintWatch() noexcept {
  const std::lock_guard<std::mutex> guard(installing);
  start_ = received.load(std::memory_order_relaxed);
  if (watches == 0) {
    struct sigaction current {};
    if (::sigaction(SIGINT, nullptr, &current) != 0) return;
    const bool has_handler = (current.sa_flags & SA_SIGINFO)
                                 ? current.sa_sigaction != nullptr
                                 : current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
    if (!has_handler) return;
    previous = current;
    struct sigaction chained {};
    chained.sa_sigaction = on_sigint;
    chained.sa_mask = current.sa_mask;
    chained.sa_flags = SA_SIGINFO | (current.sa_flags & (SA_ONSTACK | SA_RESTART));
    if (::sigaction(SIGINT, &chained, nullptr) != 0) return;
  }
  ++watches;
  installed_ = true;
}

SigintWatch::~SigintWatch() {
  if (!installed_) return;
  const std::lock_guard<std::mutex> guard(installing);
  if (--watches > 0) return;
  struct sigaction current {};
  if (::sigaction(SIGINT, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
      current.sa_sigaction == on_sigint)
    ::sigaction(SIGINT, &previous, nullptr);
}

const char* SigintWatch::interrupted() const noexcept {
  return installed_ && received.load(std::memory_order_relaxed) != start_ ? "SIGINT" : nullptr;
}

}  // namespace modelzip::python
