// Communicator: the few collective operations a distributed commit needs
// (and only those: every operation here has a caller in the library),
// behind one interface with one backend per engine. modelzip never builds
// its own networking: MPI (modelzip/dist/mpi.hpp), torch.distributed and mpi4py
// (the Python module modelzip.distributed) implement this interface.
//
// Contract for implementations:
//  - Every operation is collective: all ranks of the group call it, in the
//    same order, with the same `root`. Payloads are opaque bytes (std::string
//    is used as a byte container).
//  - An operation that cannot complete (an engine error, a rank that died, a
//    time-out) throws modelzip::Error; the message names the operation and,
//    where the engine says so, the rank. Backends set a time-out so that a
//    lost rank never hangs the others forever.
//  - Thread safety: one thread at a time per Communicator.
//
// On top of these, agree() gives every rank the same verdict about a step
// that may have failed on some ranks: modelzip's collective code calls it at
// the end of every phase, so that a failure on one rank becomes the same
// Error on every rank (naming the rank) instead of a hang or a partial commit.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/export.hpp"

namespace modelzip {

class MODELZIP_API Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every rank's `bytes`, indexed by rank, at `root`; an empty vector on the
  // other ranks.
  virtual std::vector<std::string> gather(std::string_view bytes, int root) = 0;
  // `bytes` of `root`, on every rank (the argument is ignored elsewhere).
  virtual std::string broadcast(std::string_view bytes, int root) = 0;
  // Every rank passes "" (its step succeeded) or an error message. Returns,
  // on every rank, the lowest failing rank and its message, or nullopt when
  // all succeeded.
  struct Failure {
    int rank = 0;
    std::string message{};
  };
  virtual std::optional<Failure> agree(std::string_view error) = 0;
};

}  // namespace modelzip
