// distributed_bench: N MPI ranks write one model into one archive with the
// collective commit, beside, in the same run, the physical limit (the same
// N ranks writing the same bytes into N raw files) and the DeepSpeed
// pattern (each rank torch.save-ing its part, when /usr/bin/python3 has
// torch); then M != N readers load resharded blocks, counting the bytes
// each reads against the bytes it needs.
//
//   mpirun -np N build/benchmarks/distributed_bench --dir DIR [--size-mib M] [--cols C]
//          [--column-shards K] [--adam] [--keep]
//
// The model: M MiB of float32 in 16 parameters of C columns (default
// 1024): 8 row-sharded over the ranks (uneven splits), 4 column-sharded
// (strided pieces: C/N values of every row per rank; --column-shards K
// makes K of the 12 sharded parameters column-sharded), 4 whole parameters
// spread round-robin. --adam adds Adam's exp_avg and exp_avg_sq of every
// parameter, sharded like it, as updater state in the same commit (three
// times the bytes; the raw files and torch.save then hold them too). Writes
// are durable on both sides (the
// raw files are fsynced, as the archive is). Times are wall-clock from a
// barrier before to a barrier after (the slowest rank), medians of 5.
// The last line is the headline.
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/archive_impl.hpp"
#include "format/tensor_blob.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/dist/mpi.hpp"
#include "modelzip/writer.hpp"

using namespace modelzip;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Param {
  std::string name;
  Shape shape;
  enum { rows, columns, whole } split;
  int owner = 0;  // whole
};

struct Local {
  std::string name;
  Block block;
  std::vector<float> data;
};

std::vector<Param> model(std::uint64_t size_mib, std::int64_t cols, int column_shards, int n) {
  // 16 parameters of equal size, `cols` columns each: parameters 0..11
  // sharded (the last `column_shards` of them by columns, the rest by
  // rows), 12..15 whole.
  const std::int64_t rows = std::max<std::int64_t>(
      1, static_cast<std::int64_t>((size_mib << 20) / 16 / 4 / static_cast<std::uint64_t>(cols)));
  std::vector<Param> out;
  for (int i = 0; i < 16; ++i) {
    Param p{"layer" + std::to_string(i) + ".weight", {rows + i, cols}, Param::rows, 0};
    if (i >= 12 - column_shards) p.split = Param::columns;
    if (i >= 12) {
      p.split = Param::whole;
      p.owner = i % n;
    }
    out.push_back(p);
  }
  return out;
}

std::vector<Local> local_part(const std::vector<Param>& params, int rank, int n) {
  std::vector<Local> out;
  for (const auto& p : params) {
    Block b;
    if (p.split == Param::whole) {
      if (p.owner != rank) continue;
      b = Block{{0, 0}, p.shape};
    } else {
      b = split_block(p.shape, p.split == Param::rows ? 0 : 1, rank, n);
    }
    Local l{p.name, b, std::vector<float>(static_cast<std::size_t>(b.shape[0] * b.shape[1]))};
    for (std::size_t i = 0; i < l.data.size(); ++i)
      l.data[i] = static_cast<float>(i % 1000) * 0.5f + static_cast<float>(rank);
    out.push_back(std::move(l));
  }
  return out;
}

Tensor view(const Local& l) {
  return Tensor::dense(DType::float32, l.block.shape,
                       Bytes::borrow(std::as_bytes(std::span(l.data)), nullptr));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Wall time of `f` over all ranks: barrier, f, barrier (seconds).
template <class F>
double timed(MpiCommunicator& comm, F&& f) {
  MPI_Barrier(comm.comm());
  const auto t0 = Clock::now();
  f();
  MPI_Barrier(comm.comm());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Writes `part` to `file` (truncated, or appended to with `append`), fsyncs
// it and its folder.
void write_raw(const fs::path& file, const std::vector<Local>& part, bool append = false) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + file.string());
  for (const auto& l : part) {
    const char* p = reinterpret_cast<const char*>(l.data.data());
    std::size_t left = l.data.size() * sizeof(float);
    while (left > 0) {
      ssize_t w = ::write(fd, p, std::min<std::size_t>(left, 4u << 20));
      if (w <= 0) throw std::runtime_error("write failed");
      p += w;
      left -= static_cast<std::size_t>(w);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw std::runtime_error("fsync failed");
  int dir = ::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  ::fsync(dir);
  ::close(dir);
}

// Each rank runs torch.save of a state dict with its tensors' shapes (the
// DeepSpeed pattern: one file per rank), after all ranks imported torch;
// returns the wall time from the first start to the last end, or < 0
// without torch.
double torch_save(MpiCommunicator& comm, const fs::path& dir, const std::vector<Local>& part) {
  const fs::path script = dir / ("torch_save_" + std::to_string(comm.rank()) + ".py");
  std::string shapes;
  for (const auto& l : part)
    shapes +=
        "(" + std::to_string(l.block.shape[0]) + "," + std::to_string(l.block.shape[1]) + "),";
  std::ofstream(script)
      << "import os, sys, time\n"
         "try:\n    import torch\nexcept ImportError:\n    sys.exit(3)\n"
         "d = {f'p{i}': torch.rand(s) for i, s in enumerate(["
      << shapes << "])}\n"
      << "open(sys.argv[1] + '.ready', 'w').close()\n"
         "while len([f for f in os.listdir(sys.argv[2]) if f.endswith('.ready')]) < "
      << comm.size()
      << ":\n    time.sleep(0.001)\n"
         "t0 = time.time()\n"
         "with open(sys.argv[1], 'wb') as f:\n"
         "    torch.save(d, f)\n    f.flush()\n    os.fsync(f.fileno())\n"
         "print(t0, time.time())\n";
  const fs::path out = dir / ("torch-" + std::to_string(comm.rank()) + ".pt");
  const std::string cmd = "/usr/bin/python3 " + script.string() + " " + out.string() + " " +
                          dir.string() + " > " + out.string() + ".time";
  const int rc = std::system(cmd.c_str());
  double t0 = 0, t1 = 0;
  std::ifstream(out.string() + ".time") >> t0 >> t1;
  fs::remove(script);
  fs::remove(out.string() + ".ready");
  fs::remove(out.string() + ".time");
  fs::remove(out);
  double times[2] = {rc == 0 ? t0 : -1, rc == 0 ? t1 : -1}, lo = 0, hi = 0;
  MPI_Allreduce(&times[0], &lo, 1, MPI_DOUBLE, MPI_MIN, comm.comm());
  MPI_Allreduce(&times[1], &hi, 1, MPI_DOUBLE, MPI_MAX, comm.comm());
  return lo < 0 ? -1 : hi - lo;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    MpiCommunicator comm(MPI_COMM_WORLD);
    const int rank = comm.rank(), n = comm.size();
    fs::path dir;
    std::uint64_t size_mib = 512;
    std::int64_t cols = 1024;
    int column_shards = 4;
    bool keep = false, adam = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--dir" && i + 1 < argc)
        dir = argv[++i];
      else if (a == "--size-mib" && i + 1 < argc)
        size_mib = std::strtoull(argv[++i], nullptr, 10);
      else if (a == "--cols" && i + 1 < argc)
        cols = std::max<std::int64_t>(1, std::strtoll(argv[++i], nullptr, 10));
      else if (a == "--column-shards" && i + 1 < argc)
        column_shards = std::clamp(std::atoi(argv[++i]), 0, 12);
      else if (a == "--keep")
        keep = true;
      else if (a == "--adam")
        adam = true;
      else {
        if (rank == 0)
          std::fprintf(stderr,
                       "usage: mpirun -np N distributed_bench --dir DIR [--size-mib M] [--cols C]"
                       " [--column-shards K] [--adam] [--keep]\n");
        MPI_Finalize();
        return 2;
      }
    }
    if (dir.empty()) throw std::runtime_error("--dir is required");
    fs::create_directories(dir);
    const auto params = model(size_mib, cols, column_shards, n);
    const auto part = local_part(params, rank, n);
    // What the baselines write: the parameters, and with --adam twice more.
    std::vector<Local> raw_part = part;
    for (int copy = 0; adam && copy < 2; ++copy)
      raw_part.insert(raw_part.end(), part.begin(), part.end());
    const std::vector<std::string> states =
        adam ? std::vector<std::string>{"exp_avg", "exp_avg_sq"} : std::vector<std::string>{};
    std::uint64_t mine = 0, total = 0;
    for (const auto& l : raw_part) mine += l.data.size() * 4;
    MPI_Allreduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, comm.comm());
    const fs::path archive = dir / "distributed_bench.zip";
    const double gib = static_cast<double>(total) / (1u << 30);

    auto stage = [&](CollectiveWriter& w) {
      for (const auto& l : part) {
        const Param& p = *std::find_if(params.begin(), params.end(),
                                       [&](const Param& q) { return q.name == l.name; });
        if (p.split == Param::whole)
          w.add(l.name, view(l));
        else
          w.add_shard(l.name, view(l), p.shape, l.block);
        for (const auto& state : states)  // the values do not matter, the bytes do
          if (p.split == Param::whole)
            w.add_updater_state(l.name, state, view(l));
          else
            w.add_updater_shard(l.name, state, view(l), p.shape, l.block);
      }
    };
    // Raw files and new archives alternate, so both see the same machine;
    // before each timed write, files of the previous one are removed and
    // the file system is synced (syncfs), so that no write pays for the
    // writeback (or discard) of another.
    const fs::path raw_file = dir / ("raw-" + std::to_string(rank) + ".bin");
    auto settle = [&] {
      MPI_Barrier(comm.comm());
      if (rank == 0) fs::remove(archive);
      fs::remove(raw_file);
      int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
      ::syncfs(fd);
      ::close(fd);
    };
    auto settle_append = [&] {
      MPI_Barrier(comm.comm());
      int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
      ::syncfs(fd);
      ::close(fd);
    };
    std::vector<double> raw, fresh, append, single;
    for (int rep = 0; rep < 5; ++rep) {
      settle();
      raw.push_back(timed(comm, [&] { write_raw(raw_file, raw_part); }));
      settle();
      fresh.push_back(timed(comm, [&] {
        CollectiveWriter w(archive, comm);
        stage(w);
        w.commit("step-1");
      }));
      if (n == 1) {  // the single-process Writer saving the same tensors
        settle();
        single.push_back(timed(comm, [&] {
          NewTag tag;
          for (const auto& l : part) {
            tag.add(l.name, view(l));
            for (const auto& state : states) tag.add_updater_state(l.name, state, view(l));
          }
          Writer w = Writer::open(archive);
          w.add_tag("step-1", std::move(tag));
          w.commit();
        }));
      }
    }
    // Appends grow the files, whose new pages this VM's host hands out more
    // slowly than the pages a removed file just freed: appending a tag is
    // compared with the same ranks appending to their own growing raw files.
    // Appends also without the root's relocated copy of the old tail (which
    // keeps the file an ordinary zip of the old archive while the ranks
    // write, FORMAT.md section 8.1): what that copy costs.
    std::vector<double> raw_append, append_without_copy;
    const fs::path raw_growing = dir / ("raw-append-" + std::to_string(rank) + ".bin");
    for (int rep = 0; rep < 5; ++rep) {
      settle_append();
      raw_append.push_back(timed(comm, [&] { write_raw(raw_growing, raw_part, true); }));
      for (bool copy : {true, false}) {
        settle_append();
        if (!copy) ::setenv("MODELZIP_BENCHMARK_NO_TAIL_COPY", "1", 1);
        (copy ? append : append_without_copy).push_back(timed(comm, [&] {
          CollectiveWriter w(archive, comm, CollectiveOptions{.dedup = false});
          stage(w);
          w.commit("step-" + std::to_string(rep + 2) + (copy ? "" : "-without-copy"));
        }));
        ::unsetenv("MODELZIP_BENCHMARK_NO_TAIL_COPY");
      }
    }
    fs::remove(raw_growing);
    const double torch_time = torch_save(comm, dir, raw_part);

    // Resharded loads: M readers (N-1, N+1 and 2N+1), each reading the rows
    // of every parameter that fall to it; ranks take the reader roles in turn.
    struct LoadRow {
      int readers;
      double seconds, needed, read, worst;
    };
    std::vector<LoadRow> loads;
    for (int m : {std::max(1, n - 1), n + 1, 2 * n + 1}) {
      if (m == n) continue;
      std::uint64_t needed = 0, read = 0;
      double worst = 0;
      double seconds = timed(comm, [&] {
        Archive a = Archive::open(archive);
        // Bytes a reader reads besides tensor data: the directory and the
        // tables (parsed at open) and the blob headers it decodes.
        const auto& impl = Archive::Impl::of(a);
        std::uint64_t meta = impl.directory.central_directory_size + 22;
        for (const auto& name : {std::string("modelzip.toml"), std::string("tags.txt"),
                                 a.newest_tag() + "/params.txt"})
          meta += impl.find_entry(name)->compressed_size;
        for (int reader = rank; reader < m; reader += n) {
          std::uint64_t r_needed = 0, r_read = meta;
          volatile float sink = 0;
          for (const auto& p : params) {
            Block b = split_block(p.shape, 0, reader, m);
            BlockReadStats stats;
            Tensor t = read_block(a, p.name, b, {}, &stats);
            for (float v : t.as<float>()) sink = sink + v;  // touch every byte
            r_needed += stats.bytes_read;
            r_read +=
                stats.bytes_read + format::dense_blob_layout(DType::float32, p.shape).values_offset;
          }
          needed += r_needed;
          read += r_read;
          worst = std::max(worst, static_cast<double>(r_read) / static_cast<double>(r_needed));
        }
      });
      std::uint64_t all_needed = 0, all_read = 0;
      double all_worst = 0;
      MPI_Allreduce(&needed, &all_needed, 1, MPI_UINT64_T, MPI_SUM, comm.comm());
      MPI_Allreduce(&read, &all_read, 1, MPI_UINT64_T, MPI_SUM, comm.comm());
      MPI_Allreduce(&worst, &all_worst, 1, MPI_DOUBLE, MPI_MAX, comm.comm());
      loads.push_back(LoadRow{m, seconds, static_cast<double>(all_needed),
                              static_cast<double>(all_read), all_worst});
    }

    if (rank == 0) {
      const double r = median(raw), f = median(fresh), ap = median(append), ra = median(raw_append);
      std::printf(
          "distributed_bench: %d ranks, %.0f MiB (16 float32 parameters of %lld columns: %d "
          "row-sharded, %d column-sharded, 4 whole%s), %s; wall time over all ranks, median of 5\n",
          n, gib * 1024, static_cast<long long>(cols), 12 - column_shards, column_shards,
          adam ? "; with Adam's 2 states each as updater state" : "", dir.c_str());
      // min..max of the 5 runs beside each median: this VM is shared and noisy.
      auto range = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.0f..%.0f ms", v.front() * 1e3, v.back() * 1e3);
        return std::string(buf);
      };
      std::printf("%-44s %9s %12s %8s   %s\n", "write (durable)", "median", "aggregate", "vs raw",
                  "min..max");
      std::printf("%-44s %6.0f ms %7.2f GiB/s %7.2fx   %s\n", "raw: N ranks write + fsync N files",
                  r * 1e3, gib / r, 1.0, range(raw).c_str());
      std::printf("%-44s %6.0f ms %7.2f GiB/s %7.2fx   %s\n", "modelzip: N ranks, one new archive",
                  f * 1e3, gib / f, r / f, range(fresh).c_str());
      if (!single.empty())
        std::printf("%-44s %6.0f ms %7.2f GiB/s %7.2fx   %s\n", "modelzip: one process, Writer",
                    median(single) * 1e3, gib / median(single), r / median(single),
                    range(single).c_str());
      std::printf("%-44s %6.0f ms %7.2f GiB/s %7.2fx   %s\n",
                  "raw: N ranks append to + fsync N files", ra * 1e3, gib / ra, 1.0,
                  range(raw_append).c_str());
      std::printf("%-44s %6.0f ms %7.2f GiB/s %7.2fx   %s\n", "modelzip: N ranks append a tag",
                  ap * 1e3, gib / ap, ra / ap, range(append).c_str());
      const double an = median(append_without_copy);
      std::printf("%-44s %6.0f ms %7.2f GiB/s %7.2fx   %s\n",
                  "  the same without the old tail's copy", an * 1e3, gib / an, ra / an,
                  range(append_without_copy).c_str());
      std::printf("%-44s %6.1f ms (with) %6.1f ms (without)\n", "  append, fastest of 5",
                  *std::min_element(append.begin(), append.end()) * 1e3,
                  *std::min_element(append_without_copy.begin(), append_without_copy.end()) * 1e3);
      if (torch_time > 0)
        std::printf("%-44s %6.0f ms %7.2f GiB/s %7.2fx\n", "torch.save: one file per rank",
                    torch_time * 1e3, gib / torch_time, r / torch_time);
      else
        std::printf("torch.save: not measured (no torch for /usr/bin/python3)\n");
      std::printf("%-44s %9s %12s %8s %8s\n", "resharded load (M readers, rows of each)", "time",
                  "needed", "read", "worst");
      for (const auto& l : loads)
        std::printf("  M = %-38d %6.0f ms %8.1f MiB %7.3fx %7.3fx\n", l.readers, l.seconds * 1e3,
                    l.needed / (1 << 20), l.read / l.needed, l.worst);
      std::printf("%d ranks, one archive: %.2fx the aggregate raw write of %d files\n", n, r / f,
                  n);
    }
    MPI_Barrier(comm.comm());
    if (rank == 0 && !keep) fs::remove(archive);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distributed_bench: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
