#include "checkpoint/tensor_stream.hpp"
#include "core/printable.hpp"

#include <algorithm>

#include "checkpoint/archive_impl.hpp"
#include "modelzip/error.hpp"

namespace modelzip {

TensorStream::TensorStream(const Archive& archive, std::string_view name, std::string_view tag)
    : archive_(archive) {
  const ParamInfo info = archive.param(name, tag);
  const Archive::Impl& impl = Archive::Impl::of(archive);
  tag_ = archive.find_tag(tag.empty() ? archive.newest_tag() : tag).value_or(std::string(tag));
  if (info.kind != BlobKind::tensor)
    throw Error(ErrorCode::invalid_argument,
                "parameter " + modelzip::detail::quote_name(name) +
                    " is an embedding; use embedding_file()",
                impl.context(info.blob, tag_));
  entry_ = &impl.entry_or_throw(info.blob);
  read_header();
}

TensorStream::TensorStream(const Archive& archive, const zip::EntryInfo& entry, std::string tag)
    : archive_(archive), entry_(&entry), tag_(std::move(tag)) {
  read_header();
}

TensorStream TensorStream::updater_state(const Archive& archive, std::string_view variable,
                                         std::string_view state, std::string_view tag) {
  const Archive::Impl& impl = Archive::Impl::of(archive);
  const std::size_t t = impl.usable_tag(tag);
  const std::string key = std::string(variable) + std::string(1, '\0') + std::string(state);
  const format::BlobRow& row = impl.row(t, format::TableKind::updater, key);
  return TensorStream(archive,
                      impl.entry_or_throw(impl.blob_entry(t, row, format::TableKind::updater)),
                      impl.tags[t]);
}

void TensorStream::read_header() {
  const Archive::Impl& impl = Archive::Impl::of(archive_);
  try {
    Bytes prefix = impl.reader.read_prefix(*entry_, 4);
    const std::uint64_t size =
        format::blob_header_size(prefix.span(), entry_->uncompressed_size, impl.limits);
    prefix = impl.reader.read_prefix(*entry_, size);
    header_ = format::read_blob_header(prefix.span(), entry_->uncompressed_size, impl.limits);
  } catch (const Error& e) {
    throw impl.read_error(e, impl.context(entry_->name, tag_));
  }
}

bool TensorStream::streamable() const noexcept {
  return header_.layout == Layout::dense && header_.dtype != DType::utf8 && !header_.big_endian;
}

void TensorStream::write_values(const std::function<void(std::span<const std::byte>)>& sink) const {
  const Archive::Impl& impl = Archive::Impl::of(archive_);
  if (!streamable())
    throw Error(ErrorCode::unsupported, "this tensor cannot be streamed",
                impl.context(entry_->name, tag_));
  const std::uint64_t begin = header_.values.offset, end = begin + header_.values.length;
  std::uint64_t at = 0;  // offset in the entry of the next piece
  try {
    impl.reader.stream(*entry_, [&](std::span<const std::byte> piece) {
      const std::uint64_t piece_end = at + piece.size();
      const std::uint64_t from = std::max(at, begin), to = std::min(piece_end, end);
      if (from < to) sink(piece.subspan(from - at, to - from));
      at = piece_end;
    });
  } catch (const Error& e) {
    throw impl.read_error(e, impl.context(entry_->name, tag_));
  }
}

void TensorStream::check() const {
  const Archive::Impl& impl = Archive::Impl::of(archive_);
  try {
    impl.reader.stream(*entry_, [](std::span<const std::byte>) {});
  } catch (const Error& e) {
    throw impl.read_error(e, impl.context(entry_->name, tag_));
  }
}

}  // namespace modelzip
