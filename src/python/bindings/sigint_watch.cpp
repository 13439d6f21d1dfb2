#include "sigint_watch.hpp"

#include <atomic>
#include <cerrno>
#include <memory>

namespace modelzip::python {
namespace {

std::atomic<bool> watching{false};
std::atomic<pthread_t> watched{};
std::atomic<bool> received{false};
static_assert(std::atomic<bool>::is_always_lock_free,
              "a signal handler may only touch lock-free atomics");
// Written only by the watched thread before it installs the handler; read
// by the handler.
struct sigaction previous {};
// Watches alive on the watched thread (only the outermost installs).
int depth = 0;

extern "C" void on_sigint(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  received.store(true, std::memory_order_relaxed);
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  }
  errno = saved;
}

bool on_watched_thread() noexcept {
  return watching.load(std::memory_order_acquire) &&
         pthread_equal(watched.load(std::memory_order_relaxed), pthread_self()) != 0;
}

std::unique_ptr<remote::FetchInterrupt> start_watch() {
  if (!on_watched_thread()) return nullptr;
  return std::make_unique<SigintWatch>();
}

}  // namespace

void stop_fetches_on_sigint(pthread_t thread) noexcept {
  watched.store(thread, std::memory_order_relaxed);
  watching.store(true, std::memory_order_release);
  remote::watch_fetches_with(&start_watch);
}

SigintWatch::SigintWatch() noexcept {
  if (!on_watched_thread()) return;
  if (depth > 0) {  // inside a watch of this thread: its handler serves both
    nested_ = true;
    return;
  }
  struct sigaction current {};
  if (::sigaction(SIGINT, nullptr, &current) != 0) return;
  const bool has_handler = (current.sa_flags & SA_SIGINFO)
                               ? current.sa_sigaction != nullptr
                               : current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
  if (!has_handler) return;
  previous = current;
  received.store(false, std::memory_order_relaxed);
  struct sigaction chained {};
  chained.sa_sigaction = on_sigint;
  chained.sa_mask = current.sa_mask;
  chained.sa_flags = SA_SIGINFO | (current.sa_flags & (SA_ONSTACK | SA_RESTART));
  if (::sigaction(SIGINT, &chained, nullptr) != 0) return;
  installed_ = true;
  ++depth;
}

SigintWatch::~SigintWatch() {
  if (!installed_) return;
  --depth;
  struct sigaction current {};
  if (::sigaction(SIGINT, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
      current.sa_sigaction == on_sigint)
    ::sigaction(SIGINT, &previous, nullptr);
}

const char* SigintWatch::interrupted() const noexcept {
  return (installed_ || nested_) && received.load(std::memory_order_relaxed) ? "SIGINT" : nullptr;
}

}  // namespace modelzip::python
