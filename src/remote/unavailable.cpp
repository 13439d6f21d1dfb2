// Built without libcurl (meson feature `remote` disabled or libcurl missing).
#include "modelzip/error.hpp"
#include "remote/pin_check.hpp"
#include "remote/remote_source.hpp"

namespace modelzip::remote {

Opened open(const std::string& url, const RemoteOptions&, MissingObject) {
  throw Error(ErrorCode::unsupported,
              "this modelzip was built without remote archive support (libcurl); download the "
              "archive and open the local file",
              ErrorContext{.archive = url});
}

bool changed_on_server(const io::ByteSource&) {
  return false;
}

}  // namespace modelzip::remote
