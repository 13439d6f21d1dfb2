// What an S3 store says when it refuses to read an object. A refused HEAD
// (the request that pins an object) has no body, so its status alone cannot
// tell a missing bucket from a missing key or a refused signature; the same
// GET answers with an S3 error document (<Code>, <Message>) that can.
#pragma once

#include <optional>

#include "modelzip/error.hpp"
#include "remote/endpoint.hpp"
#include "remote/settings.hpp"

namespace modelzip::remote {

// The error to report for the s3:// object of `endpoint` in place of a bare
// "HTTP <status>" answer to HEAD: one GET of the object's first byte, whose
// S3 error document gives "no such bucket 'B'", "no such key 'K' in bucket
// 'B'" (ErrorCode::not_found) or "HTTP <status> <Code>: <Message>" (not_found
// for 404, else io), naming the URL. nullopt when that GET gives no S3 error
// document (a failed transfer, another answer, a body without <Code>): the
// caller keeps its own error. Reads at most 64 KiB of the answer.
std::optional<Error> explain_s3_refusal(const Endpoint& endpoint, const Settings& settings,
                                        long status);

}  // namespace modelzip::remote
