// Measurements shared by the C++ benchmarks (header-only, benchmarks only).
// Not thread-safe in the sense that matters: each runs `f` on the calling
// thread (median_seconds) or in one forked child (child_peak_kib), so call
// them from a single-threaded benchmark.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace modelzip::bench {

// The median wall time, in seconds, of `reps` (>= 1) runs of f.
inline double median_seconds(int reps, const std::function<void()>& f) {
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Peak resident set growth (KiB) of running f in a forked child process: the
// child's peak after f minus its resident set before f (ru_maxrss). -1 when
// the child could not be started or did not report (f crashed).
inline long child_peak_kib(const std::function<void()>& f) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return -1;
  }
  if (pid == 0) {
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    const long base = r.ru_maxrss;
    f();
    ::getrusage(RUSAGE_SELF, &r);
    const long delta = r.ru_maxrss - base;
    if (::write(pipefd[1], &delta, sizeof delta) != sizeof delta) _exit(1);
    _exit(0);
  }
  ::close(pipefd[1]);
  long delta = -1;
  if (::read(pipefd[0], &delta, sizeof delta) != sizeof delta) delta = -1;
  ::waitpid(pid, nullptr, 0);
  ::close(pipefd[0]);
  return delta;
}

}  // namespace modelzip::bench
