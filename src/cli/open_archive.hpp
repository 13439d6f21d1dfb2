// Opening the ARCHIVE argument of the read-only commands: a local path or an
// http://, https:// or s3:// URL (modelzip/remote.hpp), with a progress bar
// on a terminal while a remote read fetches many bytes.
#pragma once

#include <string>

#include "modelzip/archive.hpp"

namespace modelzip::cli {

Archive open_archive(const std::string& path_or_url);

}  // namespace modelzip::cli
