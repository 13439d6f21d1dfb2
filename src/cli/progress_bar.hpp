// A progress bar on standard error for long operations, drawn only when
// standard error is a terminal (never in pipes or logs). Not thread-safe.
// A commit's dedup comparison (Progress::Stage::compare) is shown as its
// own bar labelled "comparing", before the label's bar for the writing.
//
// Each line fits the terminal's width as it is at every redraw (ioctl
// TIOCGWINSZ, else $COLUMNS, else 80), one column short of it so that the
// terminal never wraps: parts are dropped, least useful first (the sizes,
// then the bar, the rate and the ETA), so a narrow terminal shows no
// wrapped lines and no trail. A finished or destroyed bar erases its line.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "modelzip/progress.hpp"

namespace modelzip::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label) : label_(std::move(label)), enabled_(::isatty(2) == 1) {}
  ~ProgressBar() { clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // A callback for any ProgressCallback parameter (null when disabled).
  ProgressCallback callback() {
    if (!enabled_) return {};
    return [this](const Progress& p) {
      if (p.stage != stage_) {  // a new stage: its own bar, rate and ETA
        clear();
        started_ = false;
        stage_ = p.stage;
      }
      show(p.bytes_done, p.bytes_total);
      return true;
    };
  }

  // Redraws (at most every 100 ms, and always at the end: done == total,
  // which erases the line).
  void show(std::uint64_t done, std::uint64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      start_ = now;
    }
    if (done >= total) {
      clear();
      return;
    }
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const std::string line = render(stage_ == Progress::Stage::compare ? "comparing" : label_, done,
                                    total, seconds, terminal_width());
    std::fprintf(stderr, "\r%s\033[K", line.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  // The text of one bar `width` columns wide at most minus one (pure: for
  // tests and for show()). `seconds` since the start gives rate and ETA.
  static std::string render(const std::string& label, std::uint64_t done, std::uint64_t total,
                            double seconds, int width) {
    const double f = total ? static_cast<double>(done) / static_cast<double>(total) : 1;
    const int percent = static_cast<int>(f * 100);
    std::string pct = std::to_string(percent) + "%";
    std::string sizes = human_bytes(done) + " / " + human_bytes(total);
    std::string rate, eta;
    if (seconds > 0.2 && done > 0) {
      const double per_second = static_cast<double>(done) / seconds;
      rate = human_bytes(static_cast<std::uint64_t>(per_second)) + "/s";
      eta = "ETA " + clock_text(static_cast<double>(total - done) / per_second);
    }
    const std::size_t limit = width > 1 ? static_cast<std::size_t>(width - 1) : 0;
    // Parts in the order dropped when the line is too long.
    for (int drop = 0; drop <= 5; ++drop) {
      std::vector<std::string> parts = {label};
      const bool with_bar = drop < 2;
      if (drop < 5) parts.push_back(pct);
      if (drop < 4 && !eta.empty()) parts.push_back(eta);
      if (drop < 3 && !rate.empty()) parts.push_back(rate);
      if (drop < 1) parts.push_back(sizes);
      std::string text;
      for (std::size_t i = 0; i < parts.size(); ++i) {
        text += (i ? " " : "") + parts[i];
        if (i == 0 && with_bar) text += " []";  // placeholder, filled below
      }
      if (text.size() > limit) continue;
      if (with_bar) {
        std::size_t room = std::min<std::size_t>(limit - text.size(), 40);
        if (room < 5 && drop < 1) continue;  // rather drop the sizes than squeeze the bar
        if (room < 5) {
          text.replace(label.size(), 3, "");
        } else {
          auto filled = static_cast<std::size_t>(f * static_cast<double>(room));
          text.replace(label.size() + 2, 0,
                       std::string(filled, '#') + std::string(room - filled, '.'));
        }
      }
      return text;
    }
    return label.substr(0, limit);
  }

 private:
  static int terminal_width() {
    struct winsize ws {};
    if (::ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    if (const char* c = std::getenv("COLUMNS"); c && std::atoi(c) > 0) return std::atoi(c);
    return 80;
  }

  // "0:07", "12:34", "1:02:03".
  static std::string clock_text(double seconds) {
    auto s = static_cast<unsigned long long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
      std::snprintf(buf, sizeof buf, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
    else
      std::snprintf(buf, sizeof buf, "%llu:%02llu", s / 60, s % 60);
    return buf;
  }

  void clear() {
    if (!drawn_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }

  std::string label_;
  Progress::Stage stage_ = Progress::Stage::work;  // a commit's compare stage says "comparing"
  bool enabled_;
  bool started_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_{}, last_{};
};

}  // namespace modelzip::cli
