// BackgroundCollectiveSave: a collective commit (CollectiveWriter::commit)
// that runs in a background thread, so that every rank only waits for a copy
// of its own staged tensors.
//
//   MpiCommunicator training(MPI_COMM_WORLD);    // the application's
//   MpiCommunicator saves(MPI_COMM_WORLD);       // its own MPI_Comm_dup:
//                                                // used by background saves only
//   CollectiveWriter w("model.zip", saves);
//   w.add_shard("fc.weight", my_rows, {4096, 1024}, my_block);
//   auto save = BackgroundCollectiveSave::start(w, "step-100");  // every rank
//   ... go on training, change the tensors ...
//   CollectiveStats stats = save.wait();  // throws what the commit threw
//
// start() copies every tensor and entry staged in `writer` into a staging
// area (host memory, several threads; kept for later saves of this process
// that fit in it, shared with modelzip::BackgroundSave), leaves the writer
// with nothing staged (ready for the next save) and returns; a background
// thread then runs the collective commit with its guarantees
// (modelzip/dist/distributed.hpp): the old archive or the new one, also when
// a rank is killed. Changing or freeing the staged tensors after start()
// returns never reaches the archive.
//
// The communicator: the background thread uses the writer's communicator,
// which must therefore be used by nothing else while background saves run
// (Communicator allows one thread at a time): give the writer a
// communicator of its own over the same ranks (MpiCommunicator makes one
// with MPI_Comm_dup; a torch.distributed group of its own,
// modelzip.distributed does so). It must outlive the saves (and, for MPI,
// every save must have ended before MPI_Finalize).
//
// Collective: every rank calls start() for the same saves in the same order
// (like commit()). The background saves of a process run one after another,
// in the order of their start() calls, whatever their archives (so one
// save at a time per archive, and one thread at a time on a communicator);
// start() never blocks on an earlier save.
//
// Errors: wait() throws the commit's Error, the same on every rank (naming
// the failing rank, as commit() does). A rank whose snapshot fails (not
// enough memory) does not throw from start(): its save fails the commit on
// every rank at its first step. A failed save whose handle went away before
// any wait() reported its error makes the next start() throw it
// ("an earlier background save ... failed and nobody waited for it: ...";
// nothing is taken from the writer then), on every rank alike since the
// error is the same everywhere, so that a failure is never silent.
//
// Lifetime: destroying a BackgroundCollectiveSave (or assigning over it)
// waits for its save without throwing; so normal process exit waits for
// saves whose handles are destroyed then. Cancellation does not exist: one
// rank alone cannot leave a collective.
//
// Thread safety: start() may be called from any thread, one call at a time
// per writer. One handle must not be used by two threads at once, except
// done(), which may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "modelzip/dist/distributed.hpp"
#include "modelzip/export.hpp"

namespace modelzip {

struct MODELZIP_API BackgroundCollectiveOptions {
  // Keep the staging memory after the save for later saves of this
  // process; false: it is freed when the save ends, and so are the idle
  // buffers earlier saves kept.
  bool keep_staging = true;
  // Threads copying into the staging area; 0: one per core (at most 8,
  // fewer for small snapshots).
  unsigned copy_threads = 0;
  // Buffers the save takes over as its snapshot instead of copying them,
  // as BackgroundSaveOptions::adopt (modelzip/background_save.hpp): staged
  // bytes lying wholly inside one of them are written from there; they are
  // kept alive until the save ends and must not change after start().
  std::vector<Bytes> adopt{};
  // The commit's rotation (CollectiveWriter::commit with
  // CollectiveCommitOptions): replace the tag of the same name, then keep
  // only the newest keep_last tags. Invalid values fail the save on every
  // rank (wait() throws), as commit() does.
  bool replace = false;
  std::optional<std::size_t> keep_last{};
};

class MODELZIP_API BackgroundCollectiveSave {
 public:
  // Snapshots what `writer` has staged and starts committing it as `tag`
  // in the background (see above). The writer may be destroyed or reused
  // right after.
  static BackgroundCollectiveSave start(CollectiveWriter& writer, std::string tag,
                                        BackgroundCollectiveOptions options = {});

  BackgroundCollectiveSave() = default;  // no save: valid() is false
  BackgroundCollectiveSave(BackgroundCollectiveSave&&) noexcept;
  BackgroundCollectiveSave& operator=(BackgroundCollectiveSave&&) noexcept;  // waits first
  ~BackgroundCollectiveSave();                                               // waits

  bool valid() const noexcept { return state_ != nullptr; }
  // Waits until the save has ended and returns this rank's statistics, or
  // throws its error; may be called again (same result).
  CollectiveStats wait();
  // True once the save has ended (committed or failed).
  bool done() const noexcept;

  struct State;

 private:
  explicit BackgroundCollectiveSave(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace modelzip
