#include "cli/open_archive.hpp"

#include "cli/progress_bar.hpp"

namespace modelzip::cli {

Archive open_archive(const std::string& path_or_url) {
  OpenOptions options;
  if (Archive::is_remote_url(path_or_url)) {
    static ProgressBar bar("fetching");  // one per process; draws only on a terminal
    options.remote.progress = bar.callback();
  }
  return Archive::open(path_or_url, options);
}

}  // namespace modelzip::cli
