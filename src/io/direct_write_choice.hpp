// Whether a durable save writes the data of its large entries directly
// (O_DIRECT through io::SharedFileWriter) or through the page cache, made
// durable by the fsync that follows either way. Which is faster depends on
// the host: on one VM direct writes beat buffered writes + fsync 1.6x, on
// another they lost. So the choice is made per device by measuring both:
//
// - MODELZIP_DIRECT_WRITES=1: always direct; =0: never; "auto" or unset:
//   for a save of at least kCalibrateFrom bytes, a short calibration on the
//   archive's device (kCalibrationBytes written each way, twice, into an
//   unnamed temporary file in the archive's folder; the fastest of each
//   way counts) decides, and its verdict is kept for that device (st_dev)
//   for the rest of the process. Smaller saves are written directly, as
//   before there was a choice (not worth a calibration). A calibration
//   that fails (no space, no O_TMPFILE nor a writable folder) chooses the
//   page cache: it never fails the save.
//
// Thread safety: choose() and use_direct_writes() may be called from any
// thread; a device is calibrated once even if several saves ask at once
// (the others wait for its verdict). Errors: Error(invalid_argument) for
// an MODELZIP_DIRECT_WRITES value other than 0, 1 and auto.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace modelzip::io {

enum class DirectWrites { off, on, automatic };

// The MODELZIP_DIRECT_WRITES setting (automatic when unset).
DirectWrites direct_writes_setting();

inline constexpr std::uint64_t kCalibrateFrom = std::uint64_t{128} << 20;
inline constexpr std::size_t kCalibrationBytes = std::size_t{8} << 20;

// Seconds to write kCalibrationBytes and make them durable, each way.
struct WriteTimings {
  double direct = 0, buffered = 0;
};

// The per-device verdicts of one process. The measurement is a parameter so
// that the decision logic can be tested without timing anything.
class DirectWriteChooser {
 public:
  // Measures the device of `folder`; nullopt if it could not.
  using Measure = std::function<std::optional<WriteTimings>(const std::filesystem::path& folder)>;
  explicit DirectWriteChooser(Measure measure) : measure_(std::move(measure)) {}

  // Whether a durable save of `bytes` into an archive in `folder`, on
  // device `device`, writes directly under `setting`.
  bool choose(DirectWrites setting, dev_t device, const std::filesystem::path& folder,
              std::uint64_t bytes);
  // The verdict kept for `device`, if it was calibrated.
  std::optional<bool> verdict(dev_t device) const;

 private:
  Measure measure_;
  mutable std::mutex mutex_;  // guards verdicts_; held during a calibration
  std::map<dev_t, bool> verdicts_;
};

// Both ways on the device of `folder` (the measurement of the process-wide
// chooser).
std::optional<WriteTimings> measure_write_paths(const std::filesystem::path& folder);

// The process-wide choice for a durable save of `bytes` into the archive
// at `archive` (its folder and device).
bool use_direct_writes(const std::filesystem::path& archive, std::uint64_t bytes);

}  // namespace modelzip::io
