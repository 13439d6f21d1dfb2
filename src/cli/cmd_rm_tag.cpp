#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/progress_bar.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {});
  args.expect_positionals(2, 2);
  ProgressBar bar("rewriting");
  Writer writer = Writer::open(args.at(0, "ARCHIVE"), WriterOptions{.progress = bar.callback()});
  writer.remove_tag(args.at(1, "TAG"));
  writer.commit();
  return 0;
}

}  // namespace

extern const Command kRmTagCommand{
    "rm-tag", "Remove a tag (blobs other tags share are kept)", "modelzip rm-tag ARCHIVE TAG",
    "The tag is matched without regard to case. Blobs of the removed tag that other\n"
    "tags reference move into the oldest of those tags; everything else of the tag\n"
    "is deleted. The archive is replaced atomically.\n\nExample:\n"
    "  modelzip rm-tag model.zip step-100\n",
    run};

}  // namespace modelzip::cli
