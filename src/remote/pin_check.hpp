// Whether a remote archive's object is still the version its source pinned
// (remote/remote_source.hpp): Archive::changed_since_open of a URL.
#pragma once

#include "io/byte_source.hpp"

namespace modelzip::remote {

// Whether the object that `source` (of remote::open) reads is no longer the
// version it pinned: one HEAD request, true when the object is gone (404) or
// its size, or its ETag (pinned without one: its Last-Modified), differ from
// the pin. False for a source that is not remote::open's, and in builds
// without libcurl. Errors: Error(io) naming the URL when the server cannot
// be asked (network failure, an answer other than 200 or 404, after the
// retries of transient failures); Error(cancelled) as any fetch.
bool changed_on_server(const io::ByteSource& source);

}  // namespace modelzip::remote
