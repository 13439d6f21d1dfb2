// Clean-up of the incomplete multipart uploads that writers killed outright
// (SIGKILL, a lost machine) leave behind on a key: their parts stay on the
// server, invisible but billed, until aborted.
//
// abort_stale_uploads() lists the key's incomplete uploads
// (ListMultipartUploads) and aborts (AbortMultipartUpload) those initiated
// more than `older_than` before `now`; younger ones may belong to a writer
// still at work and are left alone. Best effort: a server that implements
// neither request (@20minutes/s3rver answers 501 and 405), refuses them
// (403), or fails, costs nothing but the attempt -- no error reaches the
// caller, the writer goes on. Returns the number of uploads aborted.
//
// Thread safety: as S3Multipart (any thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote/s3_multipart.hpp"

namespace modelzip::remote {

// How old an incomplete upload must be before a writer of its key aborts it
// by default (MODELZIP_S3_STALE_UPLOAD_AGE, in seconds, overrides it).
inline constexpr std::chrono::seconds kDefaultStaleUploadAge{24 * 3600};

std::size_t abort_stale_uploads(
    const S3Multipart& s3, std::chrono::seconds older_than,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) noexcept;
// Its two steps, for a writer that creates its own upload meanwhile: the
// key's incomplete uploads initiated more than `older_than` before `now`
// (none where listing fails), and the abort of `uploads` but the one whose
// id is `except` (the writer's own); returns how many were aborted.
std::vector<S3PendingUpload> list_stale_uploads(
    const S3Multipart& s3, std::chrono::seconds older_than,
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) noexcept;
std::size_t abort_uploads(const S3Multipart& s3, const std::vector<S3PendingUpload>& uploads,
                          std::string_view except = {}) noexcept;

// The bound the writers of `url` use: MODELZIP_S3_STALE_UPLOAD_AGE (whole
// seconds, 0 aborts every incomplete upload of the key) or, unset,
// kDefaultStaleUploadAge. Any other value throws Error(invalid_argument)
// naming the variable and `url`.
std::chrono::seconds stale_upload_age(const std::string& url);

// "2026-11-27T23:10:05.123Z" (S3's Initiated, UTC): the time it names
// (fractions dropped); nullopt if malformed.
std::optional<std::chrono::system_clock::time_point> parse_s3_time(std::string_view text);

}  // namespace modelzip::remote
