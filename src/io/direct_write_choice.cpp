#include "io/direct_write_choice.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "io/anonymous_buffer.hpp"
#include "io/posix_file.hpp"
#include "io/shared_file_writer.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {

DirectWrites direct_writes_setting() {
  const char* v = std::getenv("MODELZIP_DIRECT_WRITES");
  if (!v || !*v) return DirectWrites::automatic;
  const std::string s(v);
  if (s == "0") return DirectWrites::off;
  if (s == "1") return DirectWrites::on;
  if (s == "auto") return DirectWrites::automatic;
  throw Error(ErrorCode::invalid_argument,
              "MODELZIP_DIRECT_WRITES must be 0, 1 or auto, not '" + s + "'");
}

bool DirectWriteChooser::choose(DirectWrites setting, dev_t device,
                                const std::filesystem::path& folder, std::uint64_t bytes) {
  if (setting != DirectWrites::automatic) return setting == DirectWrites::on;
  if (bytes < kCalibrateFrom) return true;
  std::lock_guard lock(mutex_);
  if (const auto it = verdicts_.find(device); it != verdicts_.end()) return it->second;
  std::optional<WriteTimings> t;
  try {
    t = measure_(folder);
  } catch (const std::exception&) {
    t.reset();
  }
  const bool direct = t && t->direct <= t->buffered;
  verdicts_[device] = direct;
  return direct;
}

std::optional<bool> DirectWriteChooser::verdict(dev_t device) const {
  std::lock_guard lock(mutex_);
  const auto it = verdicts_.find(device);
  if (it == verdicts_.end()) return std::nullopt;
  return it->second;
}

namespace {

using Clock = std::chrono::steady_clock;

// An unnamed file in `folder` (O_TMPFILE, else a name removed at once).
UniqueFd unnamed_file(const std::filesystem::path& folder) {
  int fd = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return UniqueFd(fd);
  const std::filesystem::path name =
      folder / (".modelzip-calibration-" + std::to_string(::getpid()));
  fd = ::open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return UniqueFd();
  ::unlink(name.c_str());
  return UniqueFd(fd);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::optional<WriteTimings> measure_write_paths(const std::filesystem::path& folder) {
  // Not zeros: some virtual disks treat zero blocks specially.
  AnonymousBuffer data = anonymous_buffer(kCalibrationBytes, false);
  for (std::size_t i = 0; i < kCalibrationBytes; i += 4096)
    std::memset(data.get() + i, static_cast<int>((i >> 12) * 37 + 1), 4096);
  WriteTimings best{1e30, 1e30};
  for (int round = 0; round < 2; ++round) {
    {
      UniqueFd f = unnamed_file(folder);
      if (!f.valid()) return std::nullopt;
      const auto start = Clock::now();
      if (::pwrite(f.get(), data.get(), kCalibrationBytes, 0) !=
              static_cast<ssize_t>(kCalibrationBytes) ||
          ::fsync(f.get()) != 0)
        return std::nullopt;
      best.buffered = std::min(best.buffered, seconds_since(start));
    }
    {
      UniqueFd f = unnamed_file(folder);
      if (!f.valid()) return std::nullopt;
      const auto start = Clock::now();
      preallocate(f.get(), 0, kCalibrationBytes);
      std::unique_ptr<SharedFileWriter> w = SharedFileWriter::reopen(f.get(), {}, false);
      if (!w) return std::nullopt;
      w->write(data.get(), kCalibrationBytes, 0);
      w->finish();
      if (w->direct_bytes() == 0 || ::fsync(f.get()) != 0) return std::nullopt;
      best.direct = std::min(best.direct, seconds_since(start));
    }
  }
  return best;
}

bool use_direct_writes(const std::filesystem::path& archive, std::uint64_t bytes) {
  static DirectWriteChooser chooser(measure_write_paths);
  const DirectWrites setting = direct_writes_setting();
  std::filesystem::path folder = archive.parent_path();
  if (folder.empty()) folder = ".";
  struct stat st {};
  // A folder that cannot be examined fails the save itself, with its error.
  if (::stat(folder.c_str(), &st) != 0) return setting != DirectWrites::off;
  return chooser.choose(setting, st.st_dev, folder, bytes);
}

}  // namespace modelzip::io
