#include "io/atomic_write.hpp"

#include <ostream>

#include "io/durable_file.hpp"
#include "io/posix_file.hpp"
#include "io/sink_buf.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"

namespace modelzip::io {
namespace {

void stop_if_cancelled(const ErrorContext& context) {
  if (cancel_requested())
    throw Error(ErrorCode::cancelled, "write cancelled (interrupted); the file is unchanged",
                context);
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(std::ostream&)>& write, bool durable) {
  TempFile temp = TempFile::beside(path);
  remove_stale_temp_files(temp.target());  // of writers killed before their rename
  const ErrorContext context{.archive = path.string()};
  {
    OutputFile file(temp);  // errors name `path` (fail_to_create)
    std::uint64_t offset = 0;
    const SinkBuf::Sink sink = [&](std::span<const std::byte> piece) {
      stop_if_cancelled(context);
      pwrite_full(file.fd(), piece.data(), piece.size(), offset, context);
      offset += piece.size();
    };
    SinkBuf buf(sink);
    std::ostream out(&buf);
    try {
      write(out);
      out.flush();
    } catch (const Error& e) {
      buf.rethrow_error();  // the system's reason beats the stream's "cannot write"
      throw e.with_context(context);
    }
    buf.rethrow_error();
    if (!out) throw Error(ErrorCode::io, "cannot write", context);
    file.close();
  }
  stop_if_cancelled(context);  // the last point before the rename
  temp.commit(durable);
}

}  // namespace modelzip::io
