#include "remote/remote_source.hpp"

namespace modelzip::remote {

bool is_url(std::string_view path) noexcept {
  return path.starts_with("http://") || path.starts_with("https://") || path.starts_with("s3://");
}

}  // namespace modelzip::remote
