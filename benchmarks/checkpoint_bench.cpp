// checkpoint_bench: how fast modelzip saves and loads, side by side with raw
// file I/O measured in the same run (and PyTorch / numpy / h5py through
// /usr/bin/python3 when present). Prints medians of several repetitions
// (saves: also the fastest) and each row's ratio to its raw baseline. Not a test: numbers only.
//
//   checkpoint_bench [--size-mib 1024] [--tensors 200] [--reps 3] [--dir .]
//                    [--small-params 100000] [--small-tags 50] [--tiny-tensors 20000]
//                    [--no-python] [--save-only]
//
// --save-only: the save rows (synchronous, against the raw writes) and
// nothing else, for profiling and quick before/after comparisons.
//
// --tiny-tensors N: a tag of N float32 tensors of 8 elements (biases and norms
// of a model with thousands of parameters) saved, opened and loaded beside a
// raw write and read of a file of the archive's size; 0 skips those rows.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_measure.hpp"
#include "modelzip/modelzip.hpp"

using namespace modelzip;
using bench::child_peak_kib;
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
  int tiny_tensors = 20000;
  bool python = true;
  bool save_only = false;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median of `reps` timings of f; `setup` runs before each, untimed.
double time_median(int reps, const std::function<void()>& f,
                   const std::function<void()>& setup = {}) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (setup) setup();
    auto start = Clock::now();
    f();
    t.push_back(seconds_since(start));
  }
  return median(t);
}

// Median and fastest of the repetitions of one candidate.
struct Timing {
  double median = 0, best = 0;
};

// Timings of several candidates run in turn within each repetition, so
// that every candidate sees the same background load and writeback.
std::vector<Timing> interleaved_timings(int reps, const std::vector<std::function<void()>>& fs,
                                        const std::function<void()>& setup) {
  std::vector<std::vector<double>> t(fs.size());
  for (int i = 0; i < reps; ++i)
    for (std::size_t k = 0; k < fs.size(); ++k) {
      setup();
      auto start = Clock::now();
      fs[k]();
      t[k].push_back(seconds_since(start));
    }
  std::vector<Timing> out;
  for (auto& v : t) out.push_back({median(v), *std::min_element(v.begin(), v.end())});
  return out;
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

NewTag tag_of(const Model& m) {
  NewTag t;
  for (std::size_t i = 0; i < m.data.size(); ++i) {
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

void sync_folder(const fs::path& folder) {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// The fastest fair writer: a fresh file (the caller removed any old one
// outside the timing, as modelzip writes a fresh temporary file), one
// write() per tensor; durable: fsync of the file, then of the folder (a new
// name is durable only once its folder is).
void raw_write(const Model& m, const fs::path& path, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror("open");
    std::exit(1);
  }
  for (const auto& v : m.data) write_all(fd, v.data(), v.size() * 4);
  if (sync) ::fsync(fd);
  ::close(fd);
  if (sync) sync_folder(path.parent_path());
}

// Writes `bytes` bytes of `pattern` (repeated) to a fresh file.
void raw_write_bytes(const fs::path& path, std::uint64_t bytes) {
  static std::vector<char> pattern(std::size_t{1} << 20, 1);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  for (std::uint64_t done = 0; done < bytes;) {
    auto n = static_cast<std::size_t>(std::min<std::uint64_t>(pattern.size(), bytes - done));
    write_all(fd, pattern.data(), n);
    done += n;
  }
  ::close(fd);
}

// Reads the file with one read() loop into `buf` (allocated and faulted in
// once, outside the timing, as a reader reusing its buffer would): the floor
// for any reader. Then reads one byte per cache line of the buffer.
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

// What a copying reader cannot avoid: fresh memory (page faults included),
// read() in 1 MiB chunks, optionally the CRC-32 of each chunk right after
// its read (single thread), one byte per cache line touched, memory freed.
double raw_read_fresh(const fs::path& path, bool crc) {
  const std::size_t size = fs::file_size(path);
  std::unique_ptr<char[]> buf(new char[size]);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  uLong c = ::crc32(0L, Z_NULL, 0);
  for (std::size_t done = 0; done < size;) {
    std::size_t want = std::min<std::size_t>(std::size_t{1} << 20, size - done);
    ssize_t r = ::read(fd, buf.get() + done, want);
    if (r <= 0) break;
    if (crc) c = ::crc32(c, reinterpret_cast<const Bytef*>(buf.get() + done), static_cast<uInt>(r));
    done += static_cast<std::size_t>(r);
  }
  ::close(fd);
  double s = static_cast<double>(c & 1);
  for (std::size_t i = 0; i < size; i += 64) s += buf[i];
  return s;
}

// Reads every cache line of every tensor (what "touch every byte" costs).
double touch(const NamedTensors& tensors) {
  double s = 0;
  for (const auto& [name, t] : tensors) {
    const auto* p = reinterpret_cast<const volatile char*>(t.values().data());
    for (std::size_t i = 0; i < t.values().size(); i += 64) s += p[i];
  }
  return s;
}

// A save into a path that does not exist (the caller removed it outside the
// timing): a new archive written to a temporary file and renamed.
// With `dedup` (modelzip.save's default) every blob's CRC-32 is computed
// before the write, to look for an equal blob.
void save_modelzip(const Model& m, const fs::path& path, bool durable, bool dedup = false) {
  Writer w = Writer::open(path, WriterOptions{.dedup = dedup, .durable = durable});
  w.add_tag("v1", tag_of(m));
  w.commit();
}

// One result line: time, throughput over `bytes` (0: none), and the ratio
// baseline time / this time (above 1: faster than the baseline).
void row(const std::string& what, double secs, std::uint64_t bytes, double baseline_secs,
         const char* baseline) {
  std::printf("  %-46s %9.2f ms", what.c_str(), secs * 1e3);
  if (bytes)
    std::printf(" %6.2f GiB/s", static_cast<double>(bytes) / (1u << 30) / secs);
  else
    std::printf(" %12s", "");
  std::printf("  %6.2fx %s\n", baseline_secs / secs, baseline);
}

// Background saves (BackgroundSave) of the model into a fresh archive: the
// time until start() returns (the snapshot into staging memory, CRC-32s
// included) against one memcpy of the same bytes into buffers allocated
// beforehand, and the time until wait() against the raw writes measured
// above. The first save of each kind allocates the staging memory and is
// not counted (a training loop reuses it).
void background_rows(const Model& m, const fs::path& mz, int reps,
                     const std::function<void()>& setup, const Timing& raw,
                     const Timing& raw_durable) {
  std::vector<std::vector<float>> copies;
  for (const auto& v : m.data) copies.emplace_back(v.size(), 1.0f);
  std::vector<double> copy;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    for (std::size_t k = 0; k < m.data.size(); ++k)
      std::memcpy(copies[k].data(), m.data[k].data(), m.data[k].size() * 4);
    copy.push_back(seconds_since(start));
  }
  copies.clear();
  const Timing memcpy_time{median(copy), *std::min_element(copy.begin(), copy.end())};
  std::printf(
      "\nbackground save (BackgroundSave, staging memory reused; blocking = until start() "
      "returns)\n");
  row("memcpy (buffers allocated before)", memcpy_time.median, m.bytes, memcpy_time.median,
      "memcpy");
  row("  fastest", memcpy_time.best, m.bytes, memcpy_time.best, "memcpy");
  for (bool durable : {false, true}) {
    std::vector<double> blocking, total;
    for (int i = 0; i <= reps; ++i) {
      setup();
      BackgroundSaveOptions o;
      o.writer = WriterOptions{.dedup = false, .durable = durable};
      auto start = Clock::now();
      BackgroundSave save = BackgroundSave::start(mz, "v1", tag_of(m), o);
      const double returned = seconds_since(start);
      save.wait();
      if (i == 0) continue;
      blocking.push_back(returned);
      total.push_back(seconds_since(start));
    }
    const std::string kind = durable ? "durable" : "not durable";
    row("background save " + kind + ": blocking", median(blocking), m.bytes, memcpy_time.median,
        "memcpy");
    row("  fastest", *std::min_element(blocking.begin(), blocking.end()), m.bytes, memcpy_time.best,
        "memcpy");
    const Timing& base = durable ? raw_durable : raw;
    const char* base_name = durable ? "raw durable" : "raw write";
    row("background save " + kind + ": total", median(total), m.bytes, base.median, base_name);
    row("  fastest", *std::min_element(total.begin(), total.end()), m.bytes, base.best, base_name);
  }
  std::printf("  (target: blocking <= 1.5x memcpy, i.e. >= 0.67x here)\n");
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
na = {}
try:
    import torch
    sd = {k: torch.from_numpy(v) for k, v in arrays.items()}
    p = os.path.join(folder, "bench.pt")
    out["torch.save"] = med(lambda: torch.save(sd, p))
    out["torch.load"] = med(lambda: touch([t.numpy() for t in torch.load(p).values()]))
    import inspect
    if "mmap" in inspect.signature(torch.load).parameters:
        out["torch.load(mmap=True)"] = med(lambda: touch([t.numpy() for t in torch.load(p, mmap=True).values()]))
    else:
        na["torch.load(mmap=True)"] = "not in torch " + torch.__version__ + " (added in 2.1)"
    os.remove(p)
except ImportError as e:
    na["torch"] = "not installed: " + str(e)
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
except ImportError as e:
    na["h5py"] = "not installed: " + str(e)
print(json.dumps(out))
print(json.dumps(na))
)PY";

// The members of a flat JSON object {"key": value, ...} whose values are
// numbers or strings (as Python's json.dumps writes them).
std::vector<std::pair<std::string, std::string>> parse_flat_json(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t i = 0;
  auto string_at = [&](std::size_t& k) {
    std::string v;
    for (++k; k < text.size() && text[k] != '"'; ++k) {
      if (text[k] == '\\' && k + 1 < text.size()) ++k;
      v += text[k];
    }
    ++k;
    return v;
  };
  while ((i = text.find('"', i)) != std::string::npos) {
    std::string key = string_at(i);
    i = text.find(':', i);
    if (i == std::string::npos) break;
    i = text.find_first_not_of(' ', i + 1);
    if (i == std::string::npos) break;
    std::string value;
    if (text[i] == '"') {
      value = string_at(i);
    } else {
      std::size_t stop = text.find_first_of(",}", i);
      value = text.substr(i, stop - i);
      i = stop;
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

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
    else if (a == "--tiny-tensors")
      o.tiny_tensors = std::stoi(next());
    else if (a == "--no-python")
      o.python = false;
    else if (a == "--save-only")
      o.save_only = true;
    else {
      std::fprintf(
          stderr,
          "usage: checkpoint_bench [--size-mib N] [--tensors N] [--reps N] [--dir D] "
          "[--small-params N] [--small-tags N] [--tiny-tensors N] [--no-python] [--save-only]\n");
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
  std::printf(
      "every row: time, throughput, and Nx = (baseline time) / (row time) for the named raw "
      "baseline of this run (above 1 = faster than the baseline)\n");

  std::printf("\nsave (each run writes a fresh file; the old one is removed before the timing)\n");
  {
    // Untimed before each run: old files gone, and no dirty pages left by
    // the previous run (else whichever runs second is throttled by the
    // writeback of the first one's gigabyte).
    auto setup = [&] {
      fs::remove(raw);
      fs::remove(mz);
      ::sync();
    };
    // Saves allocate a gigabyte of fresh page cache each; on a VM whose
    // host reclaims freed guest memory (free page reporting), how long that
    // takes varies several-fold from run to run whatever writes it. The
    // fastest run of each candidate, also printed, is the steadier
    // comparison there.
    const int save_reps = std::max(o.reps, 5);
    auto t = interleaved_timings(
        save_reps,
        {[&] { raw_write(m, raw, false); }, [&] { save_modelzip(m, mz, false); },
         [&] { raw_write(m, raw, true); }, [&] { save_modelzip(m, mz, true); },
         [&] { save_modelzip(m, mz, false, true); }},
        setup);
    auto both = [&](const char* what, const Timing& x, const Timing& base, const char* baseline) {
      row(what, x.median, m.bytes, base.median, baseline);
      row(std::string("  fastest of ") + std::to_string(save_reps), x.best, m.bytes, base.best,
          baseline);
    };
    both("raw write (fresh file, write() per tensor)", t[0], t[0], "raw write");
    both("modelzip save (stored, temp file + rename)", t[1], t[0], "raw write");
    both("modelzip save with dedup (CRC-32s first)", t[4], t[0], "raw write");
    both("raw write + fsync file + fsync folder", t[2], t[2], "raw durable");
    both("modelzip save durable (fsync file + folder)", t[3], t[2], "raw durable");
    std::printf("  (targets: save >= 0.90x raw write, durable save >= 0.85x raw durable)\n");
    if (o.save_only) {
      setup();
      fs::remove_all(dir);
      return 0;
    }
    background_rows(m, mz, save_reps, setup, t[0], t[2]);
    // Leave both files (fresh, not durable) in the page cache for the loads.
    setup();
    raw_write(m, raw, false);
    save_modelzip(m, mz, false);
  }

  std::printf("\nload (warm page cache)\n");
  std::vector<char> read_buffer(m.bytes, 1);
  double t_read = time_median(o.reps, [&] { raw_read(raw, read_buffer); });
  double t_fresh = time_median(o.reps, [&] { raw_read_fresh(raw, false); });
  double t_fresh_crc = time_median(o.reps, [&] { raw_read_fresh(raw, true); });
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
    touch(a.load({}, {.mode = ReadMode::copy}));
  });
  double t_one = time_median(o.reps * 10, [&] {
    Archive a = Archive::open(mz);
    Tensor t = a.tensor(m.names[m.names.size() / 2]);
    if (t.numel() == 0) std::abort();
  });
  row("raw read() into a reused, pre-faulted buffer", t_read, m.bytes, t_read, "raw read");
  row("raw read() into fresh memory, then freed", t_fresh, m.bytes, t_read, "raw read");
  row("raw read() into fresh memory + CRC-32, freed", t_fresh_crc, m.bytes, t_read, "raw read");
  std::printf("  %-46s (one allocation of the file's size: page faults on every run)\n", "");
  row("modelzip open + load newest tag (zero-copy)", t_open, 0, t_read, "raw read");
  std::printf("  %-46s (%d tensors, no data touched; target <= 5 ms)\n", "", o.tensors);
  row("modelzip open + load + touch every cache line", t_touch, m.bytes, t_read, "raw read");
  std::printf("  %-46s (target >= 0.80x raw read)\n", "");
  row("modelzip load with copy (CRC-checked), touched", t_copy, m.bytes, t_read, "raw read");
  std::printf("  %-46s %26.2fx raw read into fresh memory + CRC-32\n", "", t_fresh_crc / t_copy);
  row("modelzip open + one parameter (zero-copy)", t_one, 0, t_read, "raw read");

  std::printf("\nmemory (peak resident set growth of a child process, ru_maxrss)\n");
  {
    const double tensors_mib = static_cast<double>(m.bytes) / 1048576.0;
    auto mib = [](long kib) { return static_cast<double>(kib) / 1024.0; };
    long raw_peak = child_peak_kib([&] {
      fs::remove(dir / "mem.bin");
      raw_write(m, dir / "mem.bin", false);
    });
    long save_peak = child_peak_kib([&] {
      fs::remove(dir / "mem.zip");
      save_modelzip(m, dir / "mem.zip", false);
    });
    fs::remove(dir / "mem.bin");
    fs::remove(dir / "mem.zip");
    std::printf("  %-46s tensors (%.1f MiB, resident before) + %.1f MiB\n", "raw write",
                tensors_mib, mib(raw_peak));
    std::printf("  %-46s tensors (%.1f MiB, resident before) + %.1f MiB  (target: + 64 MiB)\n",
                "modelzip save", tensors_mib, mib(save_peak));
    const std::size_t last = m.data.size() - 1;
    long open_peak = child_peak_kib([&] {
      Archive a = Archive::open(mz);
      auto all = a.load();
      if (all.empty()) std::abort();
    });
    long one_peak = child_peak_kib([&] {
      Archive a = Archive::open(mz);
      auto all = a.load();
      NamedTensors one;
      one.insert_or_assign(m.names[last], all.at(m.names[last]));
      touch(one);
    });
    long all_peak = child_peak_kib([&] {
      Archive a = Archive::open(mz);
      touch(a.load());
    });
    long copy_peak = child_peak_kib([&] {
      Archive a = Archive::open(mz);
      touch(a.load({}, {.mode = ReadMode::copy}));
    });
    std::printf("  %-46s %9.1f MiB  (nothing touched)\n", "modelzip zero-copy load",
                mib(open_peak));
    std::printf("  %-46s %9.1f MiB  (one tensor of %.1f MiB touched)\n", "modelzip zero-copy load",
                mib(one_peak), static_cast<double>(m.data[last].size() * 4) / 1048576.0);
    std::printf("  %-46s %9.1f MiB  (all %.1f MiB touched: mapped file pages)\n",
                "modelzip zero-copy load", mib(all_peak), tensors_mib);
    std::printf("  %-46s %9.1f MiB  (all %.1f MiB copied)\n", "modelzip load with copy",
                mib(copy_peak), tensors_mib);
  }

  std::printf(
      "\nnew tag in an archive of 20 tags, ~10%% of parameters changed (append; every tag "
      "holds all parameters; medians of %d series)\n",
      std::max(o.reps, 3));
  {
    // Tag t changes the tensors i with i % 10 == t % 10. With dedup the
    // writer finds the unchanged ones by content; with share() the caller
    // names them, as a training loop that knows what it froze can.
    struct Series {
      std::vector<double> secs;
      std::vector<std::uint64_t> written;
      std::uint64_t last_new = 0;
    };
    auto series = [&](bool share) {
      auto path = dir / "tags.zip";
      fs::remove(path);
      Model small = make_model(
          Options{.size_mib = std::max<std::uint64_t>(o.size_mib / 10, 8), .tensors = o.tensors});
      Series out;
      for (int t = 0; t < 20; ++t) {
        std::uint64_t new_bytes = 0;
        std::vector<bool> changed(small.data.size(), t == 0);
        for (std::size_t i = 0; i < small.data.size(); ++i)
          if (t > 0 && i % 10 == static_cast<std::size_t>(t % 10)) {
            for (auto& x : small.data[i]) x += 1e-3f;
            changed[i] = true;
            new_bytes += small.data[i].size() * 4;
          }
        NewTag nt;
        for (std::size_t i = 0; i < small.data.size(); ++i) {
          if (share && !changed[i]) {
            nt.share(small.names[i], "step-" + std::to_string(t - 1), small.names[i]);
            continue;
          }
          nt.add(small.names[i],
                 Tensor::dense(DType::float32, {static_cast<std::int64_t>(small.data[i].size())},
                               Bytes::borrow(std::as_bytes(std::span(small.data[i])), nullptr)));
        }
        auto start = Clock::now();
        Writer w = Writer::open(path, WriterOptions{.durable = false});
        w.add_tag("step-" + std::to_string(t), std::move(nt));
        w.commit();
        out.secs.push_back(seconds_since(start));
        out.written.push_back(w.last_stats().bytes_written);
        out.last_new = new_bytes;
      }
      fs::remove(path);
      return out;
    };
    // Each series repeated; every tag's time is the median over the runs.
    auto median_series = [&](bool share) {
      std::vector<Series> runs;
      for (int r = 0; r < std::max(o.reps, 3); ++r) runs.push_back(series(share));
      Series out = runs[0];
      for (std::size_t t = 0; t < out.secs.size(); ++t) {
        std::vector<double> v;
        for (const auto& run : runs) v.push_back(run.secs[t]);
        out.secs[t] = median(v);
      }
      return out;
    };
    const Series dedup = median_series(false), shared = median_series(true);
    double t_raw_new = time_median(
        o.reps, [&] { raw_write_bytes(dir / "new.bin", dedup.last_new); },
        [&] {
          fs::remove(dir / "new.bin");
          ::sync();
        });
    fs::remove(dir / "new.bin");
    auto tag_row = [&](const char* what, const Series& s, int t) {
      std::printf("  %-46s %9.2f ms  %8.1f MiB written\n", what, s.secs[t] * 1e3,
                  s.written[t] / 1048576.0);
    };
    tag_row("first tag (all data new)", dedup, 0);
    tag_row("5th tag, dedup finds the unchanged tensors", dedup, 4);
    tag_row("20th tag, dedup finds the unchanged tensors", dedup, 19);
    tag_row("5th tag, unchanged tensors given by share()", shared, 4);
    tag_row("20th tag, unchanged tensors given by share()", shared, 19);
    std::printf("  %-46s %.1f MiB\n", "new tensor data of the 20th tag",
                dedup.last_new / 1048576.0);
    row("raw write of the 20th tag's new tensor data", t_raw_new, dedup.last_new, t_raw_new,
        "raw write of new data");
    row("20th tag, dedup", dedup.secs[19], dedup.last_new, t_raw_new, "raw write of new data");
    row("20th tag, share()", shared.secs[19], dedup.last_new, t_raw_new, "raw write of new data");
  }

  std::printf(
      "\nthe same new tag (%.1f MiB of new tensors) appended to archives of different sizes\n",
      std::max<std::uint64_t>(o.size_mib / 100, 1) * 1.0);
  {
    Model add = make_model(
        Options{.size_mib = std::max<std::uint64_t>(o.size_mib / 100, 1), .tensors = 20});
    auto tiny = dir / "tiny.zip";
    int serial = 0;
    auto append_to = [&](const fs::path& path) {
      Writer w = Writer::open(path, WriterOptions{.durable = false});
      w.add_tag("added-" + std::to_string(serial++), tag_of(add));
      w.commit();
      if (path == mz && !w.last_stats().appended) std::abort();  // must not rewrite 1 GiB
    };
    // Untimed before each run: new values for the tag, a fresh small archive.
    auto setup = [&] {
      for (auto& v : add.data)
        for (auto& x : v) x += 1e-3f;
      fs::remove(tiny);
      Writer w = Writer::open(tiny, WriterOptions{.durable = false});
      NewTag nt;
      nt.add("x", Tensor::dense(DType::float32, {1}, Bytes::copy_of(std::string(4, '\0'))));
      w.add_tag("base", std::move(nt));
      w.commit();
      ::sync();
    };
    auto archive_size = fs::file_size(mz);
    // The same appends without the relocated copy of the old tail that
    // keeps the file an ordinary zip of the old archive meanwhile (FORMAT.md
    // section 8.1): what that copy costs.
    auto without_copy = [&](const fs::path& path) {
      ::setenv("MODELZIP_BENCHMARK_NO_TAIL_COPY", "1", 1);
      append_to(path);
      ::unsetenv("MODELZIP_BENCHMARK_NO_TAIL_COPY");
    };
    auto timings = interleaved_timings(std::max(o.reps, 5),
                                       {[&] { append_to(tiny); }, [&] { append_to(mz); },
                                        [&] { without_copy(tiny); }, [&] { without_copy(mz); }},
                                       setup);
    fs::remove(tiny);
    std::printf("  %-46s %9.2f ms  (fastest %.2f ms)\n", "to an archive of one 4-byte tensor",
                timings[0].median * 1e3, timings[0].best * 1e3);
    char what[96];
    std::snprintf(what, sizeof what, "to the %.0f MiB archive of the save rows",
                  archive_size / 1048576.0);
    std::printf("  %-46s %9.2f ms  (fastest %.2f ms)\n", what, timings[1].median * 1e3,
                timings[1].best * 1e3);
    std::printf("  %-46s %9.2f ms  (fastest %.2f ms)\n", "  the same without the old tail's copy",
                timings[3].median * 1e3, timings[3].best * 1e3);
    std::printf("  %-46s %9.2f ms  (fastest %.2f ms)\n", "to the tiny archive without the copy",
                timings[2].median * 1e3, timings[2].best * 1e3);
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
    const std::uint64_t archive_bytes = fs::file_size(path);
    double t_raw_small = time_median(
        o.reps, [&] { raw_write_bytes(dir / "small.bin", archive_bytes); },
        [&] { fs::remove(dir / "small.bin"); });
    fs::remove(dir / "small.bin");
    std::vector<char> small_buffer(archive_bytes, 1);
    double t_read_small = time_median(o.reps, [&] { raw_read(path, small_buffer); });
    double t_list = time_median(o.reps, [&] {
      Archive a = Archive::open(path);
      if (a.params().size() != static_cast<std::size_t>(per_tag)) std::abort();
    });
    double t_open_only = time_median(o.reps, [&] { Archive a = Archive::open(path); });
    std::printf("  archive: %.1f MiB\n", archive_bytes / 1048576.0);
    row("raw write of the archive's size (one file)", t_raw_small, archive_bytes, t_raw_small,
        "raw write");
    row("modelzip write (one commit)", write_secs, archive_bytes, t_raw_small, "raw write");
    row("raw read() of the archive (pre-faulted)", t_read_small, archive_bytes, t_read_small,
        "raw read");
    row("modelzip open (validates every table)", t_open_only, 0, t_read_small, "raw read");
    row("modelzip open + list newest tag", t_list, 0, t_read_small, "raw read");
    std::printf("  %-46s (target <= 150 ms for 100000 parameters)\n", "");
  }

  if (o.tiny_tensors > 0) {
    const int reps = std::max(o.reps, 5);
    std::printf("\n%d tiny tensors (8 float32 each) in one tag, fastest of %d\n", o.tiny_tensors,
                reps);
    std::vector<std::vector<float>> values(static_cast<std::size_t>(o.tiny_tensors));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0, 1);
    for (auto& v : values) {
      v.resize(8);
      for (auto& x : v) x = normal(rng);
    }
    auto tiny_tag = [&] {
      NewTag nt;
      for (std::size_t i = 0; i < values.size(); ++i)
        nt.add("layers." + std::to_string(i) + ".norm",
               Tensor::dense(DType::float32, {8},
                             Bytes::borrow(std::as_bytes(std::span(values[i])), nullptr)));
      return nt;
    };
    const auto path = dir / "tiny-tensors.zip", raw_path = dir / "tiny-tensors.bin";
    auto fastest = [&](const std::function<void()>& f, const std::function<void()>& setup) {
      std::vector<double> t;
      for (int i = 0; i < reps; ++i) {
        if (setup) setup();
        auto start = Clock::now();
        f();
        t.push_back(seconds_since(start));
      }
      return *std::min_element(t.begin(), t.end());
    };
    auto save = [&](bool durable, bool dedup) {
      Writer w = Writer::open(path, WriterOptions{.dedup = dedup, .durable = durable});
      w.add_tag("v1", tiny_tag());
      w.commit();
    };
    auto fresh = [&] { fs::remove(path); };
    const double t_stage = fastest([&] { tiny_tag(); }, {});
    const double t_save = fastest([&] { save(false, false); }, fresh);
    const double t_save_dedup = fastest([&] { save(false, true); }, fresh);
    const double t_durable = fastest([&] { save(true, true); }, fresh);
    const std::uint64_t archive_bytes = fs::file_size(path);
    const double t_raw =
        fastest([&] { raw_write_bytes(raw_path, archive_bytes); }, [&] { fs::remove(raw_path); });
    fs::remove(raw_path);
    std::vector<char> buffer(archive_bytes, 1);
    const double tiny_read = fastest([&] { raw_read(path, buffer); }, {});
    const double tiny_open = fastest([&] { Archive a = Archive::open(path); }, {});
    const double tiny_load = fastest(
        [&] {
          Archive a = Archive::open(path);
          if (a.load().size() != values.size()) std::abort();
        },
        {});
    const double tiny_touch = fastest(
        [&] {
          Archive a = Archive::open(path);
          touch(a.load());
        },
        {});
    std::printf("  archive: %.1f MiB\n", archive_bytes / 1048576.0);
    row("staging the tag (NewTag::add of each tensor)", t_stage, 0, t_raw, "raw write");
    row("raw write of the archive's size (one file)", t_raw, archive_bytes, t_raw, "raw write");
    row("modelzip save, not durable, no dedup", t_save, archive_bytes, t_raw, "raw write");
    row("modelzip save, not durable, dedup", t_save_dedup, archive_bytes, t_raw, "raw write");
    row("modelzip save, durable, dedup (the defaults)", t_durable, archive_bytes, t_raw,
        "raw write");
    row("raw read() of the archive (pre-faulted)", tiny_read, archive_bytes, tiny_read, "raw read");
    row("modelzip open (validates every table)", tiny_open, 0, tiny_read, "raw read");
    row("modelzip open + load (zero-copy)", tiny_load, 0, tiny_read, "raw read");
    row("modelzip open + load + touch every tensor", tiny_touch, 0, tiny_read, "raw read");
    fs::remove(path);
  }

  if (o.python && fs::exists("/usr/bin/python3")) {
    std::printf(
        "\nPython baselines (/usr/bin/python3, same data, same folder; loads touch every "
        "cache line; Python's allocator may reuse memory freed by the previous repetition)\n");
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
    std::vector<std::string> lines;
    char buf[4096];
    while (p && std::fgets(buf, sizeof buf, p)) lines.emplace_back(buf);
    if (p) ::pclose(p);
    if (lines.size() < 2) {
      std::printf("  python baselines failed\n");
    } else {
      double t_raw_write = time_median(
          o.reps, [&] { raw_write(m, raw, false); },
          [&] {
            fs::remove(raw);
            ::sync();
          });
      for (const auto& [key, value] : parse_flat_json(lines[0])) {
        double secs = std::stod(value);
        bool is_save =
            key.find("save") != std::string::npos || key.find("write") != std::string::npos;
        bool copies = key != "h5py read" && key.find("mmap") == std::string::npos;
        if (is_save)
          row(key, secs, m.bytes, t_raw_write, "raw write");
        else
          row(key, secs, m.bytes, copies ? t_fresh : t_read,
              copies ? "raw read into fresh memory" : "raw read");
      }
      for (const auto& [key, value] : parse_flat_json(lines[1]))
        std::printf("  %-46s not available: %s\n", key.c_str(), value.c_str());
    }
  }
  fs::remove_all(dir);
  return 0;
}
