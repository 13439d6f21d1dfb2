// BackgroundSave: the snapshot on the caller's thread, then Writer::open,
// add_tag and commit on a worker thread; a process-wide registry orders the
// saves of one archive (idle staging buffers: detail::StagingPool).
#include "modelzip/background_save.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "checkpoint/polled_lock_waits.hpp"
#include "checkpoint/staging_area.hpp"
#include "checkpoint/tag_snapshot.hpp"
#include "format/tag_name.hpp"
#include "modelzip/error.hpp"
#include "zip/known_crcs.hpp"

namespace modelzip {

namespace {
enum class Phase : int { waiting, writing, ended };
}  // namespace

struct BackgroundSave::State {
  std::filesystem::path archive;
  std::string tag;
  BackgroundSaveOptions options;
  NewTag snapshot;                   // dropped by the worker once written
  std::uint64_t snapshot_bytes = 0;  // copied into `staging` by start()
  std::shared_ptr<detail::StagingBuffer> staging;
  // The CRC-32s of the snapshot's buffers, computed while copying them.
  std::shared_ptr<zip::KnownCrcs> crcs;
  std::thread worker;  // joined by the owning BackgroundSave (wait or destructor)

  std::atomic<Phase> phase{Phase::waiting};
  mutable std::mutex mutex;
  std::condition_variable ended;
  // Guarded by mutex:
  bool cancelled = false;
  std::shared_ptr<State> previous;  // an earlier save of the archive this one waits for
  Writer::Stats stats;
  std::exception_ptr error;
  bool error_reported = false;

  void wait_ended() {
    std::unique_lock lock(mutex);
    ended.wait(lock, [&] { return phase.load() == Phase::ended; });
  }
  void end(std::exception_ptr failure, Writer::Stats result) {
    std::lock_guard lock(mutex);
    error = std::move(failure);
    stats = result;
    phase.store(Phase::ended);
    ended.notify_all();
  }
  // The error if it has not been reported yet (and marks it reported).
  std::exception_ptr take_unreported_error() {
    std::lock_guard lock(mutex);
    if (!error || error_reported) return nullptr;
    error_reported = true;
    return error;
  }
};

namespace {

using State = BackgroundSave::State;

// The saves of this process, by archive.
// Allocated once and never destroyed, so that workers still running during
// static destruction never see it gone.
class SaveRegistry {
 public:
  static SaveRegistry& instance() {
    static SaveRegistry* registry = new SaveRegistry;
    return *registry;
  }

  // Registers `state` as the newest save of its archive (waiting first, on
  // the caller's thread, while two saves of the archive are in flight), or
  // throws an earlier save's unreported error. A null `state` only waits
  // and checks.
  void enqueue(const std::string& key, const std::shared_ptr<State>& state) {
    std::unique_lock lock(mutex_);
    for (;;) {
      Archive& a = archives_[key];
      if (a.failed) {
        std::shared_ptr<State> failed = std::move(a.failed);
        if (std::exception_ptr e = failed->take_unreported_error()) rethrow_as_earlier(e);
      }
      std::shared_ptr<State> last = a.last.lock();
      std::shared_ptr<State> older;
      if (last) {
        std::lock_guard state_lock(last->mutex);
        older = last->previous;
      }
      if (!older) {
        if (!state) return;
        if (last && last->phase.load() != Phase::ended) {
          std::lock_guard state_lock(state->mutex);
          state->previous = last;
        }
        a.last = state;
        return;
      }
      lock.unlock();
      older->wait_ended();
      lock.lock();
    }
  }

  void record_failure(const std::string& key, const std::shared_ptr<State>& state) {
    std::lock_guard lock(mutex_);
    archives_[key].failed = state;
  }

 private:
  struct Archive {
    std::weak_ptr<State> last;      // the newest save
    std::shared_ptr<State> failed;  // the newest failed save, until its error is reported
  };

  [[noreturn]] static void rethrow_as_earlier(std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const Error& error) {
      throw error.reworded("an earlier background save failed: " + error.message(),
                           error.context());
    }
  }

  std::mutex mutex_;
  std::map<std::string, Archive> archives_;
};

// The registry's name for an archive: its canonical path (a symbolic link
// resolved, as Writer::open does).
std::string archive_key(const std::filesystem::path& archive) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(archive, ec);
  if (ec) p = std::filesystem::absolute(archive, ec).lexically_normal();
  return p.string();
}

void run_save(const std::shared_ptr<State>& state, const std::string& key) {
  std::shared_ptr<State> previous;
  {
    std::lock_guard lock(state->mutex);
    previous = state->previous;
  }
  if (previous) {
    previous->wait_ended();
    previous.reset();
    std::lock_guard lock(state->mutex);
    state->previous.reset();
  }
  bool cancelled;
  {
    std::lock_guard lock(state->mutex);
    cancelled = state->cancelled;
    if (!cancelled) state->phase.store(Phase::writing);
  }
  std::exception_ptr failure;
  Writer::Stats stats;
  if (cancelled) {
    failure = std::make_exception_ptr(Error(ErrorCode::cancelled, "background save cancelled",
                                            {state->archive.string(), "", state->tag}));
  } else {
    try {
      const zip::KnownCrcs::Scope known(state->crcs);
      const checkpoint::PolledLockWaits polled;  // a stop (progress) ends a wait for the lock
      Writer writer = Writer::open(state->archive, state->options.writer);
      if (state->options.replace)
        writer.replace_tag(state->tag, std::move(state->snapshot));
      else
        writer.add_tag(state->tag, std::move(state->snapshot));
      if (state->options.keep_last) writer.keep_last(*state->options.keep_last);
      if (state->options.update_metadata) writer.update_metadata(state->options.update_metadata);
      writer.commit();
      stats = writer.last_stats();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  state->snapshot = NewTag();
  state->options.adopt.clear();  // their owners may reuse them (the Python staging areas)
  state->crcs.reset();
  detail::StagingPool::instance().release(state->staging, state->options.keep_staging);
  state->end(failure, stats);
  // After end(): a start() that finds the failure also finds its error.
  if (failure && !cancelled) SaveRegistry::instance().record_failure(key, state);
}

}  // namespace

BackgroundSave BackgroundSave::start(const std::filesystem::path& archive, std::string tag,
                                     const NewTag& contents, BackgroundSaveOptions options) {
  format::check_tag(tag);
  if (options.keep_last)  // refused before anything is copied
    format::check_keep_last(*options.keep_last, ErrorContext{.archive = archive.string()});
  auto state = std::make_shared<State>();
  state->archive = archive;
  state->tag = std::move(tag);
  state->options = std::move(options);
  const std::string key = archive_key(archive);
  SaveRegistry& registry = SaveRegistry::instance();
  registry.enqueue(key, nullptr);  // an earlier error, or too many saves in flight: before copying

  const std::span<const Bytes> adopted = state->options.adopt;
  const std::uint64_t size = detail::snapshot_size(contents, adopted);
  if (size > SIZE_MAX) throw std::bad_alloc();
  if (size > 0)
    state->staging = detail::StagingPool::instance().take(static_cast<std::size_t>(size));
  state->snapshot_bytes = size;
  const unsigned threads = state->options.copy_threads != 0 ? state->options.copy_threads
                                                            : detail::copy_threads_for(size);
  state->crcs = std::make_shared<zip::KnownCrcs>();
  state->snapshot =
      detail::snapshot_tag(contents, state->staging, threads, state->crcs.get(), adopted);

  registry.enqueue(key, state);
  try {
    state->worker = std::thread([state, key] { run_save(state, key); });
  } catch (const std::system_error& e) {
    const Error error(ErrorCode::io, std::string("cannot start a background save: ") + e.what(),
                      {archive.string(), "", state->tag});
    {
      std::lock_guard lock(state->mutex);
      state->error_reported = true;  // thrown here
    }
    state->end(std::make_exception_ptr(error), {});
    throw error;
  }
  return BackgroundSave(std::move(state));
}

BackgroundSave::BackgroundSave(BackgroundSave&&) noexcept = default;

BackgroundSave& BackgroundSave::operator=(BackgroundSave&& other) noexcept {
  if (this != &other) {
    if (state_) {
      state_->wait_ended();
      if (state_->worker.joinable()) state_->worker.join();
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

BackgroundSave::~BackgroundSave() {
  if (!state_) return;
  state_->wait_ended();
  if (state_->worker.joinable()) state_->worker.join();
}

Writer::Stats BackgroundSave::wait() {
  if (!state_) throw Error(ErrorCode::invalid_argument, "wait() on an empty BackgroundSave");
  state_->wait_ended();
  if (state_->worker.joinable()) state_->worker.join();
  std::lock_guard lock(state_->mutex);
  if (state_->error) {
    state_->error_reported = true;
    std::rethrow_exception(state_->error);
  }
  return state_->stats;
}

bool BackgroundSave::done() const noexcept {
  return state_ && state_->phase.load() == Phase::ended;
}

bool BackgroundSave::started() const noexcept {
  return state_ && state_->phase.load() != Phase::waiting;
}

std::uint64_t BackgroundSave::snapshot_bytes() const noexcept {
  return state_ ? state_->snapshot_bytes : 0;
}

bool BackgroundSave::cancel() noexcept {
  if (!state_) return false;
  std::lock_guard lock(state_->mutex);
  if (state_->cancelled) return true;
  if (state_->phase.load() != Phase::waiting) return false;
  state_->cancelled = true;
  return true;
}

}  // namespace modelzip
