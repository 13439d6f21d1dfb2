#include "dist/commit_target.hpp"

#include <cstring>

#include "checkpoint/archive_impl.hpp"
#include "format/archive_metadata.hpp"
#include "format/tags_file.hpp"
#include "io/append_journal.hpp"
#include "io/durable_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "zip/crc32.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip::dist {

struct CommitTarget::Impl {
  std::filesystem::path path;
  bool durable = true;
  std::optional<io::FileLock> lock;
  // Existing archive: the append.
  std::uint64_t old_size = 0;
  bool journaled = false;
  std::optional<io::AppendFile> append;
  // New archive: the temporary file and its modelzip.toml entry.
  std::optional<io::TempFile> temp;
  std::optional<io::AppendFile> temp_out;
  zip::EntryInfo metadata_entry;

  ErrorContext context() const { return ErrorContext{.archive = path.string()}; }
};

CommitTarget::CommitTarget(std::filesystem::path path, bool durable)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = std::move(path);
  impl_->durable = durable;
  // An interrupted append is recovered by the single writer's own recovery
  // (a commit with nothing staged does only that); under our lock a
  // journal can only be one that appeared in between, so look again.
  for (;;) {
    if (io::read_append_journal(impl_->path)) Writer::open(impl_->path).commit();
    impl_->lock.emplace(impl_->path);
    if (!io::read_append_journal(impl_->path)) break;
    impl_->lock.reset();
  }
  io::remove_stale_temp_files(impl_->path);
  if (std::filesystem::exists(impl_->path)) old_.emplace(Archive::open(impl_->path));
}

CommitTarget::~CommitTarget() {
  abort();
}

CommitTarget::Start CommitTarget::begin() {
  Impl& m = *impl_;
  try {
    if (old_) {
      m.old_size = old_->internals().reader.file().size();
      io::write_append_journal(m.path, m.old_size);
      m.journaled = true;
      m.append.emplace(m.path);
      return Start{m.path.string(), m.old_size};
    }
    m.temp.emplace(io::TempFile::beside(m.path));
    {
      io::OutputFile create(m.temp->path());
      create.close();
    }
    m.temp_out.emplace(m.temp->path());
    Metadata metadata;
    metadata.writer = "modelzip " MODELZIP_VERSION;
    const std::string toml = format::write_metadata(metadata);
    const auto* data = reinterpret_cast<const std::byte*>(toml.data());
    zip::EntryInfo& e = m.metadata_entry;
    e.name = std::string(format::kMetadataEntry);
    e.crc32 = zip::crc32_of(std::span(data, toml.size()));
    e.compressed_size = e.uncompressed_size = toml.size();
    e.local_header_offset = 0;
    std::vector<std::byte> bytes = zip::encode_local_header(
        zip::LocalHeader{
            .name = e.name, .crc = e.crc32, .compressed = toml.size(), .uncompressed = toml.size()},
        0, true);
    e.data_offset = bytes.size();
    bytes.insert(bytes.end(), data, data + toml.size());
    if (io::sys::pwrite(m.temp_out->fd(), bytes.data(), bytes.size(), 0) !=
        static_cast<ssize_t>(bytes.size()))
      throw Error(ErrorCode::io, std::string("cannot write: ") + std::strerror(errno),
                  ErrorContext{.archive = m.temp->path().string()});
    return Start{m.temp->path().string(), bytes.size()};
  } catch (const Error& e) {
    abort();
    throw e.with_context(m.context());
  }
}

void CommitTarget::finish(const std::vector<zip::EntryInfo>& written,
                          const std::vector<std::string>& tags, std::uint64_t end_of_data,
                          bool* visible) {
  Impl& m = *impl_;
  try {
    io::AppendFile& out = old_ ? *m.append : *m.temp_out;
    const std::string shown = old_ ? m.path.string() : m.temp->path().string();
    zip::StreamZipWriter zw(out.fd(), shown, end_of_data);
    if (old_) {
      for (const auto& e : old_->internals().directory.entries)
        if (e.name != format::kTagsEntry) zw.keep(e);
      zw.set_comment(old_->internals().directory.comment);  // kept, FORMAT.md section 1
    } else {
      zw.keep(m.metadata_entry);
    }
    for (const auto& e : written) zw.keep(e);
    zw.add_stored(std::string(format::kTagsEntry), {Bytes::copy_of(format::write_tags_file(tags))});
    zw.finish([&] {
      if (m.durable) out.sync();
    });
    if (old_) {
      *visible = true;
      if (m.durable) out.sync();
      m.append->close();
      m.append.reset();
      m.journaled = false;
      io::remove_append_journal(m.path, m.durable);
    } else {
      m.temp_out->close();
      m.temp_out.reset();
      m.temp->commit(m.durable);
      *visible = true;
    }
  } catch (const Error& e) {
    if (!old_ && m.temp) *visible = m.temp->committed();
    if (!*visible) abort();
    throw e.with_context(m.context());
  }
}

void CommitTarget::abort() noexcept {
  Impl& m = *impl_;
  if (m.append) {
    if (m.append->truncate(m.old_size) && m.journaled) {
      try {
        io::remove_append_journal(m.path, m.durable);
        m.journaled = false;
      } catch (const Error&) {
      }
    }
    m.append.reset();
  } else if (m.journaled) {
    try {
      io::remove_append_journal(m.path, m.durable);
      m.journaled = false;
    } catch (const Error&) {
    }
  }
  m.temp_out.reset();
  m.temp.reset();  // removes the temporary file unless it was committed
}

}  // namespace modelzip::dist
