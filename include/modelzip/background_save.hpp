// BackgroundSave: adds a tag to an archive in a background thread, so that
// the caller only waits for a copy of the tag's bytes.
//
//   auto save = BackgroundSave::start("model.zip", "step-100", contents);
//   ... go on training, change the tensors ...
//   Writer::Stats stats = save.wait();  // throws what the save threw
//
// start() copies every byte of `contents` into a staging area (host memory,
// several threads; kept for later saves of this process that fit in it),
// except the buffers the caller hands over (BackgroundSaveOptions::adopt),
// and returns; a background thread then does what Writer::open, add_tag
// (replace_tag with BackgroundSaveOptions::replace), keep_last (with
// BackgroundSaveOptions::keep_last) and commit would do, with the same
// guarantees: the archive holds the old contents or the new ones, never a
// mix, also when the process is killed (the next writer recovers an
// interrupted append). Changing or freeing the caller's buffers after
// start() returns never reaches the archive.
//
// One save at a time per archive per process (archives are told apart by
// their canonical path): a save started while another save of the same
// archive is in flight waits in its thread until that one has finished; a
// third start() blocks the caller until the first has finished (so at most
// two snapshots of one archive exist). Errors of the Writer::open, add_tag
// (e.g. a tag that exists, without replace) and commit are thrown by
// wait(); an error no wait() has reported is thrown by the next start() for
// the same archive (which then starts nothing), so a failed save is never
// silent.
//
// Lifetime: destroying a BackgroundSave waits for its save (without
// throwing); saves whose handle was moved away or released keep running,
// and normal process exit (static destruction) waits for every save still
// in flight. A killed process leaves the old archive (or the new one).
//
// Stopping: the save's progress callback (options.writer.progress) is
// asked as Writer::commit asks it, and also, with 0 of 0 bytes, every 50 ms
// while the save waits for another writer's lock (of this process or
// another): returning false there cancels the save (wait() throws
// Error(cancelled), the archive untouched), so that a stop flag set by
// another thread ends that wait too.
//
// Thread safety: start() may be called from any thread. One BackgroundSave
// must not be used by two threads at once, except done(), which may be
// called from any thread. Progress and on_wait callbacks of the options run
// in the background thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "modelzip/export.hpp"
#include "modelzip/metadata.hpp"
#include "modelzip/writer.hpp"

namespace modelzip {

struct MODELZIP_API BackgroundSaveOptions {
  WriterOptions writer{};
  // The tag replaces the archive's tag of the same name (matched without
  // regard to case) if there is one at commit, as Writer::replace_tag: one
  // commit removes the old tag and adds the new one as the newest, so
  // readers see the old tag or the new one. False: a tag of that name is an
  // error (Error(already_exists), thrown by wait()).
  bool replace = false;
  // When set, the commit then keeps only the newest `keep_last` tags, as
  // Writer::keep_last staged after the tag (the oldest tags beyond it are
  // removed in the same commit, also those another writer added meanwhile).
  // 0 is an argument error (Error(invalid_argument), thrown by start()).
  std::optional<std::size_t> keep_last{};
  // When set, called once in the background at commit (Writer::update_metadata).
  std::function<void(Metadata&)> update_metadata{};
  // Keep the staging memory after the save for later saves of this
  // process; false: it is freed when the save ends, and so are the idle
  // buffers earlier saves kept.
  bool keep_staging = true;
  // Threads copying into the staging area; 0: one per core (at most 8,
  // fewer for small tags).
  unsigned copy_threads = 0;
  // Buffers the save takes over as its snapshot instead of copying them:
  // a buffer of `contents` lying wholly inside one of them is written from
  // where it is (and checksummed in the background), not copied into the
  // staging area. The save keeps them alive (these Bytes) until it ends;
  // the caller promises that their bytes do not change after start().
  // (Python's save_async fetches CUDA tensors into such buffers, so that
  // the device's bytes are not copied again.)
  std::vector<Bytes> adopt{};
};

class MODELZIP_API BackgroundSave {
 public:
  // Snapshots `contents` and starts adding it as tag `tag` to the archive
  // at `archive` (created when missing). Throws std::bad_alloc when the
  // staging memory cannot be had, Error(invalid_argument) for a tag name
  // that can never be valid or an option Writer refuses (keep_last 0), and
  // the unreported error of an earlier background save of the same archive
  // (see above); nothing is copied or started then.
  static BackgroundSave start(const std::filesystem::path& archive, std::string tag,
                              const NewTag& contents, BackgroundSaveOptions options = {});

  BackgroundSave() = default;  // no save: valid() is false
  BackgroundSave(BackgroundSave&&) noexcept;
  BackgroundSave& operator=(BackgroundSave&&) noexcept;  // waits for the save it replaces
  ~BackgroundSave();                                     // waits for the save

  bool valid() const noexcept { return state_ != nullptr; }
  // Waits until the save has ended and returns the commit's statistics, or
  // throws its error (Error(cancelled) after cancel()); may be called
  // again (same result).
  Writer::Stats wait();
  // True once the save has ended (written, failed or cancelled).
  bool done() const noexcept;
  // True once the save has started writing (or ended).
  bool started() const noexcept;
  // Cancels a save that has not started writing (it waits for an earlier
  // save of the same archive): returns true and the archive is never
  // touched by it; false if it has started or ended.
  bool cancel() noexcept;
  // Staging bytes start() filled with copies (each buffer rounded up to 64
  // bytes; buffers inside BackgroundSaveOptions::adopt are not copied).
  std::uint64_t snapshot_bytes() const noexcept;

  struct State;

 private:
  explicit BackgroundSave(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace modelzip
