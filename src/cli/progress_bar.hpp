// A progress bar on standard error for long saves, drawn only when standard
// error is a terminal (never in pipes or logs). Not thread-safe.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "cli/command.hpp"
#include "modelzip/progress.hpp"

namespace modelzip::cli {

class ProgressBar {
 public:
  explicit ProgressBar(const char* label) : label_(label), enabled_(::isatty(2) == 1) {}
  ~ProgressBar() {
    if (drawn_) std::fputs("\r\033[K", stderr);
  }

  // A callback for any ProgressCallback parameter (null when disabled).
  ProgressCallback callback() {
    if (!enabled_) return {};
    return [this](const Progress& p) {
      auto now = std::chrono::steady_clock::now();
      if (drawn_ && now - last_ < std::chrono::milliseconds(100) && p.bytes_done < p.bytes_total)
        return true;
      last_ = now;
      drawn_ = true;
      const int width = 30;
      double f = p.bytes_total
                     ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total)
                     : 1;
      int filled = static_cast<int>(f * width);
      std::fprintf(stderr, "\r%s [", label_);
      for (int i = 0; i < width; ++i) std::fputc(i < filled ? '#' : ' ', stderr);
      std::fprintf(stderr, "] %3d%% %s / %s\033[K", static_cast<int>(f * 100),
                   human_bytes(p.bytes_done).c_str(), human_bytes(p.bytes_total).c_str());
      if (p.bytes_done >= p.bytes_total) {  // done: leave the line clean
        std::fputs("\r\033[K", stderr);
        drawn_ = false;
      }
      std::fflush(stderr);
      return true;
    };
  }

 private:
  const char* label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace modelzip::cli
