// Writer's state between open() and commit(), and the phases of a commit:
// plan the staged operations against the archive as it is under the lock
// (archive_plan.hpp, tag_adder.hpp), then rewrite it through a temporary
// file, append in place behind a journal (zip::AppendSession), or upload it
// to s3:// (writer_s3.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/archive_plan.hpp"
#include "checkpoint/s3_old_archive.hpp"
#include "core/progress_tracker.hpp"
#include "format/tag_name.hpp"
#include "io/file_identity.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/writer.hpp"
#include "remote/s3_upload_sink.hpp"

namespace modelzip {

namespace checkpoint {

// The operations a Writer stages, applied in order at commit.
struct AddOp {
  std::string tag;
  NewTag contents;
  bool replace = false;  // replace_tag: remove the tag of that name first, if any
};
struct RemoveOp {
  std::string tag;
};
struct KeepLastOp {
  std::size_t count;
};
struct GcOp {};

}  // namespace checkpoint

class Writer::Impl {
 public:
  // The archive: `path` is where its file is (symbolic links followed once,
  // at open: io::resolve_archive_path), `shown` what the caller named, which
  // every error names.
  std::filesystem::path path;
  std::filesystem::path shown;
  // The archive's descriptor while commit() holds the writer lock; -1 when
  // there was no archive.
  int archive_fd = -1;
  WriterOptions options;
  std::vector<std::variant<checkpoint::AddOp, checkpoint::RemoveOp, checkpoint::KeepLastOp,
                           checkpoint::GcOp>>
      ops;
  // Staged metadata changes, applied in order at commit to the metadata the
  // archive has then (read under the lock).
  std::vector<std::function<void(Metadata&)>> metadata_edits;
  std::vector<std::string> current_tags;  // as of open / last commit
  Stats last_stats;                       // of the last commit
  // The archive as parsed by open(), with the identity the file had then:
  // commit() reuses it if the file is still the same, instead of parsing it
  // again (it keeps the file mapped until then). Kept only when the read
  // itself found no valid append journal before and after it
  // (zip::SnapshotFile::identity): while one is there, open() reads the
  // previous archive (the journal's), and the removal that commits the
  // append leaves the file's identity as it was. Checks of the journal made
  // around Archive::open would not do: an append may start after such a
  // check and have set its new size before the read begins.
  struct Snapshot {
    Archive archive;
    io::FileIdentity identity;
  };
  std::optional<Snapshot> snapshot;

  void refresh() {
    current_tags.clear();
    snapshot.reset();
    if (!io::identity_of(path)) return;
    Archive archive = Archive::open(path);
    current_tags = archive.tags();
    const std::optional<io::FileIdentity> read = Archive::Impl::of(archive).snapshot_file.identity;
    if (read && io::identity_of(path) == read)
      snapshot.emplace(Snapshot{std::move(archive), *read});
  }

  // The archive as it is now (under the lock), or nullopt if there is none.
  std::optional<Archive> current_archive() {
    const std::optional<io::FileIdentity> now = io::identity_of(path);
    std::optional<Archive> out;
    if (now && snapshot && snapshot->identity == *now)
      out.emplace(std::move(snapshot->archive));
    else if (now)
      out.emplace(Archive::open(path));
    snapshot.reset();
    return out;
  }

  std::vector<std::string> staged_tags() const {
    std::vector<std::string> tags = current_tags;
    auto remove = [&](std::string_view tag) {
      std::erase_if(tags, [&](const std::string& t) { return format::same_tag(t, tag); });
    };
    for (const auto& op : ops) {
      if (auto* add = std::get_if<checkpoint::AddOp>(&op)) {
        if (add->replace) remove(add->tag);
        tags.push_back(add->tag);
      }
      if (auto* rm = std::get_if<checkpoint::RemoveOp>(&op)) remove(rm->tag);
      if (auto* keep = std::get_if<checkpoint::KeepLastOp>(&op); keep && tags.size() > keep->count)
        tags.erase(tags.begin(), tags.end() - static_cast<std::ptrdiff_t>(keep->count));
    }
    return tags;
  }

  ErrorContext context() const { return ErrorContext{.archive = shown.string()}; }
  // The tag the staged changes add (add_tag or replace_tag) if they add
  // one (in any letter case); "" otherwise.
  std::string added_tag() const {
    std::string added;
    for (const auto& op : ops)
      if (const auto* add = std::get_if<checkpoint::AddOp>(&op)) {
        if (!added.empty() && !format::same_tag(added, add->tag)) return {};
        added = add->tag;
      }
    return added;
  }
  // `e` naming the archive as the caller did (not its resolved target or
  // temporary file).
  Error as_shown(const Error& e) const {
    ErrorContext c = e.context();
    c.archive = shown.string();
    return e.reworded(e.message(), std::move(c));
  }

  // commit() runs these phases in order.
  void commit();
  // Throws Error(cancelled) once cancel_requested().
  void check_cancel() const;
  // Nothing to write: the stats and tags of `archive` as it is.
  void keep_unchanged(const Archive& archive);
  // Under the lock: the archive after removing stale temporary files and
  // rolling back an interrupted append, or nullopt if there is none.
  std::optional<Archive> recovered_archive();
  // The archive's plan after the staged operations, and the stats so far.
  struct StagedPlan {
    checkpoint::Plan plan;
    Stats stats;
  };
  StagedPlan plan_staged(const Archive::Impl* old_impl) const;
  // The progress of dedup's compare stage (none without dedup or callback).
  std::optional<detail::ProgressTracker> compare_tracker() const;
  // Throws when the plan keeps a tag whose tables could not be read.
  void check_undamaged(const checkpoint::Plan& plan) const;
  // Whether the staged operations only add and remove tags.
  bool only_tag_changes() const;
  // Writes the plan (in place or by rewriting) and consumes the staged
  // operations once the new archive is visible.
  void write_staged(StagedPlan& staged, const Archive::Impl* old_impl);
  // plan_staged, check_undamaged and write_staged from the archive as it
  // is now (nullptr: none).
  void plan_and_write(const Archive::Impl* old_impl);
  bool appendable(const Archive::Impl& old) const;

  // s3://BUCKET/KEY archives (remote/s3_upload_sink.hpp): one object,
  // replaced by a multipart upload completed on condition that the object
  // is still the version planned from (If-Match), or still absent
  // (If-None-Match).
  bool s3 = false;
  using S3Old = checkpoint::S3OldArchive;
  std::optional<S3Old> s3_old;  // during commit()
  std::optional<S3Old> open_s3() const;
  // The commit's upload, created (and stale ones cleaned up) while
  // open_s3() reads the old object; upload() takes it over. During commit().
  std::shared_ptr<remote::S3UploadStart> s3_start;
  std::shared_ptr<remote::S3UploadStart> start_s3_upload() const;
  void refresh_s3();
  // Uploads the result of `plan`: an append (every old entry kept, only
  // tags added) copies the old object's bytes before its tail server-side
  // and uploads the new entries and the tail; anything else uploads the
  // whole archive.
  void upload(const checkpoint::Plan& plan, const Archive::Impl* old_impl,
              const std::optional<std::set<const zip::EntryInfo*>>& kept, Stats& stats,
              bool* visible);
  // Whether an in-place commit of `plan` would leave more freed bytes than
  // live ones (then it rewrites, which drops them).
  bool mostly_free(const std::set<const zip::EntryInfo*>& kept, const checkpoint::Plan& plan,
                   const Archive::Impl& old) const;
  // Both set `*visible` once the new archive is what readers see; if they
  // throw after that, the commit happened but may not be durable.
  void rewrite(const checkpoint::Plan& plan, const Archive::Impl* old_impl, Stats& stats,
               bool* visible);
  // `kept`: the old entries that stay where they are (kept_in_place).
  void append_to(const checkpoint::Plan& plan, const Archive::Impl& old,
                 const std::set<const zip::EntryInfo*>& kept, Stats& stats, bool* visible);
  // After an in-place commit: formats the freed ranges before the old tail
  // (the bytes that no kept entry covers) as free entries.
  void mark_free_ranges(const std::set<const zip::EntryInfo*>& kept, const Archive::Impl& old,
                        std::uint64_t tail_start, Stats& stats);
};

}  // namespace modelzip
