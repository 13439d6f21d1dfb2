// Counts the bytes a long operation has done against its total and reports
// them to the caller's ProgressCallback, turning a "stop" answer into
// Error(cancelled). The one implementation of the ProgressCallback contract
// (modelzip/progress.hpp) for saves, loads and verify.
//
// Contract kept here: reports come from the thread that calls advance() and
// finish(); bytes_done never exceeds bytes_total (the total grows to cover
// what was done if the operation's estimate fell short); an operation
// reports at least once, at its end, even with nothing to do. An empty
// callback makes every call a no-op.
//
// Not thread-safe (one operation, one thread). Errors: advance() and
// finish() throw Error(cancelled, "<operation> cancelled", context) when the
// callback returns false or a process-wide cancellation was requested
// (modelzip/cancel.hpp; checked even without a callback).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"
#include "modelzip/progress.hpp"

namespace modelzip::detail {

class ProgressTracker {
 public:
  // `operation` names it in the cancel message ("save", "load", "verify").
  ProgressTracker(ProgressCallback callback, std::string operation, ErrorContext context = {},
                  Progress::Stage stage = Progress::Stage::work)
      : callback_(std::move(callback)),
        operation_(std::move(operation)),
        context_(std::move(context)),
        stage_(stage) {}

  // Whether anyone listens (callers may skip computing totals if not).
  bool enabled() const noexcept { return static_cast<bool>(callback_); }
  void set_total(std::uint64_t total) noexcept { total_ = total; }
  void add_to_total(std::uint64_t bytes) noexcept { total_ += bytes; }

  // `bytes` more are done: reports.
  void advance(std::uint64_t bytes) {
    done_ += bytes;
    report();
  }
  // The end: what was done is the total. Reports unless the last report
  // already said so.
  void finish() {
    if (reported_ && last_ == Progress{done_, done_, stage_}) return;
    total_ = done_;
    report();
  }

 private:
  void report() {
    if (cancel_requested())
      throw Error(ErrorCode::cancelled, operation_ + " cancelled (interrupted)", context_);
    if (!callback_) return;
    reported_ = true;
    last_ = Progress{done_, std::max(done_, total_), stage_};
    if (!callback_(last_)) throw Error(ErrorCode::cancelled, operation_ + " cancelled", context_);
  }

  ProgressCallback callback_;
  std::string operation_;
  ErrorContext context_;
  Progress::Stage stage_;
  std::uint64_t done_ = 0, total_ = 0;
  bool reported_ = false;
  Progress last_;
};

}  // namespace modelzip::detail
