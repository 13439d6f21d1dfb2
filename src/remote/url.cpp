#include "modelzip/error.hpp"
#include "remote/remote_source.hpp"

namespace modelzip::remote {

bool is_url(std::string_view path) noexcept {
  return path.starts_with("http://") || path.starts_with("https://") || path.starts_with("s3://");
}

void refuse_write(std::string_view path) {
  if (is_url(path))
    throw Error(ErrorCode::unsupported, "remote archives are read-only: " + std::string(path));
}

}  // namespace modelzip::remote
