#include <filesystem>
#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/open_archive.hpp"
#include "cli/progress_bar.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  const std::string& path = args.path_at(0, "ARCHIVE");
  require_existing_archive(path);
  auto before = archive_size(path);
  ProgressBar bar("rewriting");
  Writer writer = Writer::open(path, writer_options(path, bar.callback()));
  writer.collect_garbage();
  writer.commit();
  auto after = archive_size(path);
  const auto& s = writer.last_stats();
  std::cout << "removed " << s.blobs_collected << " unreferenced blob(s), "
            << human_bytes(s.bytes_collected) << "; archive " << human_bytes(before) << " -> "
            << human_bytes(after) << " (saved " << human_bytes(before > after ? before - after : 0)
            << ")\n";
  return 0;
}

}  // namespace

extern const Command kGcCommand{
    "gc",
    "Drop blobs that no tag references, and report the bytes saved",
    "modelzip gc ARCHIVE",
    "Blobs become unreferenced when an archive is edited by other tools; modelzip's\n"
    "own rm-tag keeps shared blobs and drops the rest. gc also reclaims the space\n"
    "that in-place changes (rm-tag, --keep-last, --replace) leave as free entries\n"
    "(their \"freed in place\"), so it may save bytes with 0 blobs removed. The\n"
    "archive is replaced atomically.\n\nExample:\n  modelzip gc model.zip\n",
    run,
    1,
    true};

}  // namespace modelzip::cli
