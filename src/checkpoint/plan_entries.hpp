// Writing a plan (archive_plan.hpp) as zip entries, whole or in place: an
// in-place commit (WriterOptions::append) keeps the old entries that are in
// the plan at their place and writes only the others after them.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/archive_plan.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip::checkpoint {

// Bytes to be written for `c`.
std::uint64_t content_size(const Content& c);

// Whether the planned entry `name` holding `c` is the old archive's entry of
// that name, which an in-place commit keeps where it is.
bool in_place(const std::string& name, const Content& c);

// Whether an in-place commit keeps the old tag's params.txt and updater.txt.
bool tables_in_place(const TagPlan& t);

// Writes the entries of the plan but tags.txt: everything (rewrite), or
// with `changes_only` (in-place commits) those that are not in the old
// archive at their place: new tags, changed tables, blobs that moved. With
// `keep_old` (s3:// uploads), old entries are declared kept in the sink
// (copied server-side) instead of copied through this process.
void emit_tags(zip::StreamZipWriter& zw, const Plan& plan, const Archive::Impl* old_impl,
               bool changes_only, bool keep_old = false);

// A complete archive: every entry, then tags.txt last (the tail that the
// next append overwrites, FORMAT.md section 8.1).
void emit_all(zip::StreamZipWriter& zw, const Plan& plan, const Archive::Impl* old_impl,
              bool keep_old = false);

// Bytes of entry data that emit_tags writes for the tags (the tables aside).
std::uint64_t expected_bytes(const Plan& plan, bool changes_only);

// The old entries that an in-place commit of `plan` keeps where they are.
std::set<const zip::EntryInfo*> kept_in_place(const Plan& plan, const Archive::Impl& old);

// An upper bound of where an in-place commit of `plan` ends, for
// AppendSession::protect: the old tail's bytes (its entries' directory
// records and end records are in the new tail again, or fewer of them),
// then per entry emit_tags(changes_only) writes its local header (with a
// ZIP64 field and the largest padding), its data (deflated: at most 1/256 +
// 1 KiB more than the input) and its directory record, the new tags.txt's
// added lines, and slack for the ZIP64 end records.
std::uint64_t append_end_bound(const Plan& plan, std::uint64_t old_size);

}  // namespace modelzip::checkpoint
