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

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {});
  args.expect_positionals(2, 2);
  const std::string& path = args.at(0, "ARCHIVE");
  require_existing_archive(path);
  ProgressBar bar("rewriting");
  Writer writer = Writer::open(path, writer_options(path, bar.callback()));
  // What the tag holds, for the report: its own blobs, and those of them
  // another tag still references (they move instead of being deleted).
  std::string tag = args.tag_at(1, "TAG");
  std::size_t params = 0, states = 0, moved = 0, own = 0;
  bool damaged = false;
  const auto before = std::filesystem::file_size(path);
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
  const auto after = std::filesystem::file_size(path);
  std::cout << "removed tag '" << printable(tag) << "' ";
  if (damaged)  // its tables were unreadable: what it held is not known
    std::cout << "(damaged tables); its blobs other tags share were kept";
  else
    std::cout << "(" << params << " parameter(s), " << states << " updater state(s)); "
              << own - moved << " blob(s) deleted, " << moved << " moved to a tag that shares them";
  std::cout << "; archive " << human_bytes(before) << " -> " << human_bytes(after) << "\n";
  return 0;
}

}  // namespace

extern const Command kRmTagCommand{
    "rm-tag", "Remove a tag (blobs other tags share are kept)", "modelzip rm-tag ARCHIVE TAG",
    "The tag is matched without regard to case. Blobs of the removed tag that other\n"
    "tags reference move into the oldest of those tags; everything else of the tag\n"
    "is deleted. The archive is replaced atomically. Prints what was removed, like\n"
    "gc. A tag whose tables are damaged can be removed too (see verify).\n\nExample:\n"
    "  modelzip rm-tag model.zip step-100\n",
    run, 1, true};

}  // namespace modelzip::cli
