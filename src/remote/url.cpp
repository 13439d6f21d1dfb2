#include "modelzip/error.hpp"
#include "remote/remote_source.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/upload_config.hpp"

namespace modelzip::remote {

constexpr bool kCanUpload = MODELZIP_CAN_UPLOAD;

bool is_url(std::string_view path) noexcept {
  return path.starts_with("http://") || path.starts_with("https://") || path.starts_with("s3://");
}

bool is_s3_url(std::string_view path) noexcept {
  return path.starts_with("s3://");
}

bool can_upload(std::string_view path) noexcept {
  return kCanUpload && is_s3_url(path);
}

void refuse_write(std::string_view path) {
  if (!kCanUpload && is_s3_url(path))
    throw Error(ErrorCode::unsupported,
                "this modelzip was built without remote archive support (libcurl), so it cannot "
                "write s3:// archives: " +
                    std::string(path));
  if (is_url(path))
    throw Error(ErrorCode::unsupported, "remote archives are read-only: " + std::string(path));
}

// Here, not in s3_multipart.cpp: writers ask it in builds without libcurl
// too (where it is never true).
bool refused_for_another_writer(const Error& e) {
  const std::string& m = e.message();
  return e.code() == ErrorCode::io && m.find(kMayHaveTakenEffect) == std::string::npos &&
         (m.find(kChangedByAnotherWriter) != std::string::npos ||
          m.find(kChangedWhileReading) != std::string::npos);
}

std::string planned_again_notice(const Error& e, int replans) {
  return "another writer's commit came first (" + e.message() +
         "): the commit is planned again against the archive as it is now (new plan " +
         std::to_string(replans) + " of " + std::to_string(kS3Replans) + ")";
}

void refuse_url_of_file(std::string_view path, std::string_view kind) {
  if (is_url(path))
    throw Error(ErrorCode::unsupported,
                "a URL: " + std::string(kind) +
                    " files are read from local paths (download it first; modelzip archives are "
                    "read over http, https and s3, docs/remote.md)",
                ErrorContext{.archive = std::string(path)});
}

}  // namespace modelzip::remote
