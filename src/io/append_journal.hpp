// The append journal: crash safety for archives that grow in place.
//
// Before a writer appends to an archive, it records the archive's current
// size in ".<archive name>.modelzip-append" beside it (written and fsynced
// before the first appended byte). The append writes new entries and a new
// central directory after the old end, then the end record, and only then
// removes the journal. While the journal exists, the first `old_size` bytes
// are still the complete previous archive (appending never changes them), so:
//  - a reader whose archive does not parse falls back to that prefix;
//  - the next writer recovers: if the whole file parses, the append had
//    finished (keep it), otherwise it truncates the file to `old_size`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace modelzip::io {

std::filesystem::path append_journal_path(const std::filesystem::path& archive);
// The recorded size, or nullopt when there is no (readable) journal.
std::optional<std::uint64_t> read_append_journal(const std::filesystem::path& archive) noexcept;
// Writes the journal durably (file and folder fsynced). Throws Error(io).
void write_append_journal(const std::filesystem::path& archive, std::uint64_t old_size);
// Removes the journal (and fsyncs the folder if `durable`). Throws Error(io).
void remove_append_journal(const std::filesystem::path& archive, bool durable);

}  // namespace modelzip::io
