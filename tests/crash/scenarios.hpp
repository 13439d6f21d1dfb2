// The commits the crash suite interrupts: a full rewrite that adds a tag, a
// remove-tag in place and one by a rewrite, a replace + keep-last in place,
// and an append that adds a tag in place, each on the same four-tag base
// archive.
#pragma once

#include <unistd.h>

#include "crash_support.hpp"
#include "io/syscalls.hpp"

namespace modelzip::crash {

struct Scenario {
  std::string name;
  Model old_model, new_model;
  std::string old_bytes;  // the base archive
  WriterOptions options;
  std::function<void(Writer&)> stage;  // the change to commit
  bool appends = false;                // the commit takes the append path
  // Fewest file-changing calls a clean commit makes (an in-place removal
  // writes only the tail and a free entry's header).
  std::uint64_t min_calls = 50;
};

// Base archive: tags old0..old3 with `params` parameters each; old<k> shares
// old<k-1>'s p0. Written by one rewrite, so it has no dead bytes.
inline Model write_base(const fs::path& path, int params) {
  Model model;
  Writer w = Writer::open(path, WriterOptions{.append = false});
  for (int k = 0; k < 4; ++k) {
    TagSpec spec;
    std::string tag = "old" + std::to_string(k);
    NewTag nt = make_tag(tag, params, model, k ? "old" + std::to_string(k - 1) : "", &spec);
    w.add_tag(tag, std::move(nt));
    model.push_back(spec);
  }
  w.commit();
  return model;
}

enum class ScenarioKind {
  rewrite_add,
  remove_tag,
  append_add,
  remove_tag_rewrite,
  replace_keep_last
};

inline Scenario make_scenario(ScenarioKind kind, const fs::path& scratch) {
  Scenario s;
  fs::path base = scratch / "base.zip";
  const bool removes = kind == ScenarioKind::remove_tag ||
                       kind == ScenarioKind::remove_tag_rewrite ||
                       kind == ScenarioKind::replace_keep_last;
  s.old_model = write_base(base, removes ? 9 : 5);
  s.old_bytes = testing::io_bytes(base);
  fs::remove(base);
  s.new_model = s.old_model;
  switch (kind) {
    case ScenarioKind::rewrite_add:
    case ScenarioKind::append_add: {
      const bool append = kind == ScenarioKind::append_add;
      s.name = append ? "append" : "rewrite";
      s.options.append = append;
      s.appends = append;
      TagSpec spec;
      make_tag("new", 32, s.old_model, "old1", &spec);
      s.new_model.push_back(spec);
      const Model old_model = s.old_model;
      s.stage = [old_model](Writer& w) {
        TagSpec ignored;
        w.add_tag("new", make_tag("new", 32, old_model, "old1", &ignored));
      };
      break;
    }
    case ScenarioKind::remove_tag:
    case ScenarioKind::remove_tag_rewrite:
      // In place (free entries, a copy of the moved blob) or by a rewrite.
      s.options.append = kind == ScenarioKind::remove_tag;
      s.appends = s.options.append;
      s.name = s.appends ? "remove-tag in place" : "remove-tag rewrite";
      if (s.appends) s.min_calls = 20;
      // old1 shares old0's p0: removing old0 moves that blob into old1.
      s.new_model.erase(s.new_model.begin());
      s.stage = [](Writer& w) { w.remove_tag("old0"); };
      break;
    case ScenarioKind::replace_keep_last: {
      // old3 replaced by a new old3 (the newest), then the oldest beyond 3
      // removed (old0, whose p0 moves into old1): one in-place commit.
      s.name = "replace + keep-last";
      s.appends = true;
      s.min_calls = 30;
      TagSpec spec;
      Model without = s.old_model;
      without.pop_back();
      make_tag("old3", 6, without, "old2", &spec);
      s.new_model = {s.old_model[1], s.old_model[2], spec};
      s.stage = [without](Writer& w) {
        TagSpec ignored;
        w.replace_tag("old3", make_tag("old3", 6, without, "old2", &ignored));
        w.keep_last(3);
      };
      break;
    }
  }
  return s;
}

// `model` plus a small tag "next" (what the writer after a crash adds).
inline Model with_next(const Model& model, NewTag* nt) {
  Model out = model;
  TagSpec spec;
  *nt = make_tag("next", 2, model, "", &spec);
  out.push_back(spec);
  return out;
}

// Runs the scenario's commit in a child under `plan`; returns the wait
// status. With `count_into`, the child reports its number of calls there.
inline int commit_in_child(const Scenario& s, const fs::path& path, io::FaultInjector::Plan plan,
                           std::uint64_t* count_into = nullptr) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  int status = run_child([&] {
    ::close(fds[0]);
    std::uint64_t calls = 0;
    bool appended = false;
    {
      io::FaultInjector injector(plan);
      injector.install();
      Writer w = Writer::open(path, s.options);
      s.stage(w);
      w.commit();
      appended = w.last_stats().appended;
      injector.uninstall();
      calls = injector.total_calls();
    }
    if (::write(fds[1], &calls, sizeof calls) != sizeof calls) return 2;
    return appended == s.appends ? 0 : 3;
  });
  ::close(fds[1]);
  std::uint64_t calls = 0;
  bool got = ::read(fds[0], &calls, sizeof calls) == sizeof calls;
  ::close(fds[0]);
  if (count_into) {
    REQUIRE(got);
    *count_into = calls;
  }
  return status;
}

}  // namespace modelzip::crash
