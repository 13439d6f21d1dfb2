#include "cli/interrupt.hpp"

#include <signal.h>

#include <csignal>

#include "modelzip/cancel.hpp"

namespace modelzip::cli {
namespace {

volatile std::sig_atomic_t received = 0;

extern "C" void on_interrupt(int sig) {
  if (received != 0) {  // the second one: give up at once
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  received = sig;
  modelzip::request_cancel();  // one lock-free atomic store: async-signal-safe
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

int interrupt_signal() noexcept {
  return received;
}

}  // namespace modelzip::cli
