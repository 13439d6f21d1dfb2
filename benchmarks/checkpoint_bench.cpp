// checkpoint_bench: how fast modelzip saves and loads, side by side with raw
// file I/O measured in the same run (and PyTorch / numpy / h5py through
// /usr/bin/python3 when present). Prints medians of several repetitions and
// each row's ratio to its raw baseline. Not a test: numbers only.
//
//   checkpoint_bench [--size-mib 1024] [--tensors 200] [--reps 3] [--dir .]
//                    [--small-params 100000] [--small-tags 50] [--no-python]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "modelzip/modelzip.hpp"

using namespace modelzip;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::uint64_t size_mib = 1024;
  int tensors = 200;
  int reps = 3;
  fs::path dir = ".";
  int small_params = 100000;
  int small_tags = 50;
  bool python = true;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double time_median(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    f();
    t.push_back(seconds_since(start));
  }
  return median(t);
}

// A transformer-like mix: a few large embedding/projection matrices, many
// medium ones, small biases and norms. Sizes (in floats) sum to `total`.
std::vector<std::uint64_t> tensor_sizes(std::uint64_t total_floats, int count) {
  std::vector<double> weights;
  for (int i = 0; i < count; ++i) {
    if (i < 2)
      weights.push_back(40);  // embeddings / lm head
    else if (i % 4 == 0)
      weights.push_back(0.02);  // biases, norms
    else
      weights.push_back(1 + (i % 3));  // attention / MLP matrices
  }
  double sum = 0;
  for (double w : weights) sum += w;
  std::vector<std::uint64_t> sizes;
  std::uint64_t used = 0;
  for (int i = 0; i < count; ++i) {
    auto n = static_cast<std::uint64_t>(weights[i] / sum * static_cast<double>(total_floats));
    n = std::max<std::uint64_t>(n, 16);
    sizes.push_back(n);
    used += n;
  }
  if (used < total_floats) sizes[0] += total_floats - used;
  return sizes;
}

struct Model {
  std::vector<std::vector<float>> data;
  std::vector<std::string> names;
  std::uint64_t bytes = 0;
};

Model make_model(const Options& o) {
  Model m;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0, 0.02f);
  auto sizes = tensor_sizes(o.size_mib * (1ull << 20) / 4, o.tensors);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::vector<float> v(sizes[i]);
    for (auto& x : v) x = normal(rng);
    m.bytes += v.size() * 4;
    m.data.push_back(std::move(v));
    m.names.push_back("layers." + std::to_string(i) + ".weight");
  }
  return m;
}

NewTag tag_of(const Model& m, std::size_t changed_from = 0, float bump = 0) {
  NewTag t;
  for (std::size_t i = 0; i < m.data.size(); ++i) {
    (void)changed_from;
    (void)bump;
    t.add(m.names[i], Tensor::dense(DType::float32, {static_cast<std::int64_t>(m.data[i].size())},
                                    Bytes::borrow(std::as_bytes(std::span(m.data[i])), nullptr)));
  }
  return t;
}

void write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w <= 0) {
      std::perror("write");
      std::exit(1);
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

void raw_write(const Model& m, const fs::path& path, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  for (const auto& v : m.data) write_all(fd, v.data(), v.size() * 4);
  if (sync) ::fsync(fd);
  ::close(fd);
}

// Reads the file into `buf` (allocated and faulted in once, outside the
// timing, as a reader reusing its buffer would).
double raw_read(const fs::path& path, std::vector<char>& buf) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  buf.resize(fs::file_size(path));
  std::size_t done = 0;
  while (done < buf.size()) {
    ssize_t r = ::read(fd, buf.data() + done, buf.size() - done);
    if (r <= 0) break;
    done += static_cast<std::size_t>(r);
  }
  ::close(fd);
  double s = 0;
  for (std::size_t i = 0; i < buf.size(); i += 64) s += buf[i];
  return s;
}

// Reads every cache line of every tensor (what "touch every byte" costs).
double touch(const std::map<std::string, Tensor>& tensors) {
  double s = 0;
  for (const auto& [name, t] : tensors) {
    const auto* p = reinterpret_cast<const volatile char*>(t.values().data());
    for (std::size_t i = 0; i < t.values().size(); i += 64) s += p[i];
  }
  return s;
}

void save_modelzip(const Model& m, const fs::path& path, bool durable) {
  fs::remove(path);
  Writer w = Writer::open(path, WriterOptions{.dedup = false, .durable = durable});
  w.add_tag("v1", tag_of(m));
  w.commit();
}

void row(const char* what, double secs, std::uint64_t bytes, double baseline_secs) {
  double gibs = static_cast<double>(bytes) / (1u << 30) / secs;
  std::printf("  %-44s %9.1f ms %7.2f GiB/s   %5.2fx raw\n", what, secs * 1e3, gibs,
              baseline_secs / secs);
}

// Peak resident set (KiB) of running f in a child process, minus the
// child's peak before f ran.
long child_peak_kib(const std::function<void()>& before, const std::function<void()>& f) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    before();
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    long base = r.ru_maxrss;
    f();
    ::getrusage(RUSAGE_SELF, &r);
    long delta = r.ru_maxrss - base;
    if (::write(pipefd[1], &delta, sizeof delta) != sizeof delta) _exit(1);
    _exit(0);
  }
  long delta = -1;
  if (::read(pipefd[0], &delta, sizeof delta) != sizeof delta) delta = -1;
  ::waitpid(pid, nullptr, 0);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
  return delta;
}

const char* kPythonBaselines = R"PY(
import json, os, sys, time
import numpy as np
size_mib, count, reps, folder = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(42)
total = size_mib * (1 << 20) // 4
w = [40.0 if i < 2 else (0.02 if i % 4 == 0 else 1 + i % 3) for i in range(count)]
sizes = [max(16, int(x / sum(w) * total)) for x in w]
sizes[0] += max(0, total - sum(sizes))
arrays = {f"layers.{i}.weight": rng.normal(0, 0.02, n).astype(np.float32) for i, n in enumerate(sizes)}
def med(f):
    t = []
    for _ in range(reps):
        s = time.perf_counter(); f(); t.append(time.perf_counter() - s)
    return sorted(t)[len(t) // 2]
def touch(arrs):
    return sum(float(a.view(np.uint8)[::64].sum()) for a in arrs)
out = {}
try:
    import torch
    sd = {k: torch.from_numpy(v) for k, v in arrays.items()}
    p = os.path.join(folder, "bench.pt")
    out["torch.save"] = med(lambda: torch.save(sd, p))
    out["torch.load"] = med(lambda: touch([t.numpy() for t in torch.load(p).values()]))
    out["torch.load(mmap=True)"] = med(lambda: touch([t.numpy() for t in torch.load(p, mmap=True).values()]))
    os.remove(p)
except Exception as e:
    out["torch_error"] = str(e)
p = os.path.join(folder, "bench.npz")
out["np.savez"] = med(lambda: np.savez(p, **arrays))
def npload():
    with np.load(p) as z:
        touch([z[k] for k in z.files])
out["np.load"] = med(npload)
os.remove(p)
try:
    import h5py
    p = os.path.join(folder, "bench.h5")
    def h5save():
        with h5py.File(p, "w") as f:
            for k, v in arrays.items(): f.create_dataset(k, data=v)
    out["h5py write"] = med(h5save)
    def h5load():
        with h5py.File(p, "r") as f:
            touch([f[k][()] for k in f.keys()])
    out["h5py read"] = med(h5load)
    os.remove(p)
except Exception as e:
    out["h5py_error"] = str(e)
print(json.dumps(out))
)PY";

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--size-mib")
      o.size_mib = std::stoull(next());
    else if (a == "--tensors")
      o.tensors = std::stoi(next());
    else if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--dir")
      o.dir = next();
    else if (a == "--small-params")
      o.small_params = std::stoi(next());
    else if (a == "--small-tags")
      o.small_tags = std::stoi(next());
    else if (a == "--no-python")
      o.python = false;
    else {
      std::fprintf(stderr,
                   "usage: checkpoint_bench [--size-mib N] [--tensors N] [--reps N] [--dir D] "
                   "[--small-params N] [--small-tags N] [--no-python]\n");
      return 2;
    }
  }
  fs::path dir = o.dir / ("modelzip-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::printf(
      "checkpoint_bench: %llu MiB in %d float32 tensors, median of %d, warm page cache, folder "
      "%s\n",
      static_cast<unsigned long long>(o.size_mib), o.tensors, o.reps, dir.c_str());
  Model m = make_model(o);
  const auto raw = dir / "raw.bin", mz = dir / "model.zip";

  std::printf("\nsave\n");
  double t_raw = time_median(o.reps, [&] { raw_write(m, raw, false); });
  double t_raw_sync = time_median(o.reps, [&] { raw_write(m, raw, true); });
  double t_mz = time_median(o.reps, [&] { save_modelzip(m, mz, false); });
  double t_mz_sync = time_median(o.reps, [&] { save_modelzip(m, mz, true); });
  row("raw sequential write", t_raw, m.bytes, t_raw);
  row("modelzip save (stored, no fsync)", t_mz, m.bytes, t_raw);
  row("raw write + fsync", t_raw_sync, m.bytes, t_raw_sync);
  row("modelzip save (durable: fsync file+folder)", t_mz_sync, m.bytes, t_raw_sync);

  std::printf("\nload (zero-copy views; then every cache line touched)\n");
  std::vector<char> read_buffer(m.bytes, 1);
  double t_read = time_median(o.reps, [&] { raw_read(raw, read_buffer); });
  double t_open = time_median(o.reps, [&] {
    Archive a = Archive::open(mz);
    auto all = a.load();
    if (all.size() != m.data.size()) std::abort();
  });
  double t_touch = time_median(o.reps, [&] {
    Archive a = Archive::open(mz);
    touch(a.load());
  });
  double t_copy = time_median(o.reps, [&] {
    Archive a = Archive::open(mz);
    touch(a.load({}, ReadMode::copy));
  });
  double t_one = time_median(o.reps * 10, [&] {
    Archive a = Archive::open(mz);
    Tensor t = a.tensor(m.names[m.names.size() / 2]);
    if (t.numel() == 0) std::abort();
  });
  row("raw read() of the same bytes", t_read, m.bytes, t_read);
  std::printf("  %-44s %9.2f ms   (%d tensors, no data touched)\n",
              "modelzip open + load newest tag", t_open * 1e3, o.tensors);
  row("modelzip open + load + touch every byte", t_touch, m.bytes, t_read);
  row("modelzip load with copy (CRC-checked)", t_copy, m.bytes, t_read);
  std::printf("  %-44s %9.2f ms\n", "modelzip open + one parameter", t_one * 1e3);

  std::printf("\nmemory (peak resident growth in a child process)\n");
  long save_peak = child_peak_kib([] {}, [&] { save_modelzip(m, dir / "mem.zip", false); });
  std::printf("  %-44s %9.1f MiB  (tensors: %.1f MiB, already resident)\n", "modelzip save",
              save_peak / 1024.0, m.bytes / 1048576.0);
  long load_peak = child_peak_kib([] {},
                                  [&] {
                                    Archive a = Archive::open(mz);
                                    auto all = a.load();
                                    Tensor t = all.begin()->second;
                                    volatile char c = static_cast<char>(t.values().data()[0]);
                                    (void)c;
                                  });
  std::printf("  %-44s %9.1f MiB  (zero-copy load, one tensor touched)\n", "modelzip load",
              load_peak / 1024.0);

  std::printf("\nnew tag in an archive of 20 tags, 90%% of parameters unchanged (dedup on)\n");
  {
    auto path = dir / "tags.zip";
    fs::remove(path);
    Model small = make_model(
        Options{.size_mib = std::max<std::uint64_t>(o.size_mib / 10, 8), .tensors = o.tensors});
    double first = 0, last = 0;
    std::uint64_t first_bytes = 0, last_bytes = 0;
    std::mt19937 rng(1);
    for (int t = 0; t < 20; ++t) {
      for (std::size_t i = 0; i < small.data.size(); ++i)
        if (t > 0 && i % 10 == static_cast<std::size_t>(t % 10))
          for (auto& x : small.data[i]) x += 1e-3f;  // ~10% of the tensors change
      auto before = fs::exists(path) ? fs::file_size(path) : 0;
      auto start = Clock::now();
      Writer w = Writer::open(path, WriterOptions{.durable = false});
      w.add_tag("step-" + std::to_string(t), tag_of(small));
      w.commit();
      double secs = seconds_since(start);
      if (t == 0) first = secs, first_bytes = w.last_stats().bytes_written;
      last = secs;
      last_bytes = w.last_stats().bytes_written;
      (void)before;
    }
    std::printf("  %-44s %9.1f ms  %8.1f MiB written\n", "first tag", first * 1e3,
                first_bytes / 1048576.0);
    std::printf("  %-44s %9.1f ms  %8.1f MiB written (%.1fx the first)\n", "20th tag", last * 1e3,
                last_bytes / 1048576.0,
                static_cast<double>(last_bytes) / static_cast<double>(first_bytes));
  }

  std::printf("\nmetadata: %d small parameters over %d tags\n", o.small_params, o.small_tags);
  {
    auto path = dir / "small.zip";
    fs::remove(path);
    Writer w = Writer::open(path, WriterOptions{.dedup = false, .durable = false});
    int per_tag = o.small_params / o.small_tags;
    std::vector<float> one(4, 1.0f);
    for (int t = 0; t < o.small_tags; ++t) {
      NewTag nt;
      for (int i = 0; i < per_tag; ++i)
        nt.add("p" + std::to_string(i),
               Tensor::dense(DType::float32, {4},
                             Bytes::borrow(std::as_bytes(std::span(one)), nullptr)));
      w.add_tag("t" + std::to_string(t), std::move(nt));
    }
    auto start = Clock::now();
    w.commit();
    double write_secs = seconds_since(start);
    double t_list = time_median(o.reps, [&] {
      Archive a = Archive::open(path);
      if (a.params().size() != static_cast<std::size_t>(per_tag)) std::abort();
    });
    double t_open_only = time_median(o.reps, [&] { Archive a = Archive::open(path); });
    std::printf("  %-44s %9.1f ms\n", "write", write_secs * 1e3);
    std::printf("  %-44s %9.1f ms\n", "open (parse all tables)", t_open_only * 1e3);
    std::printf("  %-44s %9.1f ms\n", "open + list newest tag (dtype, shape)", t_list * 1e3);
  }

  if (o.python && fs::exists("/usr/bin/python3")) {
    std::printf("\nPython baselines (/usr/bin/python3, same data sizes, same folder)\n");
    auto script = dir / "baselines.py";
    {
      FILE* f = std::fopen(script.c_str(), "w");
      std::fputs(kPythonBaselines, f);
      std::fclose(f);
    }
    std::string cmd = "/usr/bin/python3 " + script.string() + " " + std::to_string(o.size_mib) +
                      " " + std::to_string(o.tensors) + " " + std::to_string(o.reps) + " " +
                      dir.string();
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    if (p) ::pclose(p);
    // Parse the flat JSON object {"name": seconds, ...}.
    std::size_t pos = 0;
    while ((pos = out.find('"', pos)) != std::string::npos) {
      std::size_t end = out.find('"', pos + 1);
      std::string key = out.substr(pos + 1, end - pos - 1);
      std::size_t colon = out.find(':', end);
      std::size_t stop = out.find_first_of(",}", colon);
      std::string value = out.substr(colon + 1, stop - colon - 1);
      pos = stop;
      if (key.find("error") != std::string::npos) {
        std::printf("  %-44s %s\n", key.c_str(), value.c_str());
        continue;
      }
      double secs = std::stod(value);
      bool is_save =
          key.find("save") != std::string::npos || key.find("write") != std::string::npos;
      row(key.c_str(), secs, m.bytes, is_save ? t_raw : t_read);
    }
  }
  fs::remove_all(dir);
  return 0;
}
