#include "zip/zip_writer.hpp"

#include <zip.h>

#include <cstring>

#include "core/checked.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/error.hpp"
#include "zip/zip_reader.hpp"

namespace modelzip::zip {
namespace {

// A libzip source that serves the concatenation of several Bytes.
struct PiecesSource {
  std::vector<Bytes> pieces;
  std::uint64_t size = 0;
  std::uint64_t position = 0;
  zip_error_t error;

  zip_int64_t read(void* out, std::uint64_t length) {
    std::uint64_t done = 0;
    std::uint64_t start = 0;
    for (const Bytes& p : pieces) {
      std::uint64_t end = start + p.size();
      if (position < end && done < length) {
        std::uint64_t from = position - start;
        std::uint64_t n = std::min<std::uint64_t>(p.size() - from, length - done);
        std::memcpy(static_cast<std::byte*>(out) + done, p.data() + from, n);
        done += n;
        position += n;
      }
      start = end;
      if (done == length) break;
    }
    return static_cast<zip_int64_t>(done);
  }

  static zip_int64_t callback(void* state, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
    auto* s = static_cast<PiecesSource*>(state);
    switch (cmd) {
      case ZIP_SOURCE_OPEN:
        s->position = 0;
        return 0;
      case ZIP_SOURCE_READ:
        return s->read(data, len);
      case ZIP_SOURCE_CLOSE:
        return 0;
      case ZIP_SOURCE_STAT: {
        auto* st = static_cast<zip_stat_t*>(data);
        zip_stat_init(st);
        st->size = s->size;
        st->mtime = static_cast<time_t>(kEntryMtime);
        st->valid = ZIP_STAT_SIZE | ZIP_STAT_MTIME;
        return sizeof(zip_stat_t);
      }
      case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&s->error, data, len);
      case ZIP_SOURCE_FREE:
        zip_error_fini(&s->error);
        delete s;
        return 0;
      case ZIP_SOURCE_SEEK: {
        zip_int64_t to = zip_source_seek_compute_offset(s->position, s->size, data, len, &s->error);
        if (to < 0) return -1;
        s->position = static_cast<std::uint64_t>(to);
        return 0;
      }
      case ZIP_SOURCE_TELL:
        return static_cast<zip_int64_t>(s->position);
      case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(
            ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR,
            ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL, ZIP_SOURCE_SUPPORTS, -1);
      default:
        zip_error_set(&s->error, ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
  }
};

std::uint64_t total_size(const std::vector<Bytes>& pieces) {
  std::uint64_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

// Length of the padding extra field (header included) that moves data from
// `unpadded` to a multiple of kDataAlignment: 0, or 4..67.
std::uint16_t padding_length(std::uint64_t unpadded) {
  std::uint64_t pad = (kDataAlignment - unpadded % kDataAlignment) % kDataAlignment;
  if (pad == 0) return 0;
  if (pad < 4) pad += kDataAlignment;
  return static_cast<std::uint16_t>(pad);
}

struct ProgressState {
  const std::function<bool(std::uint64_t, std::uint64_t)>* callback;
  std::uint64_t total;
  bool cancelled = false;
  double fraction = 0;
};

}  // namespace

struct ZipWriter::Pending {
  std::string name;
  std::vector<Bytes> pieces;
  std::uint64_t size = 0;
  std::shared_ptr<LibzipArchive> copy_source;  // raw copies only
  EntryInfo copy_entry;
};

ZipWriter::ZipWriter(std::filesystem::path path) : path_(std::move(path)) {}
ZipWriter::~ZipWriter() = default;

void ZipWriter::add_stored(std::string name, std::vector<Bytes> pieces) {
  std::uint64_t size = total_size(pieces);
  stored_.push_back(Pending{std::move(name), std::move(pieces), size, nullptr, {}});
}

void ZipWriter::add_deflated(std::string name, std::vector<Bytes> pieces) {
  std::uint64_t size = total_size(pieces);
  deflated_.push_back(Pending{std::move(name), std::move(pieces), size, nullptr, {}});
}

void ZipWriter::add_raw_copy(std::string name, std::shared_ptr<LibzipArchive> source,
                             const EntryInfo& entry) {
  deflated_.push_back(
      Pending{std::move(name), {}, entry.compressed_size, std::move(source), entry});
}

std::uint64_t ZipWriter::close(const std::function<bool(std::uint64_t, std::uint64_t)>& progress) {
  int err = 0;
  zip_t* za = zip_open(path_.c_str(), ZIP_CREATE | ZIP_EXCL, &err);
  auto fail = [&](const std::string& what) {
    std::string msg = what + ": " + (za ? zip_strerror(za) : "");
    if (za) zip_discard(za);
    throw Error(ErrorCode::io, msg, ErrorContext{.archive = path_.string()});
  };
  if (!za) {
    zip_error_t e;
    zip_error_init_with_code(&e, err);
    std::string msg = zip_error_strerror(&e);
    zip_error_fini(&e);
    throw Error(ErrorCode::io, "cannot create archive: " + msg,
                ErrorContext{.archive = path_.string()});
  }

  std::uint64_t total = 0;
  // Holds copy sources' locks for the duration of zip_close (libzip reads
  // them then).
  std::vector<std::unique_lock<std::mutex>> locks;
  auto add = [&](Pending& p, bool deflate, std::uint64_t* offset) {
    zip_source_t* src;
    if (p.copy_source) {
      if (locks.empty() || locks.back().mutex() != &p.copy_source->mutex())
        locks.emplace_back(p.copy_source->mutex());
      src = zip_source_zip(za, p.copy_source->handle(), p.copy_source->index_of(p.copy_entry),
                           ZIP_FL_COMPRESSED, 0, -1);
    } else {
      auto* state = new PiecesSource{p.pieces, p.size, 0, {}};
      zip_error_init(&state->error);
      src = zip_source_function(za, &PiecesSource::callback, state);
      if (!src) {
        delete state;
      }
    }
    if (!src) fail("cannot create a source for '" + p.name + "'");
    zip_int64_t index = zip_file_add(za, p.name.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(src);
      fail("cannot add '" + p.name + "'");
    }
    auto idx = static_cast<zip_uint64_t>(index);
    if (!p.copy_source &&
        zip_set_file_compression(za, idx, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0)
      fail("cannot set compression of '" + p.name + "'");
    if (zip_file_set_mtime(za, idx, static_cast<time_t>(kEntryMtime), 0) != 0)
      fail("cannot set time of '" + p.name + "'");
    if (offset) {
      // Local header: 30 bytes + name + extra fields (ZIP64 for >= 4 GiB).
      std::uint64_t unpadded = *offset + 30 + p.name.size() + (p.size >= 0xFFFFFFFFull ? 20 : 0);
      std::uint16_t pad = padding_length(unpadded);
      if (pad) {
        std::vector<zip_uint8_t> zeros(pad - 4u, 0);
        if (zip_file_extra_field_set(za, idx, kPaddingExtraId, ZIP_EXTRA_FIELD_NEW, zeros.data(),
                                     static_cast<zip_uint16_t>(zeros.size()), ZIP_FL_LOCAL) != 0)
          fail("cannot pad '" + p.name + "'");
      }
      *offset = unpadded + pad + p.size;
    }
    total += p.size;
  };
  std::uint64_t offset = 0;
  for (auto& p : stored_) add(p, false, &offset);
  for (auto& p : deflated_) add(p, true, nullptr);

  ProgressState state{&progress, total};
  if (progress) {
    zip_register_progress_callback_with_state(
        za, 0.001,
        [](zip_t*, double fraction, void* ud) {
          auto* s = static_cast<ProgressState*>(ud);
          s->fraction = fraction;
          if (!(*s->callback)(static_cast<std::uint64_t>(fraction * static_cast<double>(s->total)),
                              s->total))
            s->cancelled = true;
        },
        nullptr, &state);
    zip_register_cancel_callback_with_state(
        za, [](zip_t*, void* ud) { return static_cast<ProgressState*>(ud)->cancelled ? 1 : 0; },
        nullptr, &state);
  }
  if (zip_close(za) != 0) {
    if (state.cancelled) {
      zip_discard(za);
      throw Error(ErrorCode::cancelled, "save cancelled", ErrorContext{.archive = path_.string()});
    }
    fail("cannot write archive");
  }
  locks.clear();
  if (progress) progress(total, total);  // libzip's last report may fall short of 1.0

  // Check the layout we predicted: every stored entry 64-byte aligned.
  Bytes written = io::map_file(path_);
  Directory dir = parse_directory(written.span(), Limits{});
  for (const auto& e : dir.entries)
    if (e.stored() && e.data_offset % kDataAlignment != 0)
      throw Error(ErrorCode::io,
                  "internal error: entry data at offset " + std::to_string(e.data_offset) +
                      " is not 64-byte aligned",
                  ErrorContext{.archive = path_.string(), .entry = e.name});
  return written.size();
}

}  // namespace modelzip::zip
