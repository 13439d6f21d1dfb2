// Writer's commits to s3:// archives.
#include <algorithm>

#include "checkpoint/plan_entries.hpp"
#include "checkpoint/writer_impl.hpp"
#include "format/archive_metadata.hpp"
#include "format/tags_file.hpp"
#include "remote/remote_source.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/s3_upload_sink.hpp"
#include "remote/settings.hpp"
#include "remote/stale_uploads.hpp"
#include "remote/upload_config.hpp"
#include "zip/archive_layout.hpp"
#include "zip/free_range.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip {

using checkpoint::emit_all;
using checkpoint::emit_tags;
using checkpoint::expected_bytes;
using checkpoint::Plan;

#if MODELZIP_CAN_UPLOAD
std::shared_ptr<remote::S3UploadStart> Writer::Impl::start_s3_upload() const {
  return std::make_shared<remote::S3UploadStart>(
      std::make_shared<remote::S3Multipart>(path.string(), RemoteOptions{}),
      remote::stale_upload_age(path.string()));
}

std::optional<Writer::Impl::S3Old> Writer::Impl::open_s3() const {
  try {
    return checkpoint::open_s3_old(path.string());
  } catch (const Error& e) {
    // An interrupt stopped the read: the progress callback is asked first
    // (as by the upload's fetches), so that a caller that noticed the
    // interrupt itself (Python) stops in its own terms.
    if (e.code() == ErrorCode::cancelled && options.progress) options.progress(Progress{});
    throw;
  }
}

void Writer::Impl::refresh_s3() {
  // Only the tags: what a commit needs besides them is read by open_s3().
  current_tags.clear();
  try {
    // A 404 is expected (a new archive): no request asks S3 why.
    current_tags =
        Archive::Impl::open_url(path.string(), OpenOptions{}, remote::MissingObject::expected)
            .tags();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::not_found) throw;  // else a new archive
  }
}

void Writer::Impl::upload(const Plan& plan, const Archive::Impl* old_impl,
                          const std::optional<std::set<const zip::EntryInfo*>>& kept, Stats& stats,
                          bool* visible) {
  auto client = std::make_shared<remote::S3Multipart>(path.string(), RemoteOptions{});
  remote::S3UploadOptions upload_options;
  if (auto size = remote::env_size("MODELZIP_S3_PART_SIZE", path.string()))
    upload_options.part_size = *size;
  if (auto parts = remote::env_size("MODELZIP_S3_PARTS_IN_FLIGHT", path.string()))
    upload_options.parallel = static_cast<int>(std::min<std::uint64_t>(*parts, 1000));
  if (s3_old) {
    upload_options.condition.if_match = s3_old->opened.etag;
    upload_options.old_key = client->endpoint().key;
    upload_options.old_etag = s3_old->opened.etag;
    upload_options.old_file = s3_old->opened.file;
    upload_options.old_source = s3_old->opened.source;
  } else {
    upload_options.condition.if_none_match = true;
  }
  upload_options.started = std::move(s3_start);
  // Before server-side copies start and while the commit waits for parts
  // in flight, the progress callback is asked again with what it saw last,
  // or with {0, 0} before any report (it may cancel, e.g. on Ctrl-C in
  // Python, which only a callback notices).
  ProgressCallback progress = options.progress;
  if (progress) {
    auto last = std::make_shared<std::optional<Progress>>();
    progress = [inner = options.progress, last](const Progress& p) {
      *last = p;
      return inner(p);
    };
    upload_options.keep_going = [inner = options.progress, last] {
      return inner(last->value_or(Progress{}));
    };
  }
  remote::S3UploadSink sink(std::move(client), std::move(upload_options));
  if (old_impl && kept && !mostly_free(*kept, plan, *old_impl)) {
    // In place, as append_to does locally: the old entries the plan keeps
    // stay where they are, copied server-side with everything before the
    // old tail; removed entries' ranges become free entries (their new
    // local header uploaded, their bytes copied as the free entry's data);
    // the new entries and the new tail are uploaded after them.
    const zip::Directory& directory = old_impl->directory;
    const std::uint64_t tail = zip::tail_start(directory, format::kTagsEntry);
    checkpoint::keep_in_place(sink, *s3_old, *kept, tail);
    zip::StreamZipWriter zw(sink, path.string(), tail, expected_bytes(plan, true), progress);
    zw.set_comment(directory.comment);
    for (const auto& e : directory.entries)
      if (kept->count(&e)) zw.keep(e);
    emit_tags(zw, plan, old_impl, true, true);
    std::vector<std::string> names;
    for (const auto& t : plan.tags) names.push_back(t.name);
    zw.add_stored(std::string(format::kTagsEntry),
                  {Bytes::copy_of(format::write_tags_file(names))});
    zw.finish();
    stats.appended = true;
    for (const auto& e : directory.entries)
      if (!kept->count(&e) && e.name != format::kTagsEntry)
        stats.bytes_freed += zip::entry_extent(e).size;
  } else {
    // A rewrite: old entries the plan keeps are copied server-side where
    // they keep their local header (moved by a multiple of 64 bytes), else
    // their data is.
    zip::StreamZipWriter zw(sink, path.string(), 0, expected_bytes(plan, false), progress);
    emit_all(zw, plan, old_impl, old_impl != nullptr);
    zw.finish();
  }
  stats.bytes_written = sink.uploaded_bytes();
  check_cancel();  // the last point where an interrupt aborts the upload
  sink.commit();
  *visible = true;
}
#else
// Built without libcurl: Writer::open refuses s3:// URLs (remote::can_upload).
std::shared_ptr<remote::S3UploadStart> Writer::Impl::start_s3_upload() const {
  remote::refuse_write(path.native());
  return nullptr;
}
std::optional<Writer::Impl::S3Old> Writer::Impl::open_s3() const {
  remote::refuse_write(path.native());
  return std::nullopt;
}
void Writer::Impl::refresh_s3() {
  remote::refuse_write(path.native());
}
void Writer::Impl::upload(const Plan&, const Archive::Impl*,
                          const std::optional<std::set<const zip::EntryInfo*>>&, Stats&, bool*) {
  remote::refuse_write(path.native());
}
#endif

}  // namespace modelzip
