#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/open_archive.hpp"
#include "cli/progress_bar.hpp"
#include "cli/terminal.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::cli {
namespace {

// How the commit went: in place (the removed bytes stay as free entries) or
// by a rewrite.
std::string outcome(const Writer::Stats& s, std::uintmax_t before, std::uintmax_t after) {
  if (s.appended)
    return "; " + human_bytes(s.bytes_freed) + " freed in place (gc reclaims it), archive " +
           human_bytes(after);
  return "; archive " + human_bytes(before) + " -> " + human_bytes(after) + " (rewritten)";
}

// rm-tag ARCHIVE --keep-last N: removes the oldest tags beyond N.
int keep_last(const std::string& path, long long n, WriterOptions options) {
  const auto before = archive_size(path);
  Writer writer = Writer::open(path, std::move(options));
  const std::vector<std::string> tags = writer.tags();
  writer.keep_last(static_cast<std::size_t>(n));
  writer.commit();
  const std::vector<std::string> now = writer.tags();
  std::vector<std::string> removed;
  for (const auto& t : tags)
    if (std::find(now.begin(), now.end(), t) == now.end()) removed.push_back(t);
  std::cout << "removed " << removed.size() << " tag(s)";
  for (std::size_t i = 0; i < removed.size(); ++i)
    std::cout << (i ? ", " : ": ") << quoted_name(removed[i]);
  std::cout << "; kept " << now.size() << outcome(writer.last_stats(), before, archive_size(path))
            << "\n";
  return 0;
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--keep-last"}, {"--rewrite"});
  const auto keep = args.value("--keep-last");
  args.expect_positionals(keep ? 1 : 2, keep ? 1 : 2, {"ARCHIVE", "TAG (or --keep-last N)"});
  const std::string& path = args.path_at(0, "ARCHIVE");
  require_existing_archive(path);
  ProgressBar bar("removing");
  WriterOptions options = writer_options(path, bar.callback());
  options.append = !args.flag("--rewrite");
  if (keep) return keep_last(path, args.number_or("--keep-last", 1, 1, 1000000000), options);
  Writer writer = Writer::open(path, std::move(options));
  // What the tag holds, for the report: its own blobs, and those of them
  // another tag still references (they move instead of being deleted).
  std::string tag = args.tag_at(1, "TAG");
  std::size_t params = 0, states = 0, moved = 0, own = 0;
  bool damaged = false;
  const auto before = archive_size(path);
  {
    Archive archive = Archive::open(path);
    tag = archive.find_tag(tag).value_or(tag);
    std::set<std::string> own_blobs, kept;
    auto count = [&](const std::vector<ParamInfo>& infos, std::size_t& n) {
      n = infos.size();
      for (const auto& p : infos)
        if (!p.shared) own_blobs.insert(p.blob);
    };
    damaged = archive.find_tag(tag) && archive.tag_damage(tag);
    if (archive.find_tag(tag) && !damaged) {
      count(archive.params(tag), params);
      count(archive.updater_states(tag), states);
      for (const auto& other : archive.tags()) {
        if (other == tag || archive.tag_damage(other)) continue;
        for (const auto& p : archive.params(other))
          if (own_blobs.count(p.blob)) kept.insert(p.blob);
        for (const auto& p : archive.updater_states(other))
          if (own_blobs.count(p.blob)) kept.insert(p.blob);
      }
    }
    own = own_blobs.size();
    moved = kept.size();
  }
  writer.remove_tag(tag);
  writer.commit();
  std::cout << "removed tag " << quoted_name(tag) << " ";
  if (damaged)  // its tables were unreadable: what it held is not known
    std::cout << "(damaged tables); its blobs other tags share were kept";
  else
    std::cout << "(" << params << " parameter(s), " << states << " updater state(s)); "
              << own - moved << " blob(s) deleted, " << moved << " moved to a tag that shares them";
  std::cout << outcome(writer.last_stats(), before, archive_size(path)) << "\n";
  return 0;
}

}  // namespace

extern const Command kRmTagCommand{
    "rm-tag",
    "Remove a tag, or all but the newest N (blobs other tags share are kept)",
    "modelzip rm-tag ARCHIVE TAG [--rewrite]\n       modelzip rm-tag ARCHIVE --keep-last N "
    "[--rewrite]",
    "The tag is matched without regard to case. Blobs of the removed tag that other\n"
    "tags reference move into the oldest of those tags; everything else of the tag\n"
    "is deleted. --keep-last N removes the oldest tags until N remain (tags another\n"
    "writer added meanwhile count too), in one commit.\n"
    "The removal happens in place, at the cost of what changes: the tag's entries\n"
    "leave the zip directory and their bytes stay in the file as free entries that\n"
    "every zip reader skips, until gc (or a later commit that would leave more free\n"
    "than live bytes) rewrites the archive. Blobs that move are copied. Readers see\n"
    "the old archive or the new one, also if the command is killed. --rewrite\n"
    "rewrites the archive instead (atomically, through a temporary file), which\n"
    "drops the bytes at once. Prints what was removed. A tag whose tables are\n"
    "damaged can be removed too (see verify).\n\nExamples:\n"
    "  modelzip rm-tag model.zip step-100\n"
    "  modelzip rm-tag model.zip --keep-last 5\n",
    run,
    1,
    true};

}  // namespace modelzip::cli
