// Process-wide cancellation of long operations, for signal handlers.
//
// request_cancel() asks every save (Writer::commit), copying load and verify
// of this process to stop at its next progress point (at least every 4 MiB
// written or read, and between entries; a read of a remote archive within
// 0.1 s, whatever it waits for): the operation throws
// Error(cancelled) and leaves nothing half-done behind -- a cancelled commit
// rolls back, so the archive is the previous one byte for byte and no
// journal or temporary file stays. A commit that is past its commit point
// (the rename, or the journal's removal) finishes instead. A tensor or
// embedding file written to replace a file (export) stops before its next
// piece and before its rename: the file stays as it was, without a
// temporary file beside it.
//
// The request stays until clear_cancel(). Thread safety: all three are
// lock-free atomic operations, safe from any thread and async-signal-safe
// (callable from a signal handler). The modelzip command calls
// request_cancel() on SIGINT and SIGTERM and exits with 128 + the signal.
#pragma once

#include "modelzip/export.hpp"

namespace modelzip {

MODELZIP_API void request_cancel() noexcept;
MODELZIP_API void clear_cancel() noexcept;
MODELZIP_API bool cancel_requested() noexcept;

}  // namespace modelzip
