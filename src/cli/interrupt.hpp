// Ctrl-C and SIGTERM for the commands that change an archive (import,
// rm-tag, gc, quantize; meta when it has changes): the first SIGINT or
// SIGTERM asks the library to cancel (modelzip::request_cancel), which
// rolls the change back -- the archive is the previous one byte for byte,
// no journal or temporary file is left -- and main() then exits with 128 +
// the signal (130, 143). A second signal ends the process at once (the
// default action); the next writer then cleans up (journal recovery, stale
// temporary files), as after SIGKILL.
// export and extract install them too: export leaves OUT as it was and no
// temporary file beside it (exit 130, 143); extract keeps the files it
// finished and removes the one it was writing.
#pragma once

namespace modelzip::cli {

// Installs the handlers (no SA_RESTART: a wait for the archive's lock
// returns, and the library turns it into the cancellation).
void install_interrupt_handlers();
// The signal received (SIGINT or SIGTERM), or 0.
int interrupt_signal() noexcept;

}  // namespace modelzip::cli
