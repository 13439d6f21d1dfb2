// Writer: plans the new archive from the old one plus the staged changes
// (archive_plan.hpp, tag_adder.hpp), then writes it through
// zip::StreamZipWriter (plan_entries.hpp) to a temporary file and replaces
// the archive durably (io::TempFile), or appends in place behind a journal
// (zip::AppendSession); s3:// archives are uploaded by writer_s3.cpp.
#include "modelzip/writer.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <variant>

#include "checkpoint/archive_plan.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "checkpoint/plan_entries.hpp"
#include "checkpoint/polled_lock_waits.hpp"
#include "checkpoint/tag_adder.hpp"
#include "checkpoint/writer_impl.hpp"
#include "core/kept_symbol.hpp"
#include "core/progress_tracker.hpp"
#include "core/suggestions.hpp"
#include "format/archive_metadata.hpp"
#include "format/tag_name.hpp"
#include "format/tags_file.hpp"
#include "io/append_journal.hpp"
#include "io/direct_write_choice.hpp"
#include "io/durable_file.hpp"
#include "io/file_identity.hpp"
#include "io/posix_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"
#include "remote/remote_source.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/s3_refusal.hpp"
#include "zip/append_session.hpp"
#include "zip/archive_layout.hpp"
#include "zip/free_range.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip {

using checkpoint::AddOp;
using checkpoint::append_end_bound;
using checkpoint::check_undamaged_plan;
using checkpoint::drop_unreferenced_blobs;
using checkpoint::emit_all;
using checkpoint::emit_tags;
using checkpoint::expected_bytes;
using checkpoint::GcOp;
using checkpoint::KeepLastOp;
using checkpoint::kept_in_place;
using checkpoint::Plan;
using checkpoint::plan_from;
using checkpoint::remove_from_plan;
using checkpoint::RemoveOp;
using checkpoint::TagAdder;
using checkpoint::TagPlan;

void Writer::Impl::commit() {
  check_cancel();
  if (s3) {
    if (ops.empty() && metadata_edits.empty()) {
      last_stats = {};
      return;
    }
    struct Done {
      Impl& impl;
      ~Done() {
        impl.s3_old.reset();
        impl.s3_start.reset();  // not taken (a failed commit): aborted
      }
    } done{*this};
    // A commit refused because another writer's commit came first (its
    // upload aborted, nothing of it visible) is planned again against the
    // object as it is now, as a caller's retry would, at most remote::s3_replans()
    // times: the staged changes name tags, parameters and edits, not the
    // version they were staged on. A conflict they cannot resolve is
    // reported by the new plan (a tag another writer added is there).
    for (int replans = 0;; ++replans) {
      const auto attempt = std::chrono::steady_clock::now();
      try {
        s3_start = start_s3_upload();
        s3_old = open_s3();
        plan_and_write(s3_old ? s3_old->archive.get() : nullptr);
        return;
      } catch (const Error& e) {
        if (!remote::refused_for_another_writer(e) || replans == remote::s3_replans() ||
            (ops.empty() && metadata_edits.empty()))
          throw;
        // Progress reports start again from 0: say why.
        if (options.on_notice) options.on_notice(remote::planned_again_notice(e, replans + 1));
      }
      s3_start.reset();  // aborted
      s3_old.reset();
      check_cancel();
      remote::pause_before_new_plan(replans + 1, std::chrono::steady_clock::now() - attempt);
      check_cancel();
    }
  }
  // Nothing staged and no interrupted append to recover: the archive stays
  // as it is, so no lock is needed, nor permission to write it.
  if (ops.empty() && metadata_edits.empty() &&
      !std::filesystem::exists(io::append_journal_path(path))) {
    if (std::optional<Archive> old = current_archive()) return keep_unchanged(*old);
  }
  // A signal that interrupts the wait for another writer's lock asks the
  // progress callback (0 of 0 bytes) whether to go on waiting: Python's
  // Ctrl-C is only seen there (WriterOptions::progress).
  const std::chrono::milliseconds poll(checkpoint::PolledLockWaits::active() ? 50 : 0);
  io::FileLock lock(
      path, options.on_wait, [this] { return !options.progress || options.progress(Progress{}); },
      poll);
  check_cancel();
  archive_fd = lock.archive_fd();
  struct ForgetFd {
    int& fd;
    ~ForgetFd() { fd = -1; }
  } forget{archive_fd};
  std::optional<Archive> old = recovered_archive();
  if (old && ops.empty() && metadata_edits.empty()) return keep_unchanged(*old);
  plan_and_write(old ? &Archive::Impl::of(*old) : nullptr);
}

void Writer::Impl::plan_and_write(const Archive::Impl* old_impl) {
  std::optional<StagedPlan> planned;
  try {
    planned.emplace(plan_staged(old_impl));
  } catch (const Error& e) {
    // Dedup read old blobs from the server (s3://) and an interrupt stopped
    // the read ("read cancelled (SIGINT): ..."): say what became of the
    // save. The progress callback is asked first, as by open_s3(), so that
    // a caller that noticed the interrupt itself (Python) stops in its own
    // terms.
    if (e.code() != ErrorCode::cancelled || !old_impl || !old_impl->reader.source()) throw;
    if (options.progress) options.progress(Progress{});
    throw remote::save_cancelled(e, remote::kComparingOldBlobs,
                                 "its upload is aborted, the archive unchanged");
  }
  StagedPlan& staged = *planned;
  check_undamaged(staged.plan);
  write_staged(staged, old_impl);
}

void Writer::Impl::check_cancel() const {
  if (cancel_requested())
    throw Error(ErrorCode::cancelled, "save cancelled (interrupted)", context());
}

void Writer::Impl::keep_unchanged(const Archive& archive) {
  last_stats = {};
  current_tags = archive.tags();
}

std::optional<Archive> Writer::Impl::recovered_archive() {
  io::remove_stale_temp_files(path);
  try {
    if (auto rolled_back = zip::recover_append(path, true); rolled_back && options.on_notice)
      options.on_notice(zip::rollback_notice(*rolled_back));
  } catch (const Error& e) {
    throw e.with_context(context());
  }
  return current_archive();
}

std::optional<detail::ProgressTracker> Writer::Impl::compare_tracker() const {
  std::optional<detail::ProgressTracker> comparing;
  if (!options.dedup || !options.progress) return comparing;
  comparing.emplace(options.progress, "save", context(), Progress::Stage::compare);
  for (const auto& op : ops)
    if (const auto* add = std::get_if<AddOp>(&op)) {
      for (const auto& p : NewTag::Contents::of(add->contents).params) {
        if (p.source == NewTag::Contents::Param::Source::tensor)
          comparing->add_to_total(p.tensor.values().size());
        else if (p.source == NewTag::Contents::Param::Source::embedding)
          comparing->add_to_total(p.file.size());
      }
      for (const auto& u : NewTag::Contents::of(add->contents).updater_states)
        if (!u.shared) comparing->add_to_total(u.tensor.values().size());
    }
  return comparing;
}

Writer::Impl::StagedPlan Writer::Impl::plan_staged(const Archive::Impl* old_impl) const {
  StagedPlan staged{plan_from(old_impl), {}};
  Plan& plan = staged.plan;
  for (const auto& edit : metadata_edits) edit(plan.metadata);
  plan.metadata.writer = "modelzip " MODELZIP_VERSION;
  format::check_metadata(plan.metadata);  // refused before anything is written
  // Dedup reads every new tensor (and the blobs it may equal) before
  // anything is written: a stage of its own, over the new tensors' bytes.
  std::optional<detail::ProgressTracker> comparing = compare_tracker();
  TagAdder adder(plan, old_impl, options.dedup, staged.stats, comparing ? &*comparing : nullptr);
  for (const auto& op : ops) {
    if (const auto* add = std::get_if<AddOp>(&op)) {
      if (const TagPlan* replaced = add->replace ? plan.find(add->tag) : nullptr)
        remove_from_plan(plan, replaced->name);
      adder.add(add->tag, add->contents);
    } else if (const auto* keep = std::get_if<KeepLastOp>(&op)) {
      while (plan.tags.size() > keep->count) remove_from_plan(plan, plan.tags.front().name);
    } else if (std::holds_alternative<GcOp>(op)) {
      drop_unreferenced_blobs(plan, staged.stats);
    } else {
      const auto& rm = std::get<RemoveOp>(op);
      TagPlan* t = plan.find(rm.tag);
      if (!t)
        throw Error(ErrorCode::not_found, "no such tag to remove",
                    ErrorContext{.archive = shown.string(), .tag = rm.tag});
      remove_from_plan(plan, t->name);
    }
  }
  if (comparing) comparing->finish();
  return staged;
}

void Writer::Impl::check_undamaged(const Plan& plan) const {
  check_undamaged_plan(plan, path.string());
}

bool Writer::Impl::only_tag_changes() const {
  return metadata_edits.empty() && std::none_of(ops.begin(), ops.end(), [](const auto& op) {
           return std::holds_alternative<GcOp>(op);
         });
}

void Writer::Impl::write_staged(StagedPlan& staged, const Archive::Impl* old_impl) {
  const Plan& plan = staged.plan;
  // Once the new archive is visible, the staged changes are done, even if
  // making them durable failed afterwards: a retry must not repeat them.
  bool visible = false;
  auto consume_staged = [&] {
    std::vector<std::string> tag_names;
    for (const auto& t : plan.tags) tag_names.push_back(t.name);
    last_stats = staged.stats;
    ops.clear();
    metadata_edits.clear();
    current_tags = tag_names;
  };
  try {
    std::optional<std::set<const zip::EntryInfo*>> kept;
    if (options.append && old_impl && only_tag_changes() && appendable(*old_impl))
      kept = kept_in_place(plan, *old_impl);
    if (s3)
      upload(plan, old_impl, kept, staged.stats, &visible);
    else if (kept && !mostly_free(*kept, plan, *old_impl))
      append_to(plan, *old_impl, *kept, staged.stats, &visible);
    else
      rewrite(plan, old_impl, staged.stats, &visible);
  } catch (...) {
    if (visible) consume_staged();
    throw;
  }
  consume_staged();
}

// Appending in place needs an archive in the layout modelzip writes:
// tags.txt last, no unused bytes, nothing after the end record. Others
// (written by modelzip 0.1.0, or by other tools) are rewritten once, which
// puts them in that layout.
bool Writer::Impl::appendable(const Archive::Impl& old) const {
  return zip::appendable_in_place(old.directory, old.reader.file().span(), format::kTagsEntry);
}

void Writer::Impl::rewrite(const Plan& plan, const Archive::Impl* old_impl, Stats& stats,
                           bool* visible) {
  io::TempFile temp = io::TempFile::beside(path);
  try {
    io::OutputFile out(temp);
    if (archive_fd >= 0) io::keep_attributes(archive_fd, out.fd(), path);
    // Errors name the archive the user asked for, not the temporary file.
    zip::StreamZipWriter zw(out.fd(), path.string(), 0, expected_bytes(plan, false),
                            options.progress);
    if (options.durable && io::use_direct_writes(path, expected_bytes(plan, false)))
      zw.write_large_data_directly();
    emit_all(zw, plan, old_impl);
    stats.bytes_written = zw.finish();
    out.close();
    temp.commit(options.durable);
  } catch (const Error& e) {
    *visible = temp.committed();
    throw e.with_context(context());
  }
}

bool Writer::Impl::mostly_free(const std::set<const zip::EntryInfo*>& kept, const Plan& plan,
                               const Archive::Impl& old) const {
  std::uint64_t live = expected_bytes(plan, true);
  std::uint64_t freed = zip::unused_bytes(old.directory, old.reader.file().span());
  for (const auto& e : old.directory.entries) {
    const std::uint64_t n = zip::entry_extent(e).size;
    if (kept.count(&e))
      live += n;
    else if (e.name != format::kTagsEntry)
      freed += n;
  }
  return freed > live;
}

void Writer::Impl::append_to(const Plan& plan, const Archive::Impl& old,
                             const std::set<const zip::EntryInfo*>& kept, Stats& stats,
                             bool* visible) {
  // The tags this commit saves (new to the archive), for the journal.
  std::vector<std::string> saved;
  for (const auto& t : plan.tags)
    if (!t.old_tables[0]) saved.push_back(t.name);
  std::vector<std::string> names;
  for (const auto& t : plan.tags) names.push_back(t.name);
  std::uint64_t tail_start = 0;
  try {
    // Unless commit() returns, the session's destructor puts the old tail
    // back (or leaves the journal for the next writer).
    zip::AppendSession session(
        path, old.directory, old.reader.file(), std::string(format::kTagsEntry),
        {.durable = options.durable,
         .expected_bytes = expected_bytes(plan, true),
         .progress = options.progress,
         .direct_data = options.durable && io::use_direct_writes(path, expected_bytes(plan, true)),
         .keep_entry = [&](const zip::EntryInfo& e) { return kept.count(&e) > 0; },
         .tags = saved});
    tail_start = session.start_offset();
    // Until the new end records are in place, the file stays an ordinary
    // zip of the old archive (FORMAT.md section 8.1).
    session.protect(append_end_bound(plan, session.old_size()));
    emit_tags(session.writer(), plan, &old, true);
    try {
      stats.bytes_written =
          session.commit({Bytes::copy_of(format::write_tags_file(names))}) - session.start_offset();
    } catch (...) {
      *visible = session.committed();
      throw;
    }
    *visible = true;
  } catch (const Error& e) {
    if (*visible)
      throw e
          .reworded(
              "the change is visible, but finishing it in place failed (it may not survive "
              "a power loss): " +
                  e.message(),
              e.context())
          .with_context(context());
    throw e.with_context(context());
  }
  stats.appended = true;
  for (const auto& e : old.directory.entries)
    if (!kept.count(&e) && e.name != format::kTagsEntry)
      stats.bytes_freed += zip::entry_extent(e).size;
  mark_free_ranges(kept, old, tail_start, stats);
}

void Writer::Impl::mark_free_ranges(const std::set<const zip::EntryInfo*>& kept,
                                    const Archive::Impl& old, std::uint64_t tail_start,
                                    Stats& stats) {
  std::vector<zip::ByteRange> covered;
  covered.reserve(kept.size());
  for (const zip::EntryInfo* e : kept) covered.push_back(zip::entry_extent(*e));
  const std::vector<zip::ByteRange> gaps = zip::gaps_between(std::move(covered), tail_start);
  if (gaps.empty()) return;
  try {
    // The gaps lie before the old tail, which the commit did not change:
    // the old archive's mapping shows their bytes.
    const std::uint64_t written =
        zip::format_free_ranges(archive_fd, path.string(), old.reader.file().span(), gaps);
    if (written > 0 && options.durable && io::sys::fsync(archive_fd) != 0)
      io::throw_errno(path, "fsync failed");
    stats.bytes_written += written;
  } catch (const Error& e) {
    throw e
        .reworded(
            "the change is committed, but marking the removed entries' bytes as free entries "
            "failed (streaming zip readers may stop there; the next commit retries): " +
                e.message(),
            e.context())
        .with_context(context());
  }
}

// ---- Writer ----------------------------------------------------------------

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Writer::~Writer() = default;
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;

Writer Writer::open(const std::filesystem::path& path, WriterOptions options) {
  // An empty path would be staged and written before its rename failed.
  if (path.empty())
    throw Error(ErrorCode::invalid_argument, "the archive path is empty: name the archive file");
  auto impl = std::make_unique<Impl>();
  impl->shown = path;
  impl->options = std::move(options);
  if (remote::can_upload(path.native())) {
    impl->s3 = true;
    impl->path = path;
    impl->refresh_s3();
    return Writer(std::move(impl));
  }
  remote::refuse_write(path.native());
  try {
    impl->path = io::resolve_archive_path(path);
    io::remove_stale_temp_files(impl->path);
    impl->refresh();
  } catch (const Error& e) {
    throw impl->as_shown(e);
  }
  return Writer(std::move(impl));
}

namespace {

// The state of a Writer that was not moved from; Error(invalid_argument)
// for one that was (moving leaves no archive behind).
Writer::Impl& live(const std::unique_ptr<Writer::Impl>& impl) {
  if (!impl)
    throw Error(ErrorCode::invalid_argument,
                "this Writer was moved from: it has no archive (use the Writer it was moved to, "
                "or Writer::open)");
  return *impl;
}

}  // namespace

void Writer::add_tag(std::string tag, NewTag contents) {
  format::check_tag(tag);
  Impl& impl = live(impl_);
  for (const auto& t : impl.staged_tags())
    if (format::same_tag(t, tag)) {
      ErrorContext context{.archive = impl.shown.string(), .tag = tag};
      // A tag in the list after an add of this name is that add's: a
      // removal or keep_last in between would have dropped the older one.
      const bool staged_here = std::any_of(impl.ops.begin(), impl.ops.end(), [&](const auto& op) {
        const auto* add = std::get_if<AddOp>(&op);
        return add && format::same_tag(add->tag, tag);
      });
      throw staged_here ? format::tag_staged(t, std::move(context))
                        : format::tag_exists(t, std::move(context));
    }
  impl.ops.emplace_back(AddOp{std::move(tag), std::move(contents)});
}

void Writer::replace_tag(std::string tag, NewTag contents) {
  format::check_tag(tag);
  live(impl_).ops.emplace_back(AddOp{std::move(tag), std::move(contents), true});
}

void Writer::keep_last(std::size_t n) {
  Impl& impl = live(impl_);
  format::check_keep_last(n, ErrorContext{.archive = impl.shown.string()});
  impl.ops.emplace_back(KeepLastOp{n});
}

void Writer::remove_tag(std::string_view tag) {
  Impl& impl = live(impl_);
  auto tags = impl.staged_tags();
  auto it = std::find_if(tags.begin(), tags.end(),
                         [&](const std::string& t) { return format::same_tag(t, tag); });
  if (it == tags.end())
    throw Error(ErrorCode::not_found, "no such tag to remove" + detail::did_you_mean(tag, tags),
                ErrorContext{.archive = impl.shown.string(), .tag = std::string(tag)});
  impl.ops.emplace_back(RemoveOp{*it});
}

void Writer::update_metadata(std::function<void(Metadata&)> edit) {
  live(impl_).metadata_edits.push_back(std::move(edit));
}

void Writer::collect_garbage() {
  live(impl_).ops.emplace_back(GcOp{});
}

void Writer::discard() {
  Impl& impl = live(impl_);
  impl.ops.clear();
  impl.metadata_edits.clear();
}

std::vector<std::string> Writer::tags() const {
  return live(impl_).staged_tags();
}

void Writer::commit() {
  Impl& impl = live(impl_);
  try {
    impl.commit();
  } catch (const Error& e) {
    // A cancelled commit that adds one tag names it (the progress
    // callback's "save cancelled" knows only the archive).
    if (e.code() == ErrorCode::cancelled)
      throw impl.as_shown(e.with_context({.tag = impl.added_tag()}));
    throw impl.as_shown(e);
  }
}

const Writer::Stats& Writer::last_stats() const& noexcept {
  static const Stats none;
  return impl_ ? impl_->last_stats : none;
}
Writer::Stats Writer::last_stats() const&& noexcept {
  return impl_ ? impl_->last_stats : Stats{};
}
// 0.1.0's unqualified form (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip6Writer10last_statsEv, _ZNKR8modelzip6Writer10last_statsEv);

}  // namespace modelzip
