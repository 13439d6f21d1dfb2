// One kill trial of the collective commit, run under mpirun by
// kill_trials.py:
//
//   kill_trial ARCHIVE TAG VERSION [comm:K | SYSOP:K] [RANK]
//   kill_trial --in-flight ARCHIVE STEPS ROWS COLS
//
// Every rank stages its part of the test model (tests/dist/model.hpp) at
// VERSION and commits TAG. With comm:K, rank RANK kills itself (SIGKILL)
// right before its K-th collective operation; with SYSOP:K (write, fsync,
// unlink, ...) right before its K-th such system call. mpirun then aborts
// the job. Without a kill spec, after the commit every rank reads every
// tag of the archive and checks its values: tag "step-V" holds version V.
// MODELZIP_KILL_TRIAL_KEEP_LAST=N commits with keep_last N (the rotation
// trials).
//
// --in-flight: the C++ MPI side of kill_trials.py's writes-in-flight
// trials (the same as kill_worker.py): every step, tag step-K of a float32
// ROWS x COLS matrix split unevenly by rows (rank r holds a share
// proportional to r + 1), with a communicator time-out of 5 s; each rank
// writes its pid to ARCHIVE.rank<R>.pid first, so that the trial can kill
// it. A failed save prints "save failed: <message>" and exits with 3.
#include <mpi.h>

#include <unistd.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "dist/model.hpp"
#include "io/syscalls.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/dist/mpi.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;
using namespace modelzip::disttest;

namespace {

// Forwards to another communicator; kills this process before call `kill_at`.
class KillingCommunicator final : public Communicator {
 public:
  KillingCommunicator(Communicator& inner, int kill_at) : inner_(inner), kill_at_(kill_at) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::vector<std::string> gather(std::string_view b, int root) override {
    tick();
    return inner_.gather(b, root);
  }
  std::string broadcast(std::string_view b, int root) override {
    tick();
    return inner_.broadcast(b, root);
  }
  std::optional<Failure> agree(std::string_view e) override {
    tick();
    return inner_.agree(e);
  }

 private:
  void tick() {
    if (++calls_ == kill_at_) std::raise(SIGKILL);
  }
  Communicator& inner_;
  int kill_at_;
  int calls_ = 0;
};

io::SysOp sys_op(const std::string& name) {
  for (int i = 0; i < io::kSysOpCount; ++i)
    if (name == io::sys_op_name(static_cast<io::SysOp>(i))) return static_cast<io::SysOp>(i);
  std::fprintf(stderr, "unknown system call kind '%s'\n", name.c_str());
  std::exit(2);
}

int in_flight(int argc, char** argv) {
  MpiCommunicator comm(MPI_COMM_WORLD, std::chrono::seconds(5));
  const std::string path = argv[2];
  const int steps = std::atoi(argv[3]);
  const std::int64_t rows = std::atoll(argv[4]), cols = std::atoll(argv[5]);
  (void)argc;
  const int rank = comm.rank(), world = comm.size();
  if (FILE* f = std::fopen((path + ".rank" + std::to_string(rank) + ".pid").c_str(), "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
    std::fclose(f);
  }
  auto cut = [&](int r) { return rows * (r * (r + 1) / 2) / (world * (world + 1) / 2); };
  const std::int64_t first = cut(rank), last = cut(rank + 1);
  for (int step = 0; step < steps; ++step) {
    std::vector<float> block(static_cast<std::size_t>((last - first) * cols),
                             static_cast<float>(step));
    for (std::int64_t r = first; r < last; ++r)
      block[static_cast<std::size_t>((r - first) * cols)] = static_cast<float>(r);
    try {
      CollectiveWriter w(path, comm, CollectiveOptions{.dedup = false});
      w.add_shard("w",
                  Tensor::dense(DType::float32, {last - first, cols},
                                Bytes::borrow(std::as_bytes(std::span(block)), nullptr)),
                  {rows, cols}, Block{{first, 0}, {last - first, cols}});
      w.commit("step-" + std::to_string(step));
    } catch (const std::exception& e) {
      std::printf("save failed: %s\n", e.what());
      std::fflush(stdout);
      return 3;
    }
    std::printf("saved step-%d\n", step);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--in-flight") {
    MPI_Init(&argc, &argv);
    const int status = in_flight(argc, argv);
    // A rank was killed: MPI_Finalize would wait for it.
    std::fflush(stdout);
    if (status != 0) std::_Exit(status);
    MPI_Finalize();
    return status;
  }
  if (argc != 4 && argc != 6) {
    std::fprintf(stderr, "usage: kill_trial ARCHIVE TAG VERSION [comm:K|SYSOP:K RANK]\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    MpiCommunicator mpi(MPI_COMM_WORLD, std::chrono::seconds(60));
    const std::string path = argv[1], tag = argv[2];
    const int version = std::atoi(argv[3]);
    int kill_comm = 0;
    std::optional<io::FaultInjector> sys_kill;
    if (argc == 6 && std::atoi(argv[5]) == mpi.rank()) {
      const std::string spec = argv[4];
      const auto colon = spec.find(':');
      const int k = std::atoi(spec.c_str() + colon + 1);
      if (spec.substr(0, colon) == "comm")
        kill_comm = k;
      else
        sys_kill.emplace(io::FaultInjector::Plan{.action = io::FaultInjector::Action::kill,
                                                 .kind = sys_op(spec.substr(0, colon)),
                                                 .nth = static_cast<std::uint64_t>(k)});
    }
    KillingCommunicator comm(mpi, kill_comm);
    CollectiveWriter w(path, comm);
    stage_model(w, comm.rank(), comm.size(), all_at(version));
    if (sys_kill) sys_kill->install();
    CollectiveCommitOptions rotate;
    if (const char* keep = std::getenv("MODELZIP_KILL_TRIAL_KEEP_LAST"))
      rotate.keep_last = static_cast<std::size_t>(std::atoi(keep));
    w.commit(tag, rotate);
    if (sys_kill) sys_kill->uninstall();
    Archive a = Archive::open(path);
    for (const auto& t : a.tags()) {
      const int v = std::atoi(t.c_str() + t.find('-') + 1);
      for (const auto& p : model_defs()) {
        auto values = a.tensor(p.name, t).as<float>();
        if (std::vector<float>(values.begin(), values.end()) != global_values(p, v)) {
          std::fprintf(stderr, "rank %d: tag %s parameter %s differs\n", comm.rank(), t.c_str(),
                       p.name.c_str());
          status = 1;
        }
      }
    }
    if (!a.verify().empty()) {
      std::fprintf(stderr, "rank %d: verify found problems\n", comm.rank());
      status = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
