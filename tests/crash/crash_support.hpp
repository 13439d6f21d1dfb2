// Helpers of the crash suite: models whose expected bytes the test computes
// itself (never through the library), child processes, folder listings.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

namespace modelzip::crash {

namespace fs = std::filesystem;

// The bytes of parameter `index` of tag `tag`: deterministic, 1..4000
// bytes, except p1: 300..304 KB, above the size up to which the zip writer
// checksums an entry before writing it, so that kills also land between
// writing a large entry and patching its CRC in.
inline std::string param_bytes(const std::string& tag, int index) {
  std::seed_seq seed(tag.begin(), tag.end());
  std::mt19937_64 rng(seed);
  rng.discard(static_cast<unsigned long long>(index) * 7);
  // The new tag's p1 is large enough for direct writes (a whole 2 MiB
  // stretch of the file inside it: io::SharedFileWriter).
  const std::size_t large = tag == "new" ? 4800000 : 300000;
  std::string out((index == 1 ? large : 1) + rng() % 4000, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

// What a tag must hold: parameter name -> bytes; updater "var/state" -> bytes.
struct TagSpec {
  std::string name;
  std::map<std::string, std::string> params;
  std::map<std::string, std::string> updater;
};
using Model = std::vector<TagSpec>;  // oldest first

inline Tensor bytes_tensor(const std::string& bytes) {
  return Tensor::dense(DType::uint8, {static_cast<std::int64_t>(bytes.size())},
                       Bytes::copy_of(bytes));
}

// A tag of `count` parameters p0.. (every third one deflated); if
// `share_from` names a tag of `model`, parameter "shared" is its p0, and
// every tag gets one updater state "p0/M".
inline NewTag make_tag(const std::string& tag, int count, const Model& model,
                       const std::string& share_from, TagSpec* spec) {
  NewTag nt;
  spec->name = tag;
  for (int i = 0; i < count; ++i) {
    std::string name = "p" + std::to_string(i), bytes = param_bytes(tag, i);
    nt.add(name, bytes_tensor(bytes),
           ParamOptions{i % 3 == 2 ? Compression::deflate : Compression::store});
    spec->params[name] = bytes;
  }
  for (const auto& t : model)
    if (t.name == share_from) {
      nt.share("shared", share_from, "p0");
      spec->params["shared"] = t.params.at("p0");
    }
  std::string state = param_bytes(tag + "/M", 0);
  nt.add_updater_state("p0", "M", bytes_tensor(state));
  spec->updater["p0/M"] = state;
  return nt;
}

inline std::string text_of(const Bytes& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

inline std::vector<std::string> names_of(const Model& m) {
  std::vector<std::string> out;
  for (const auto& t : m) out.push_back(t.name);
  return out;
}

// Empty if tag `t.name` of `a` holds exactly `t`'s bytes (read zero-copy
// and copied), else what differs.
inline std::string tag_mismatch(const Archive& a, const TagSpec& t) {
  {
    auto params = a.params(t.name);
    if (params.size() != t.params.size()) return t.name + ": parameter count";
    for (const auto& [name, bytes] : t.params) {
      if (text_of(a.tensor(name, t.name).values()) != bytes) return t.name + "/" + name;
      if (text_of(a.tensor(name, t.name, ReadMode::copy).values()) != bytes)
        return t.name + "/" + name + " (copy)";
    }
    if (a.updater_states(t.name).size() != t.updater.size()) return t.name + ": updater count";
    for (const auto& [key, bytes] : t.updater) {
      auto slash = key.find('/');
      if (text_of(a.updater_state(key.substr(0, slash), key.substr(slash + 1), t.name).values()) !=
          bytes)
        return t.name + " updater " + key;
    }
  }
  return {};
}

// Empty if `a` holds exactly `model`'s tags with exactly their bytes.
inline std::string mismatch(const Archive& a, const Model& model) {
  if (a.tags() != names_of(model)) return "tags differ";
  for (const auto& t : model)
    if (auto m = tag_mismatch(a, t); !m.empty()) return m;
  return {};
}

// Which of `models` the archive at `path` holds (its index), after checking
// that it opens and verifies; -1 (with `why` set) if none.
inline int which_model(const fs::path& path, const std::vector<const Model*>& models,
                       std::string* why) {
  try {
    Archive a = Archive::open(path);
    auto problems = a.verify();
    if (!problems.empty()) {
      *why = "verify: " + problems[0].entry + ": " + problems[0].message;
      return -1;
    }
    for (std::size_t i = 0; i < models.size(); ++i)
      if (mismatch(a, *models[i]).empty()) return static_cast<int>(i);
    *why = "neither model: " + mismatch(a, *models[0]);
    return -1;
  } catch (const std::exception& e) {
    *why = e.what();
    return -1;
  }
}

// What a streaming zip reader (Java's ZipInputStream) would stumble on:
// walking the local headers from offset 0 in file order up to the central
// directory, every entry's data (inflated when deflated) must match the
// CRC-32 its header declares, computed here with zlib. "" when it reads
// through.
inline std::string streaming_problem(const fs::path& path) {
  const std::string b = testing::io_bytes(path);
  auto u16 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(b[at]) |
                                      static_cast<unsigned char>(b[at + 1]) << 8);
  };
  auto u32 = [&](std::size_t at) { return u16(at) | u16(at + 2) << 16; };
  std::size_t at = 0;
  for (; at + 30 <= b.size() && u32(at) == 0x04034b50;) {
    const std::uint32_t crc = u32(at + 14), csize = u32(at + 18), usize = u32(at + 22);
    const std::size_t data = at + 30 + u16(at + 26) + u16(at + 28);
    const std::string name = b.substr(at + 30, u16(at + 26));
    if (csize == 0xFFFFFFFFu || data + csize > b.size()) return name + ": bad sizes";
    std::string plain = b.substr(data, csize);
    if (u16(at + 8) == 8) {
      plain.assign(usize, '\0');
      z_stream z{};
      ::inflateInit2(&z, -MAX_WBITS);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(b.data() + data));
      z.avail_in = csize;
      z.next_out = reinterpret_cast<Bytef*>(plain.data());
      z.avail_out = usize;
      const int rc = ::inflate(&z, Z_FINISH);
      ::inflateEnd(&z);
      if (rc != Z_STREAM_END) return name + ": does not inflate";
    }
    if (::crc32(0, reinterpret_cast<const Bytef*>(plain.data()), static_cast<uInt>(plain.size())) !=
        crc)
      return name + " at " + std::to_string(at) + ": CRC mismatch";
    at = data + csize;
  }
  if (at + 4 > b.size() || u32(at) != 0x02014b50)
    return "the walk stops at " + std::to_string(at) + ", not at the central directory";
  return {};
}

// The names of the files in `dir`.
inline std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// Runs `fn` in a forked child, which exits with 0 when `fn` returns, with
// `fn`'s result when it returns non-zero, and with 99 on an exception.
// Returns the wait status.
inline int run_child(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      code = fn();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return status;
}

inline bool killed(int status) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}
inline bool exited_ok(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Replaces the folder's contents by one archive file holding `bytes`.
inline void reset_folder(const fs::path& dir, const fs::path& archive, const std::string& bytes) {
  for (const auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
  testing::write_file(archive, bytes);
}

}  // namespace modelzip::crash
