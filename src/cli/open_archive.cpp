#include "cli/open_archive.hpp"

#include <filesystem>
#include <iostream>

#include "cli/progress_bar.hpp"
#include "cli/terminal.hpp"
#include "remote/remote_source.hpp"

namespace modelzip::cli {

Archive open_archive(const std::string& path_or_url) {
  OpenOptions options;
  if (Archive::is_remote_url(path_or_url)) {
    static ProgressBar bar("fetching");  // one per process; draws only on a terminal
    options.remote.progress = bar.callback();
  }
  return Archive::open(path_or_url, options);
}

void require_writable(const std::string& path) {
  if (!remote::can_upload(path)) remote::refuse_write(path);
}

void require_existing_archive(const std::string& path) {
  require_writable(path);
  if (remote::can_upload(path)) {
    remote::open(path, RemoteOptions{});  // Error(not_found) naming the URL if absent
    return;
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(ErrorCode::not_found, "no such archive (create it with modelzip import)",
                ErrorContext{.archive = path});
  if (std::filesystem::is_directory(path, ec))
    throw Error(ErrorCode::io, "is a folder, not a file", ErrorContext{.archive = path});
}

std::uint64_t archive_size(const std::string& path) {
  if (remote::can_upload(path)) return remote::open(path, RemoteOptions{}).file.size();
  return std::filesystem::file_size(path);
}

WriterOptions writer_options(const std::string& path, ProgressCallback progress) {
  WriterOptions options;
  options.progress = std::move(progress);
  options.on_wait = [path] {
    std::cerr << "modelzip: waiting for the writer of " << printable(path) << "..." << std::endl;
  };
  options.on_notice = [path](const std::string& notice) {
    std::cerr << "modelzip: " << printable(path) << ": " << printable_message(notice) << std::endl;
  };
  return options;
}

}  // namespace modelzip::cli
