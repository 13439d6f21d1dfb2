// MpiCommunicator: the MPI backend of modelzip::Communicator (header-only,
// so that libmodelzip itself never links MPI; a program that includes this
// header links its MPI, e.g. `dependency('mpi', language : 'cpp')` in meson
// or `mpicxx`).
//
// Construction is collective (MPI_Comm_dup of the given communicator, so
// modelzip's messages never mix with the application's) and must happen
// after MPI_Init; destroy it before MPI_Finalize. Errors of the duplicate are
// returned, not fatal (MPI_ERRORS_RETURN), and every operation is a
// non-blocking MPI-3 collective polled until `timeout`: an engine error or a
// time-out throws modelzip::Error(io) naming the operation and this rank,
// instead of hanging on a rank that died or never called. The time-out
// bounds each phase of a commit, so it must exceed the time the slowest
// rank needs to write its data (default 30 minutes); after a time-out the
// communicator is unusable (MPI cannot cancel a collective).
//
// Thread safety: one thread at a time (MPI_THREAD_SERIALIZED suffices).
//
// Warnings: this header needs only MPI's C API. Open MPI's <mpi.h> also
// brings its deprecated C++ bindings, which g++'s -Wextra warns about
// (-Wcast-function-type) in any program that includes <mpi.h>; compile
// with -DOMPI_SKIP_MPICXX (as modelzip's own build does) to leave them out.
#pragma once

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "modelzip/dist/communicator.hpp"
#include "modelzip/error.hpp"

namespace modelzip {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD,
                           std::chrono::milliseconds timeout = std::chrono::minutes(30))
      : timeout_(timeout) {
    check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm comm() const noexcept { return comm_; }

  std::vector<std::string> gather(std::string_view bytes, int root) override {
    const int n = count_of(bytes.size(), "gather");
    std::vector<int> counts(rank_ == root ? static_cast<std::size_t>(size_) : 0);
    MPI_Request r;
    check(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm_, &r), "MPI_Igather");
    wait(r, "MPI_Igather");
    std::vector<int> displs(counts.size());
    long long total = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      if (total > INT_MAX - counts[i])
        throw Error(ErrorCode::invalid_argument, "MPI gather: more than 2 GiB of records in total");
      displs[i] = static_cast<int>(total);
      total += counts[i];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    check(MPI_Igatherv(bytes.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(),
                       MPI_BYTE, root, comm_, &r),
          "MPI_Igatherv");
    wait(r, "MPI_Igatherv");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < counts.size(); ++i)
      out.push_back(
          all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(counts[i])));
    return out;
  }

  std::string broadcast(std::string_view bytes, int root) override {
    int n = rank_ == root ? count_of(bytes.size(), "broadcast") : 0;
    MPI_Request r;
    check(MPI_Ibcast(&n, 1, MPI_INT, root, comm_, &r), "MPI_Ibcast");
    wait(r, "MPI_Ibcast");
    std::string out =
        rank_ == root ? std::string(bytes) : std::string(static_cast<std::size_t>(n), '\0');
    check(MPI_Ibcast(out.data(), n, MPI_BYTE, root, comm_, &r), "MPI_Ibcast");
    wait(r, "MPI_Ibcast");
    return out;
  }

  std::optional<Failure> agree(std::string_view error) override {
    int mine = error.empty() ? INT_MAX : rank_, first = INT_MAX;
    MPI_Request r;
    check(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_, &r), "MPI_Iallreduce");
    wait(r, "MPI_Iallreduce");
    if (first == INT_MAX) return std::nullopt;
    return Failure{first, broadcast(error, first)};
  }

 private:
  int count_of(std::size_t n, const char* op) const {
    if (n > static_cast<std::size_t>(INT_MAX))
      throw Error(ErrorCode::invalid_argument,
                  std::string("MPI ") + op + ": more than 2 GiB from one rank");
    return static_cast<int>(n);
  }
  void check(int rc, const char* op) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw Error(ErrorCode::io, std::string(op) + " failed on rank " + std::to_string(rank_) + ": " +
                                   std::string(text, static_cast<std::size_t>(len)));
  }
  // Polls `r` (sleeping a little between tests, so that idle ranks leave
  // the CPU to the ones still writing) until it completes or time runs out.
  void wait(MPI_Request& r, const char* op) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (int spins = 0;; ++spins) {
      int done = 0;
      check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), op);
      if (done) return;
      if (std::chrono::steady_clock::now() > deadline)
        throw Error(ErrorCode::io, std::string(op) + " timed out after " +
                                       std::to_string(timeout_.count()) + " ms on rank " +
                                       std::to_string(rank_) +
                                       " (another rank failed or never called it)");
      if (spins > 20)
        std::this_thread::sleep_for(std::chrono::microseconds(spins > 200 ? 1000 : 100));
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_;
};

}  // namespace modelzip
