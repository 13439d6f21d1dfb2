#include "dist/s3_commit.hpp"

#include <algorithm>
#include <optional>

#include "checkpoint/archive_state.hpp"
#include "checkpoint/s3_old_archive.hpp"
#include "core/checked.hpp"
#include "core/crc32.hpp"
#include "dist/rank_share.hpp"
#include "format/archive_metadata.hpp"
#include "format/tags_file.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "remote/remote_source.hpp"
#include "remote/upload_config.hpp"
#include "zip/archive_layout.hpp"
#include "zip/entry_writer.hpp"
#include "zip/free_range.hpp"
#include "zip/zip_stream_writer.hpp"

#if MODELZIP_CAN_UPLOAD
#include "remote/s3_multipart.hpp"
#include "remote/s3_upload_sink.hpp"
#include "remote/settings.hpp"
#include "remote/stale_uploads.hpp"
#endif

namespace modelzip::dist {

namespace {

using Range = std::pair<std::uint64_t, std::uint64_t>;  // [first, second)

// A sink that takes nothing and remembers where bytes were given or
// reserved (the survey's dry run; null: it only discards).
class RecordingSink final : public io::ByteSink {
 public:
  explicit RecordingSink(std::vector<Range>* ranges) : ranges_(ranges) {}
  void write(std::uint64_t offset, const Bytes& data) override { add(offset, data.size()); }
  void write_copy(std::uint64_t offset, std::span<const std::byte> data) override {
    add(offset, data.size());
  }
  void keep(std::uint64_t, io::ByteRange) override {
    throw Error(ErrorCode::invalid_argument, "a rank's share keeps no old bytes");
  }
  using io::ByteSink::keep;
  void reserve(io::ByteRange range) override { add(range.offset, range.length); }
  void barrier() override {}
  void set_end(std::uint64_t) override {}
  void finish() override {}
  void commit() override {}

 private:
  void add(std::uint64_t offset, std::uint64_t length) {
    if (ranges_ && length > 0) ranges_->emplace_back(offset, offset + length);
  }
  std::vector<Range>* ranges_;
};

// Sorted, touching ranges joined.
std::vector<Range> merged(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> out;
  for (const Range& r : ranges)
    if (!out.empty() && r.first <= out.back().second)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  return out;
}

constexpr std::uint64_t kMinPart = std::uint64_t{5} << 20;  // S3's part minimum

// A rank's bytes onto the layout: its runs into `inner` (the shared
// upload's sink), the rest kept for the root (or, with `all`, everything
// into `inner`). Reservations are dropped: every byte is written (the
// local headers with their CRCs known).
class RoutedSink final : public io::ByteSink {
 public:
  RoutedSink(io::ByteSink* inner, std::vector<Range> own, bool all)
      : inner_(inner), own_(std::move(own)), all_(all) {}
  void write(std::uint64_t offset, const Bytes& data) override {
    if (all_) {
      inner_->write(offset, data);
      return;
    }
    std::uint64_t at = 0;
    while (at < data.size()) {
      const std::uint64_t o = offset + at;
      // The first own run that ends after o.
      auto it = std::upper_bound(own_.begin(), own_.end(), o,
                                 [](std::uint64_t v, const Range& r) { return v < r.second; });
      std::uint64_t n = data.size() - at;
      if (it != own_.end() && it->first <= o) {
        n = std::min(n, it->second - o);
        inner_->write(o, data.slice(at, n));
      } else {
        if (it != own_.end()) n = std::min(n, it->first - o);
        const auto* p = reinterpret_cast<const char*>(data.data() + at);
        if (!for_root_.empty() && for_root_.back().first + for_root_.back().second.size() == o)
          for_root_.back().second.append(p, n);
        else
          for_root_.emplace_back(o, std::string(p, n));
      }
      at += n;
    }
  }
  void keep(std::uint64_t, io::ByteRange) override {
    throw Error(ErrorCode::invalid_argument, "a rank's share keeps no old bytes");
  }
  using io::ByteSink::keep;
  void reserve(io::ByteRange) override {}
  void barrier() override {}
  void set_end(std::uint64_t) override {}
  void finish() override {}
  void commit() override {}
  const std::vector<std::pair<std::uint64_t, std::string>>& for_root() const { return for_root_; }

 private:
  io::ByteSink* inner_;
  std::vector<Range> own_;
  bool all_;
  std::vector<std::pair<std::uint64_t, std::string>> for_root_;
};

}  // namespace

std::string encode_layout(const S3Layout& layout) {
  WireOut w;
  w.u64(layout.part_size);
  w.u64(layout.crcs.size());
  for (auto c : layout.crcs) w.u64(c);
  w.u64(layout.runs.size());
  for (const S3Run& r : layout.runs) {
    w.u64(r.offset);
    w.u64(r.length);
    w.u64(static_cast<std::uint64_t>(r.rank));
    w.u64(static_cast<std::uint64_t>(r.first_part));
  }
  return w.s;
}

S3Layout decode_layout(const std::string& bytes, int root) {
  WireIn in(bytes, root);
  S3Layout out;
  out.part_size = in.u64();
  const std::uint64_t n = in.u64();
  for (std::uint64_t i = 0; i < n; ++i) out.crcs.push_back(static_cast<std::uint32_t>(in.u64()));
  const std::uint64_t runs = in.u64();
  for (std::uint64_t i = 0; i < runs; ++i) {
    S3Run r;
    r.offset = in.u64();
    r.length = in.u64();
    r.rank = static_cast<int>(in.u64());
    r.first_part = static_cast<int>(in.u64());
    out.runs.push_back(r);
  }
  return out;
}

std::string s3_survey(const Plan& plan, const std::vector<Item>& items, int rank) {
  std::vector<Range> ranges;
  RecordingSink recorder(&ranges);
  const RankShare share = write_rank_share(plan, items, rank, recorder);
  WireOut w;
  w.str(encode_share(share, plan));
  std::vector<Range> runs;
  for (const Range& r : merged(std::move(ranges)))
    if (r.second - r.first >= kMinPart) runs.push_back(r);
  w.u64(runs.size());
  for (const Range& r : runs) {
    w.u64(r.first);
    w.u64(r.second);
  }
  return w.s;
}

std::vector<zip::EntryInfo> s3_entry_infos(const Plan& plan, const S3Layout& layout) {
  RecordingSink discard(nullptr);
  std::vector<zip::EntryInfo> out;
  for (std::size_t i = 0; i < plan.entries.size(); ++i)
    out.push_back(zip::finish_entry(discard, plan.entries[i].zip_plan(), layout.crcs.at(i)));
  return out;
}

#if MODELZIP_CAN_UPLOAD

namespace {

std::shared_ptr<const remote::S3Multipart> client_of(const std::string& url) {
  return std::make_shared<remote::S3Multipart>(url, RemoteOptions{});
}

// Writes the local headers of the entries `rank` writes the blob header of
// (their CRCs known from the layout).
void write_local_headers(const Plan& plan, const S3Layout& layout, int rank, io::ByteSink& sink) {
  if (layout.crcs.size() != plan.entries.size())
    throw Error(ErrorCode::invalid_argument, "the S3 layout does not fit the plan");
  for (std::size_t i = 0; i < plan.entries.size(); ++i)
    if (plan.entries[i].header_rank == rank)
      zip::finish_entry(sink, plan.entries[i].zip_plan(), layout.crcs[i]);
}

}  // namespace

S3RankResult s3_upload_share(const std::string& url, const Plan& plan, const S3Layout& layout,
                             const std::vector<Item>& items, int rank, io::ByteSink* root_sink) {
  std::vector<Range> own;
  for (const S3Run& r : layout.runs)
    if (r.rank == rank) own.emplace_back(r.offset, r.offset + r.length);
  std::optional<remote::S3UploadSink> upload;
  io::ByteSink* inner = root_sink;
  if (!root_sink && !own.empty()) {
    remote::S3UploadOptions o;
    o.part_size = layout.part_size;
    o.join_upload = plan.file;
    upload.emplace(client_of(url), std::move(o));
    std::uint64_t at = 0;
    for (const S3Run& r : layout.runs) {
      if (r.rank != rank) continue;
      upload->skip(io::ByteRange{at, r.offset - at}, r.first_part);
      at = r.offset + r.length;
    }
    upload->set_end(at);
    inner = &*upload;
  }
  RoutedSink routed(inner, own, root_sink != nullptr);
  write_local_headers(plan, layout, rank, routed);
  write_rank_share(plan, items, rank, routed);
  S3RankResult out;
  WireOut w;
  std::vector<remote::S3Part> parts;
  if (upload) {
    upload->finish();
    parts = upload->parts();
    out.uploaded = upload->uploaded_bytes();
  }
  w.u64(out.uploaded);
  w.u64(parts.size());
  for (const auto& p : parts) {
    w.u64(static_cast<std::uint64_t>(p.number));
    w.str(p.etag);
    w.str(p.checksum_crc32);
  }
  w.u64(routed.for_root().size());
  for (const auto& [offset, bytes] : routed.for_root()) {
    w.u64(offset);
    w.str(bytes);
  }
  out.message = std::move(w.s);
  return out;
}

struct S3CommitTarget::Impl {
  std::string url;
  std::optional<checkpoint::S3OldArchive> old;
  std::optional<Archive> old_archive;
  std::uint64_t start = 0;  // where the new entries begin
  std::optional<remote::S3UploadSink> sink;
  zip::EntryInfo metadata_entry;  // new archive
  std::uint64_t uploaded_by_others = 0;
  std::uint64_t part_size = 0;  // the root's sink's, and every rank's
  // A rotation: the old entries the new directory lists (unset: all).
  std::optional<std::set<const zip::EntryInfo*>> kept;
  std::uint64_t size = 0;  // the new object's, after finish()

  ErrorContext context() const { return ErrorContext{.archive = url}; }
};

namespace {

// Whether the root copies `e` server-side: a stored blob of the old object
// that a rotation moves, its bytes as they are there, of at least 10 MiB
// (the bytes that fill the part before it to S3's 5 MiB go up with it, and
// a rest under 5 MiB would too: a smaller one is uploaded from `content`).
bool copies_moved(const S3CommitTarget::Impl& m, const RootEntry& e) {
  return e.from && m.old && e.from->stored() && e.from->compressed_size == e.entry.size &&
         e.entry.size >= 2 * kMinPart;
}

}  // namespace

S3CommitTarget::S3CommitTarget(std::string url) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.url = std::move(url);
  // The ranks' entries start where the old object's tail starts (FORMAT.md
  // section 8.1): an archive not in that layout is uploaded once in it by
  // a single writer's commit that keeps everything, and opened again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    m.old = checkpoint::open_s3_old(m.url);
    if (!m.old) return;
    m.old_archive.emplace(m.old->as_archive());
    const checkpoint::ArchiveState in(*m.old_archive);
    if (zip::appendable_in_place(in.directory(), m.old->opened.file.span(), format::kTagsEntry))
      return;
    m.old_archive.reset();
    m.old.reset();
    if (attempt == 0) {
      Writer w = Writer::open(m.url);
      w.update_metadata([](Metadata&) {});  // a change that keeps everything
      w.commit();
    }
  }
  throw Error(ErrorCode::io, "the archive changed on the server while it was being prepared",
              m.context());
}

S3CommitTarget::~S3CommitTarget() = default;  // the sink aborts an upload it did not complete

const Archive* S3CommitTarget::old() const noexcept {
  return impl_->old_archive ? &*impl_->old_archive : nullptr;
}

io::ByteSink& S3CommitTarget::sink() {
  return *impl_->sink;
}

CommitTarget::Start S3CommitTarget::begin(const std::string&,
                                          const std::set<const zip::EntryInfo*>* kept) {
  Impl& m = *impl_;
  if (kept && m.old) m.kept = *kept;
  try {
    auto client = client_of(m.url);
    remote::S3UploadOptions o;
    if (auto size = remote::env_size("MODELZIP_S3_PART_SIZE", m.url)) o.part_size = *size;
    if (m.old) {
      o.condition.if_match = m.old->opened.etag;
      o.old_key = client->endpoint().key;
      o.old_etag = m.old->opened.etag;
      o.old_file = m.old->opened.file;
      o.old_source = m.old->opened.source;
    } else {
      o.condition.if_none_match = true;
    }
    o.abort_stale_after = remote::stale_upload_age(m.url);
    m.part_size = o.part_size;
    m.sink.emplace(std::move(client), std::move(o));
    if (m.old) {
      m.start =
          zip::tail_start(checkpoint::ArchiveState(*m.old_archive).directory(), format::kTagsEntry);
    } else {
      Metadata metadata;
      metadata.writer = "modelzip " MODELZIP_VERSION;
      const std::string toml = format::write_metadata(metadata);
      const auto data = std::as_bytes(std::span(toml));
      m.metadata_entry = zip::write_entry(
          *m.sink, zip::plan_stored(std::string(format::kMetadataEntry), 0, data.size()),
          detail::crc32_of(data), data);
      m.start = m.metadata_entry.data_offset + data.size();
    }
    return CommitTarget::Start{m.sink->upload_id(), m.start, 0};
  } catch (const Error& e) {
    m.sink.reset();
    throw e.with_context(m.context());
  }
}

S3Layout S3CommitTarget::lay_out(const std::vector<std::string>& surveys, const Plan& plan,
                                 std::uint64_t end, int root, const ErrorContext& context,
                                 const std::vector<RootEntry>& root_entries) {
  Impl& m = *impl_;
  // Moved blobs copied by write_root_entry: each splits the root's first
  // range as a free entry's header does (they lie before every rank's
  // bytes, right after the root's tables).
  std::size_t moved_copies = 0;
  for (const RootEntry& e : root_entries) moved_copies += copies_moved(m, e);
  std::vector<std::string> shares;
  std::vector<S3Run> runs;
  for (std::size_t r = 0; r < surveys.size(); ++r) {
    WireIn in(surveys[r], static_cast<int>(r));
    shares.push_back(in.str());
    const std::uint64_t n = in.u64();
    for (std::uint64_t i = 0; i < n; ++i) {
      S3Run run;
      run.offset = in.u64();
      const std::uint64_t to = in.u64();
      if (to < run.offset || run.offset < m.start || to > end)
        throw Error(ErrorCode::corrupt,
                    "malformed collective message from rank " + std::to_string(r));
      run.length = to - run.offset;
      run.rank = static_cast<int>(r);
      if (run.rank != root) runs.push_back(run);
    }
  }
  S3Layout out;
  out.crcs = combine_shares(shares, plan, context).crcs;
  out.part_size = m.part_size;
  std::sort(runs.begin(), runs.end(),
            [](const S3Run& a, const S3Run& b) { return a.offset < b.offset; });

  // The root's ranges lie between the runs: each must make parts of at
  // least 5 MiB (its data after an old prefix that is copied), so a short
  // one takes the first bytes of the next run, and a run left short is
  // the root's whole.
  // The old object's prefix first (copies, and a rotation's free entries'
  // headers), before any skipped range: its parts are numbered from 1.
  std::size_t free_headers = 0;
  try {
    if (m.old && m.kept)
      free_headers = checkpoint::keep_in_place(*m.sink, *m.old, *m.kept, m.start);
    else if (m.old)
      m.sink->keep(io::ByteRange{0, m.start});
  } catch (const Error& e) {
    throw e.with_context(m.context());
  }
  // An old prefix of at least 5 MiB leaves no part under 5 MiB before the
  // root's data at m.start when it is one copied range. With free entries'
  // headers in it, its last bytes may be fetched and uploaded (where the
  // range after a header is short) and join the root's data: the part
  // holding them is then at least the root's data [m.start, first run),
  // which the widening below makes 5 MiB.
  const bool prefix_copied = m.old && m.start >= kMinPart;
  const std::uint64_t P = out.part_size;
  std::uint64_t segment = 0;  // where the root's current range begins
  int number = 1;
  // Parts the root's range [segment, to) may use: its copies and its data.
  // Each free entry's header splits the copied prefix: one more copied
  // range (at most 2 x parts in flight copies and one more where a copy
  // reaches past 5 GiB) and the data parts around the header (the header
  // and at most 10 MiB fetched after it, in parts of at least 5 MiB but
  // the one before a copy: at most 3), hence 2 x parts in flight + 4.
  auto root_parts = [&](std::uint64_t to) {
    std::uint64_t data = to - segment, parts = 1;
    if (segment == 0 && prefix_copied) {
      data = to - m.start;
      parts += std::max<std::uint64_t>((m.start + remote::kS3MaxPart - 1) / remote::kS3MaxPart,
                                       2 * remote::kDefaultParallelParts) +
               1;
    }
    if (segment == 0)
      parts += (free_headers + moved_copies) *
               (2 * static_cast<std::uint64_t>(remote::kDefaultParallelParts) + 4);
    return parts + (data > 0 ? remote::shared_part_count(data, P) : 0);
  };
  std::vector<std::pair<io::ByteRange, int>> skips;  // the others' ranges, next root number
  for (S3Run run : runs) {
    if (run.offset < segment)
      throw Error(ErrorCode::corrupt,
                  "the ranks' runs overlap at offset " + std::to_string(run.offset));
    const std::uint64_t data_from = segment == 0 && prefix_copied ? m.start : segment;
    const std::uint64_t data = run.offset > data_from ? run.offset - data_from : 0;
    if (data > 0 && data < kMinPart) {
      const std::uint64_t widen = kMinPart - data;
      if (run.length < widen + kMinPart) continue;  // the root's whole
      run.offset += widen;
      run.length -= widen;
    }
    if (run.offset > segment || skips.empty() ||
        skips.back().first.offset + skips.back().first.length != run.offset) {
      // After the root's range [segment, run.offset).
      number +=
          static_cast<int>(std::min<std::uint64_t>(root_parts(run.offset), remote::kS3MaxParts));
      skips.push_back({io::ByteRange{run.offset, 0}, 0});
    }
    run.first_part = number;
    number += static_cast<int>(remote::shared_part_count(run.length, P));
    if (number > remote::kS3MaxParts)
      throw Error(ErrorCode::limit_exceeded,
                  "more than 10000 parts of " + std::to_string(P) +
                      " bytes: set a larger MODELZIP_S3_PART_SIZE for an archive this large",
                  context);
    skips.back().first.length = run.offset + run.length - skips.back().first.offset;
    skips.back().second = number;
    segment = run.offset + run.length;
    out.runs.push_back(run);
  }
  if (number > remote::kS3MaxParts - 1)
    throw Error(ErrorCode::limit_exceeded,
                "more than 10000 parts: set a larger MODELZIP_S3_PART_SIZE for an archive this "
                "large",
                context);
  try {
    for (const auto& [range, next] : skips) m.sink->skip(range, next);
  } catch (const Error& e) {
    throw e.with_context(m.context());
  }
  return out;
}

zip::EntryInfo S3CommitTarget::write_root_entry(const RootEntry& entry) {
  Impl& m = *impl_;
  const zip::EntryPlan plan = entry.entry.zip_plan();
  const auto bytes = entry.content.span();
  const std::uint32_t crc = entry.crc ? *entry.crc : detail::crc32_of(bytes);
  try {
    if (!copies_moved(m, entry)) {
      // A moved blob's bytes (viewed unread, RootEntry::from) are fetched
      // only when uploaded.
      if (entry.from && m.old && entry.from->stored())
        m.old->opened.source->ensure(entry.from->data_offset, entry.from->compressed_size);
      return zip::write_entry(*m.sink, plan, crc, bytes);
    }
    zip::EntryInfo info = zip::finish_entry(*m.sink, plan, crc);
    m.sink->keep(plan.data_offset, io::ByteRange{entry.from->data_offset, plan.compressed});
    return info;
  } catch (const Error& e) {
    throw e.with_context(m.context());
  }
}

std::uint64_t S3CommitTarget::take_results(const std::vector<std::string>& results, int root) {
  Impl& m = *impl_;
  std::uint64_t uploaded = 0;
  for (std::size_t r = 0; r < results.size(); ++r) {
    if (static_cast<int>(r) == root) continue;
    WireIn in(results[r], static_cast<int>(r));
    uploaded += in.u64();
    std::vector<remote::S3Part> parts(in.u64());
    for (auto& p : parts) {
      p.number = static_cast<int>(in.u64());
      p.etag = in.str();
      p.checksum_crc32 = in.str();
    }
    m.sink->add_parts(parts);
    for (std::uint64_t n = in.u64(); n > 0; --n) {
      const std::uint64_t offset = in.u64();
      m.sink->write(offset, Bytes::copy_of(in.str()));
    }
  }
  m.uploaded_by_others = uploaded;
  return uploaded;
}

void S3CommitTarget::finish(const std::vector<zip::EntryInfo>& written,
                            const std::vector<std::string>& tags, std::uint64_t end_of_data,
                            bool* visible) {
  Impl& m = *impl_;
  const std::vector<Bytes> tags_txt = {Bytes::copy_of(format::write_tags_file(tags))};
  try {
    zip::StreamZipWriter zw(*m.sink, m.url, end_of_data);
    if (m.old) {
      const checkpoint::ArchiveState in(*m.old_archive);
      const zip::Directory& directory = in.directory();
      zw.set_comment(directory.comment);
      for (const auto& e : directory.entries)
        if (e.name != format::kTagsEntry && (!m.kept || m.kept->count(&e) > 0)) zw.keep(e);
    } else {
      zw.keep(m.metadata_entry);
    }
    for (const auto& e : written) zw.keep(e);
    zw.add_stored(std::string(format::kTagsEntry), tags_txt);
    m.size = zw.finish();
    m.sink->commit();
    *visible = true;
  } catch (const Error& e) {
    throw e.with_context(m.context());
  }
}

bool S3CommitTarget::mostly_free() const noexcept {
  const Impl& m = *impl_;
  if (!m.kept || m.size == 0) return false;
  // The new entries and the tail cover [m.start, m.size) without a gap
  // (dist/commit_plan.hpp places them one after another): the unused bytes
  // are those of the prefix that no kept entry covers (zip::unused_bytes
  // of the new object).
  std::uint64_t covered = 0;
  for (const zip::EntryInfo* e : *m.kept) covered += zip::entry_extent(*e).size;
  const std::uint64_t unused = m.start > covered ? m.start - covered : 0;
  return unused > m.size - unused;
}

std::uint64_t S3CommitTarget::uploaded() const {
  return impl_->sink ? impl_->sink->uploaded_bytes() + impl_->uploaded_by_others : 0;
}

std::uint64_t S3CommitTarget::uploaded_by_others() const {
  return impl_->uploaded_by_others;
}

#else  // built without libcurl: CollectiveWriter refuses s3:// URLs first

S3RankResult s3_upload_share(const std::string& url, const Plan&, const S3Layout&,
                             const std::vector<Item>&, int, io::ByteSink*) {
  remote::refuse_write(url);
  return {};
}
struct S3CommitTarget::Impl {};
S3CommitTarget::S3CommitTarget(std::string url) {
  remote::refuse_write(url);
}
S3CommitTarget::~S3CommitTarget() = default;
const Archive* S3CommitTarget::old() const noexcept {
  return nullptr;
}
io::ByteSink& S3CommitTarget::sink() {
  throw Error(ErrorCode::unsupported, "no S3 upload");
}
CommitTarget::Start S3CommitTarget::begin(const std::string&,
                                          const std::set<const zip::EntryInfo*>*) {
  return {};
}
bool S3CommitTarget::mostly_free() const noexcept {
  return false;
}
S3Layout S3CommitTarget::lay_out(const std::vector<std::string>&, const Plan&, std::uint64_t, int,
                                 const ErrorContext&, const std::vector<RootEntry>&) {
  return {};
}
zip::EntryInfo S3CommitTarget::write_root_entry(const RootEntry&) {
  return {};
}
std::uint64_t S3CommitTarget::take_results(const std::vector<std::string>&, int) {
  return 0;
}
void S3CommitTarget::finish(const std::vector<zip::EntryInfo>&, const std::vector<std::string>&,
                            std::uint64_t, bool*) {}
std::uint64_t S3CommitTarget::uploaded() const {
  return 0;
}
std::uint64_t S3CommitTarget::uploaded_by_others() const {
  return 0;
}

#endif

}  // namespace modelzip::dist
