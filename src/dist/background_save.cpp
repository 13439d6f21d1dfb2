// BackgroundCollectiveSave: the snapshot on the caller's thread (the staging
// area of checkpoint/staging_area.hpp and tag_snapshot.hpp, shared with
// BackgroundSave), then the collective commit (dist/detached_commit.hpp) on a
// worker thread; the saves of the process form one chain, each waiting for
// the one started before it.
#include "modelzip/dist/background_save.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "checkpoint/staging_area.hpp"
#include "checkpoint/tag_snapshot.hpp"
#include "dist/detached_commit.hpp"
#include "modelzip/error.hpp"

namespace modelzip {

struct BackgroundCollectiveSave::State {
  std::string tag;
  BackgroundCollectiveOptions options;
  std::optional<dist::DetachedCommit> commit;  // dropped by the worker once run
  std::shared_ptr<detail::StagingBuffer> staging;
  std::thread worker;  // joined by the owning handle (wait or destructor)

  std::atomic<bool> ended{false};
  std::mutex mutex;
  std::condition_variable ended_cv;
  // Guarded by mutex:
  std::shared_ptr<State> previous;  // the save started before this one
  CollectiveStats stats;
  std::exception_ptr error;
  bool error_reported = false;

  void wait_ended() {
    std::unique_lock lock(mutex);
    ended_cv.wait(lock, [&] { return ended.load(); });
  }
  void end(std::exception_ptr failure, CollectiveStats result) {
    std::lock_guard lock(mutex);
    error = std::move(failure);
    stats = result;
    ended.store(true);
    ended_cv.notify_all();
  }
};

namespace {

using State = BackgroundCollectiveSave::State;

// The newest save of the process, and the newest failed save whose handle
// went away before any wait() reported its error. Allocated once and never
// destroyed (workers may still run during static destruction).
class SaveChain {
 public:
  static SaveChain& instance() {
    static SaveChain* chain = new SaveChain;
    return *chain;
  }

  // Throws the error of a failed save nobody can report any more.
  void throw_abandoned_failure() {
    std::shared_ptr<State> failed;
    {
      std::lock_guard lock(mutex_);
      failed = std::move(abandoned_);
    }
    if (!failed) return;
    try {
      std::rethrow_exception(failed->error);
    } catch (const Error& e) {
      throw e.reworded("an earlier background save (tag '" + failed->tag +
                           "') failed and nobody waited for it: " + e.message(),
                       e.context());
    }
  }

  // Makes `state` the newest save; it waits for the one before it.
  void append(const std::shared_ptr<State>& state) {
    std::lock_guard lock(mutex_);
    if (last_ && !last_->ended.load()) {
      std::lock_guard state_lock(state->mutex);
      state->previous = last_;
    }
    last_ = state;
  }

  // Called when a handle lets go of an ended save.
  void let_go(const std::shared_ptr<State>& state) {
    {
      std::lock_guard state_lock(state->mutex);
      if (!state->error || state->error_reported) return;
      state->error_reported = true;
    }
    std::lock_guard lock(mutex_);
    abandoned_ = state;
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<State> last_;
  std::shared_ptr<State> abandoned_;
};

void run_save(const std::shared_ptr<State>& state) {
  std::shared_ptr<State> previous;
  {
    std::lock_guard lock(state->mutex);
    previous = std::move(state->previous);
  }
  if (previous) previous->wait_ended();
  previous.reset();
  std::exception_ptr failure;
  CollectiveStats stats;
  try {
    stats = state->commit->run(state->tag,
                               CollectiveCommitOptions{.replace = state->options.replace,
                                                       .keep_last = state->options.keep_last});
  } catch (...) {
    failure = std::current_exception();
  }
  state->commit.reset();
  state->options.adopt.clear();  // their owners may reuse them
  detail::StagingPool::instance().release(state->staging, state->options.keep_staging);
  state->end(failure, stats);
}

// Waits for the save of `state` and joins its worker.
void finish(const std::shared_ptr<State>& state) {
  state->wait_ended();
  if (state->worker.joinable()) state->worker.join();
}

}  // namespace

BackgroundCollectiveSave BackgroundCollectiveSave::start(CollectiveWriter& writer, std::string tag,
                                                         BackgroundCollectiveOptions options) {
  SaveChain& chain = SaveChain::instance();
  chain.throw_abandoned_failure();
  auto state = std::make_shared<State>();
  state->tag = std::move(tag);
  state->options = std::move(options);
  state->commit.emplace(*writer.impl_);
  dist::DetachedCommit& commit = *state->commit;
  // A snapshot that fails here fails the commit on every rank (its first
  // agreed step) rather than leaving the other ranks waiting for this one.
  try {
    const std::vector<const Bytes*> buffers = commit.buffers();
    const std::span<const Bytes> adopted = state->options.adopt;
    const std::uint64_t size = detail::staged_size(buffers, adopted);
    if (size > SIZE_MAX) throw std::bad_alloc();
    if (size > 0)
      state->staging = detail::StagingPool::instance().take(static_cast<std::size_t>(size));
    const unsigned threads = state->options.copy_threads != 0 ? state->options.copy_threads
                                                              : detail::copy_threads_for(size);
    commit.replace_buffers(
        detail::stage_buffers(buffers, state->staging, threads, nullptr, adopted));
  } catch (const std::bad_alloc&) {
    state->staging.reset();
    commit.fail_first_step(std::make_exception_ptr(
        Error(ErrorCode::io, "not enough memory to snapshot the tensors of a background save",
              commit.context())));
  }
  chain.append(state);
  try {
    state->worker = std::thread([state] { run_save(state); });
  } catch (const std::system_error&) {
    run_save(state);  // no thread to be had: the save runs here (every rank must run it)
  }
  return BackgroundCollectiveSave(std::move(state));
}

BackgroundCollectiveSave::BackgroundCollectiveSave(BackgroundCollectiveSave&&) noexcept = default;

BackgroundCollectiveSave& BackgroundCollectiveSave::operator=(
    BackgroundCollectiveSave&& other) noexcept {
  if (this != &other) {
    if (state_) {
      finish(state_);
      SaveChain::instance().let_go(state_);
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

BackgroundCollectiveSave::~BackgroundCollectiveSave() {
  if (!state_) return;
  finish(state_);
  SaveChain::instance().let_go(state_);
}

CollectiveStats BackgroundCollectiveSave::wait() {
  if (!state_)
    throw Error(ErrorCode::invalid_argument, "wait() on an empty BackgroundCollectiveSave");
  finish(state_);
  std::lock_guard lock(state_->mutex);
  if (state_->error) {
    state_->error_reported = true;
    std::rethrow_exception(state_->error);
  }
  return state_->stats;
}

bool BackgroundCollectiveSave::done() const noexcept {
  return state_ && state_->ended.load();
}

}  // namespace modelzip
