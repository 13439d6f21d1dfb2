// Power-loss trials: a durable commit runs once with every file-changing
// system call recorded (io::FaultInjector with record_calls); then, for a
// power loss after each call, a model of the file system rebuilds the
// states the disk may hold, and each must open as exactly the old or the
// new archive -- the new one once commit() has returned.
//
// The model (what POSIX promises, and no more):
//  - a file's bytes are durable only up to its last fsync; writes and
//    truncations after it may reach the disk or not, and later ones may
//    reach it while earlier ones do not;
//  - names (create, rename, unlink) are durable only up to the last fsync
//    of their folder; after it, a prefix of them, in order, may survive;
//  - fsync of a file does not make its name durable.
// For every cut, every surviving prefix of the name changes is combined
// with several data outcomes: nothing unsynced survives, everything does,
// or only the last j unsynced changes of each file do (the cruel case:
// an end record on disk without the data before it).
//
// Unlike the kill trials, which keep every written byte, these show that
// the fsyncs are where they must be.
#include <doctest/doctest.h>
#include <fcntl.h>

#include <map>
#include <set>
#include <tuple>

#include "io/append_journal.hpp"
#include "io/syscalls.hpp"
#include "scenarios.hpp"

using namespace modelzip;
using namespace modelzip::crash;
using modelzip::testing::TempDir;

namespace {

// A change to a file's bytes: a write at an offset, or a truncation.
struct DataOp {
  bool truncate = false;
  std::uint64_t offset = 0;  // truncate: the new size
  std::string data;
  void apply(std::string& content) const {
    if (truncate) {
      content.resize(offset);
      return;
    }
    if (content.size() < offset + data.size()) content.resize(offset + data.size());
    content.replace(offset, data.size(), data);
  }
};

struct File {
  std::string durable;          // as of the last fsync
  std::vector<DataOp> pending;  // since then, in order
  std::string current() const {
    std::string c = durable;
    for (const auto& op : pending) op.apply(c);
    return c;
  }
};

// A change to the folder: `name` now names `file` (-1: removed).
struct NameOp {
  std::string name;
  int file;
};

// The file system of one folder as the recorded calls leave it, with what
// is durable kept apart from what is not.
class FolderModel {
 public:
  // Starts from the folder's files, all durable.
  explicit FolderModel(const fs::path& dir) : dir_(dir) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      files_.push_back(File{testing::io_bytes(e.path()), {}});
      durable_names_[name] = current_names_[name] = static_cast<int>(files_.size()) - 1;
    }
  }

  void apply(const io::SysCallRecord& c) {
    switch (c.op) {
      case io::SysOp::open: {
        // An open file opened again by descriptor (the direct writes of
        // StreamZipWriter::write_large_data_directly).
        const std::string_view by_fd = "/proc/self/fd/";
        if (std::string_view(c.path).starts_with(by_fd)) {
          fds_[c.fd] = file_of(std::stoi(c.path.substr(by_fd.size())));
          break;
        }
        const std::string name = name_of(c.path);
        auto it = current_names_.find(name);
        int file;
        if (it == current_names_.end()) {
          REQUIRE((c.flags & O_CREAT) != 0);
          files_.push_back(File{});
          file = static_cast<int>(files_.size()) - 1;
          rename_to(name, file);
        } else {
          file = it->second;
          if (c.flags & O_TRUNC) files_[file].pending.push_back(DataOp{true, 0, {}});
        }
        fds_[c.fd] = file;
        break;
      }
      case io::SysOp::write:
        files_.at(file_of(c.fd)).pending.push_back(DataOp{false, c.offset, c.data});
        break;
      case io::SysOp::truncate:
        files_.at(file_of(c.fd)).pending.push_back(DataOp{true, c.offset, {}});
        break;
      case io::SysOp::fsync_file: {
        // Its descriptor may come from an open for reading (not recorded).
        File& f = files_.at(fds_.count(c.fd) ? file_of(c.fd) : current_names_.at(name_of(c.path)));
        f.durable = f.current();
        f.pending.clear();
        break;
      }
      case io::SysOp::fsync_dir:
        REQUIRE(fs::equivalent(c.path, dir_));
        durable_names_ = current_names_;
        pending_names_.clear();
        break;
      case io::SysOp::rename: {
        const int file = current_names_.at(name_of(c.path));
        rename_to(name_of(c.path), -1);
        rename_to(name_of(c.to), file);
        break;
      }
      case io::SysOp::unlink:
        rename_to(name_of(c.path), -1);
        break;
      case io::SysOp::close:
        fds_.erase(c.fd);
        break;
    }
  }

  // How many name changes and how many unsynced data changes (most of any
  // one file) a power loss now could keep or lose.
  std::size_t pending_names() const { return pending_names_.size(); }
  std::size_t most_pending_data() const {
    std::size_t most = 0;
    for (const auto& f : files_) most = std::max(most, f.pending.size());
    return most;
  }

  // The folder (name -> bytes) after a power loss that kept the first
  // `names` pending name changes and, of each file's pending data changes,
  // the last `keep_last` (SIZE_MAX: all).
  std::map<std::string, std::string> after_power_loss(std::size_t names,
                                                      std::size_t keep_last) const {
    std::map<std::string, std::string> out;
    std::map<std::string, int> folder = durable_names_;
    for (std::size_t i = 0; i < names; ++i) {
      const NameOp& op = pending_names_[i];
      if (op.file < 0)
        folder.erase(op.name);
      else
        folder[op.name] = op.file;
    }
    for (const auto& [name, file] : folder) {
      const File& f = files_[file];
      std::string content = f.durable;
      const std::size_t skip = keep_last >= f.pending.size() ? 0 : f.pending.size() - keep_last;
      for (std::size_t i = skip; i < f.pending.size(); ++i) f.pending[i].apply(content);
      out.emplace(name, std::move(content));
    }
    return out;
  }

 private:
  std::string name_of(const std::string& path) const {
    const fs::path p(path);
    REQUIRE(fs::equivalent(p.parent_path(), dir_));
    return p.filename().string();
  }
  int file_of(int fd) const {
    auto it = fds_.find(fd);
    REQUIRE(it != fds_.end());
    return it->second;
  }
  void rename_to(const std::string& name, int file) {
    if (file < 0)
      current_names_.erase(name);
    else
      current_names_[name] = file;
    pending_names_.push_back(NameOp{name, file});
  }

  fs::path dir_;
  std::vector<File> files_;
  std::map<std::string, int> durable_names_, current_names_;
  std::vector<NameOp> pending_names_;
  std::map<int, int> fds_;
};

void run_power_loss_trials(ScenarioKind kind) {
  TempDir dir, scratch;
  Scenario s = make_scenario(kind, scratch.path());
  s.options.durable = true;
  const fs::path path = dir / "m.zip";
  reset_folder(dir.path(), path, s.old_bytes);
  const FolderModel start(dir.path());

  std::vector<io::SysCallRecord> calls;
  {
    io::FaultInjector recorder(io::FaultInjector::Plan{.record_calls = true});
    recorder.install();
    Writer w = Writer::open(path, s.options);
    s.stage(w);
    w.commit();
    recorder.uninstall();
    calls = recorder.records();
  }
  REQUIRE(calls.size() >= 20);
  // The new tag's large parameter goes out with direct writes (the model
  // treats a file opened again by descriptor as the same file).
  if (kind == ScenarioKind::rewrite_add || kind == ScenarioKind::append_add) {
    std::set<int> direct_fds;
    std::size_t direct_writes = 0;
    for (const auto& c : calls) {
      if (c.op == io::SysOp::open && (c.flags & O_DIRECT) != 0 &&
          c.path.starts_with("/proc/self/fd/"))
        direct_fds.insert(c.fd);
      if (c.op == io::SysOp::write && direct_fds.count(c.fd)) ++direct_writes;
      if (c.op == io::SysOp::close) direct_fds.erase(c.fd);
    }
    CHECK(direct_writes > 0);
  }

  TempDir crashed;
  const fs::path crashed_path = crashed / "m.zip";
  FolderModel model = start;
  // Distinct folder states checked so far (by name, size and 64-bit hash
  // of each file, to keep memory small), with the model each held.
  std::map<std::vector<std::tuple<std::string, std::size_t, std::size_t>>,
           std::pair<int, std::string>>
      checked;
  std::size_t states = 0, torn_states = 0;
  int first_new = -1;
  for (std::size_t cut = 0; cut <= calls.size(); ++cut) {
    if (cut > 0) model.apply(calls[cut - 1]);
    const bool returned = cut == calls.size();
    // Data outcomes: none of the pending changes, all, or the last j for
    // small j and a few larger ones.
    const std::size_t most = model.most_pending_data();
    std::set<std::size_t> keeps = {0, SIZE_MAX};
    for (std::size_t j : {std::size_t{1}, std::size_t{2}, std::size_t{3}, most / 2, most - 1})
      if (most > 0 && j > 0 && j < most) keeps.insert(j);
    for (std::size_t names = 0; names <= model.pending_names(); ++names)
      for (std::size_t keep : keeps) {
        auto folder = model.after_power_loss(names, keep);
        ++states;
        std::vector<std::tuple<std::string, std::size_t, std::size_t>> key;
        for (const auto& [name, bytes] : folder)
          key.emplace_back(name, bytes.size(), std::hash<std::string>{}(bytes));
        auto [it, fresh] = checked.try_emplace(std::move(key), -1, std::string());
        if (fresh) {
          for (const auto& e : fs::directory_iterator(crashed.path())) fs::remove_all(e.path());
          for (const auto& [name, bytes] : folder) testing::write_file(crashed / name, bytes);
          it->second.first =
              which_model(crashed_path, {&s.old_model, &s.new_model}, &it->second.second);
          // The journal's promise: a torn one only beside an untouched
          // archive; a valid one saves exactly the old tail, and the bytes
          // before it are the old ones.
          if (folder.count(".m.zip.modelzip-append")) {
            const io::JournalState j = io::read_append_journal(crashed_path);
            const std::string& archive = folder.at("m.zip");
            if (j.kind == io::JournalState::Kind::torn && archive != s.old_bytes)
              it->second = {-1, "a torn journal beside a changed archive"};
            if (j.kind == io::JournalState::Kind::valid &&
                (j.journal.old_size != s.old_bytes.size() ||
                 j.journal.tail.as_string_view() != s.old_bytes.substr(j.journal.tail_start) ||
                 archive.compare(0, j.journal.tail_start, s.old_bytes, 0, j.journal.tail_start) !=
                     0))
              it->second = {-1, "the journal does not save the old tail"};
            if (j.kind == io::JournalState::Kind::torn) ++torn_states;
          }
        }
        // (No structured binding: clang 14 cannot capture one in INFO's lambda.)
        const int state = it->second.first;
        const std::string& why = it->second.second;
        INFO(s.name << ": power loss after call " << cut << " of " << calls.size() << " ("
                    << std::string(cut ? io::sys_op_name(calls[cut - 1].op) : "none") << "), "
                    << names << " of " << model.pending_names() << " name changes kept, data kept: "
                    << (keep == SIZE_MAX ? std::string("all") : "last " + std::to_string(keep)));
        INFO(why);
        REQUIRE(state >= 0);
        if (returned) CHECK(state == 1);  // durable: the commit survives
        if (state == 1 && first_new < 0) first_new = static_cast<int>(cut);
      }
  }
  MESSAGE(s.name << ": " << calls.size() << " calls, " << states << " power-loss states ("
                 << checked.size() << " distinct, " << torn_states
                 << " with a torn journal); the new archive first survives after call "
                 << first_new);
  if (s.appends) CHECK(torn_states > 0);  // the model does produce torn journals
}

}  // namespace

TEST_CASE("Power-loss trials: full rewrite adding a tag") {
  run_power_loss_trials(ScenarioKind::rewrite_add);
}

TEST_CASE("Power-loss trials: remove-tag") {
  run_power_loss_trials(ScenarioKind::remove_tag);
}

TEST_CASE("Power-loss trials: append path adding a tag in place") {
  run_power_loss_trials(ScenarioKind::append_add);
}
