#include "dist/commit_target.hpp"

#include "checkpoint/archive_state.hpp"
#include "core/crc32.hpp"
#include "dist/rank_locks.hpp"
#include "format/archive_metadata.hpp"
#include "format/tags_file.hpp"
#include "io/durable_file.hpp"
#include "io/file_sink.hpp"
#include "io/posix_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "zip/append_session.hpp"
#include "zip/archive_layout.hpp"
#include "zip/entry_writer.hpp"
#include "zip/free_range.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip::dist {

struct CommitTarget::Impl {
  std::filesystem::path path;
  bool durable = true;
  std::chrono::milliseconds writers_timeout{kWritersTimeout};
  std::optional<io::FileLock> lock;
  // Existing archive: the append session (its destructor rolls back unless
  // it committed).
  std::optional<zip::AppendSession> append;
  // New archive: the temporary file and its modelzip.toml entry.
  std::optional<io::TempFile> temp;
  std::optional<io::AppendFile> temp_out;
  zip::EntryInfo metadata_entry;
  // Existing archive: the old entries the new directory lists (unset: all).
  std::optional<std::set<const zip::EntryInfo*>> kept;

  ErrorContext context() const { return ErrorContext{.archive = path.string()}; }

  // After the commit point: formats the bytes before the old tail
  // `tail_start` that no kept entry covers as free entries (as Writer's
  // in-place commit does).
  void free_dropped(const Archive& old, std::uint64_t tail_start) {
    std::vector<zip::ByteRange> covered;
    covered.reserve(kept->size());
    for (const zip::EntryInfo* e : *kept) covered.push_back(zip::entry_extent(*e));
    const std::vector<zip::ByteRange> gaps = zip::gaps_between(std::move(covered), tail_start);
    if (gaps.empty()) return;
    const int fd = lock->archive_fd();
    // The gaps lie before the old tail, which the commit did not change:
    // the old archive's mapping shows their bytes.
    const std::uint64_t written = zip::format_free_ranges(
        fd, path.string(), checkpoint::ArchiveState(old).reader().file().span(), gaps);
    if (written > 0 && durable && io::sys::fsync(fd) != 0) io::throw_errno(path, "fsync failed");
  }
};

CommitTarget::CommitTarget(std::filesystem::path path, bool durable,
                           const std::function<void(const std::string&)>& on_notice,
                           std::chrono::milliseconds writers_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->writers_timeout = writers_timeout;
  // A symbolic link is followed once, as Writer::open does: the lock, the
  // journal and the temporary file belong beside the file it leads to.
  impl_->path = io::resolve_archive_path(path);
  impl_->durable = durable;
  // The ranks' entries start where the archive's tail starts (FORMAT.md
  // section 8.1), which needs the append layout. An archive not in it (of
  // modelzip 0.1.0, or with trailing bytes) is rewritten into it first, by
  // a single-writer commit that keeps everything (it takes the lock
  // itself, so before ours).
  for (;;) {
    if (std::filesystem::exists(impl_->path)) {
      Archive current = Archive::open(impl_->path);
      const checkpoint::ArchiveState in(current);
      if (!zip::appendable_in_place(in.directory(), in.reader().file().span(),
                                    format::kTagsEntry)) {
        Writer w = Writer::open(impl_->path, WriterOptions{.durable = durable});
        w.update_metadata([](Metadata&) {});  // a change that keeps everything
        w.commit();
      }
    }
    impl_->lock.emplace(impl_->path);
    try {
      if (auto rolled_back = zip::recover_append(impl_->path, true); rolled_back && on_notice)
        on_notice(zip::rollback_notice(*rolled_back));
    } catch (const Error& e) {
      throw e.with_context(impl_->context());
    }
    io::remove_stale_temp_files(impl_->path);
    if (!std::filesystem::exists(impl_->path)) break;
    old_.emplace(Archive::open(impl_->path));
    const checkpoint::ArchiveState in(*old_);
    if (zip::appendable_in_place(in.directory(), in.reader().file().span(), format::kTagsEntry)) {
      allow_rank_locks(impl_->lock->archive_fd(), impl_->path);
      break;
    }
    old_.reset();  // another writer changed it in between: again
    impl_->lock.reset();
  }
}

CommitTarget::~CommitTarget() {
  abort();
}

CommitTarget::Start CommitTarget::begin(const std::string& tag,
                                        const std::set<const zip::EntryInfo*>* kept) {
  Impl& m = *impl_;
  try {
    if (old_) {
      const checkpoint::ArchiveState in(*old_);
      zip::AppendSession::Options options{.durable = m.durable, .tags = {tag}};
      if (kept) {
        m.kept = *kept;
        options.keep_entry = [&m](const zip::EntryInfo& e) { return m.kept->count(&e) > 0; };
      }
      m.append.emplace(m.path, in.directory(), in.reader().file(), std::string(format::kTagsEntry),
                       std::move(options));
      return Start{m.path.string(), m.append->start_offset(), m.append->nonce()};
    }
    m.temp.emplace(io::TempFile::beside(m.path));
    {
      io::OutputFile create(*m.temp);
      create.close();
    }
    m.temp_out.emplace(m.temp->path());
    Metadata metadata;
    metadata.writer = "modelzip " MODELZIP_VERSION;
    const std::string toml = format::write_metadata(metadata);
    const auto data = std::as_bytes(std::span(toml));
    io::FileSink sink(m.temp_out->fd(), ErrorContext{.archive = m.path.string()}, false);
    m.metadata_entry = zip::write_entry(
        sink, zip::plan_stored(std::string(format::kMetadataEntry), 0, data.size()),
        detail::crc32_of(data), data);
    sink.finish();
    return Start{m.temp->path().string(), m.metadata_entry.data_offset + data.size()};
  } catch (const Error& e) {
    abort();
    throw e.with_context(m.context());
  }
}

void CommitTarget::protect(std::uint64_t end) {
  if (!impl_->append) return;
  try {
    impl_->append->protect(end);
  } catch (const Error& e) {
    throw e.with_context(impl_->context());
  }
}

void CommitTarget::finish(const std::vector<zip::EntryInfo>& written,
                          const std::vector<std::string>& tags, std::uint64_t end_of_data,
                          bool* visible) {
  Impl& m = *impl_;
  const std::vector<Bytes> tags_txt = {Bytes::copy_of(format::write_tags_file(tags))};
  try {
    if (old_) {
      zip::StreamZipWriter& zw = m.append->writer();  // lists the old entries but tags.txt
      for (const auto& e : written) zw.keep(e);
      zw.skip_to(end_of_data);
      const std::uint64_t tail_start = m.append->start_offset();
      try {
        m.append->commit(tags_txt);  // removing the journal is the commit point
      } catch (...) {
        *visible = m.append->committed();
        throw;
      }
      *visible = true;
      m.append.reset();
      if (m.kept) m.free_dropped(*old_, tail_start);
      return;
    }
    io::AppendFile& out = *m.temp_out;
    zip::StreamZipWriter zw(out.fd(), m.path.string(), end_of_data);
    zw.keep(m.metadata_entry);
    for (const auto& e : written) zw.keep(e);
    zw.add_stored(std::string(format::kTagsEntry), tags_txt);
    zw.finish([&] {
      if (m.durable) out.sync();
    });
    m.temp_out->close();
    m.temp_out.reset();
    m.temp->commit(m.durable);
    *visible = true;
  } catch (const Error& e) {
    if (!old_ && m.temp) *visible = m.temp->committed();
    if (!*visible) abort();
    throw e.with_context(m.context());
  }
}

void CommitTarget::abort() noexcept {
  Impl& m = *impl_;
  // A rank may still be writing (its engine failed it later than ours, or
  // it never heard of the failure): restoring the tail and cutting the file
  // now would let its writes land after the rollback.
  if (m.append && !m.append->committed() &&
      !wait_for_writers(m.lock->archive_fd(), m.writers_timeout))
    m.append->abandon();
  m.append.reset();  // rolls the tail back (or leaves the journal for recovery)
  m.temp_out.reset();
  m.temp.reset();  // removes the temporary file unless it was committed
}

}  // namespace modelzip::dist
