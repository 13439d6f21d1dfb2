#include "modelzip/entry_stream.hpp"

#include "checkpoint/archive_impl.hpp"
#include "zip/entry_cursor.hpp"

namespace modelzip {

// `archive` keeps the state `cursor` reads through alive (copies of an
// Archive share it).
struct EntryStream::State {
  State(const Archive& a, const zip::EntryInfo& entry)
      : archive(a), cursor(Archive::Impl::of(archive).reader, entry) {}
  Archive archive;
  zip::EntryCursor cursor;
};

EntryStream EntryStream::open(const Archive& archive, std::string_view entry_name) {
  const Archive::Impl& impl = Archive::Impl::of(archive);
  const zip::EntryInfo& e = impl.entry_or_throw(entry_name);
  try {
    return EntryStream(std::make_unique<State>(archive, e));
  } catch (const Error& err) {
    throw impl.read_error(err, impl.context(e.name));
  }
}

EntryStream::EntryStream(std::unique_ptr<State> state) : state_(std::move(state)) {}
EntryStream::EntryStream(EntryStream&&) noexcept = default;
EntryStream& EntryStream::operator=(EntryStream&&) noexcept = default;
EntryStream::~EntryStream() = default;

std::size_t EntryStream::read(std::span<std::byte> out) {
  if (!state_) throw Error(ErrorCode::invalid_argument, "read of a moved-from EntryStream");
  try {
    return state_->cursor.read(out);
  } catch (const Error& err) {
    const Archive::Impl& impl = Archive::Impl::of(state_->archive);
    throw impl.read_error(err, impl.context(state_->cursor.entry().name));
  }
}

std::uint64_t EntryStream::position() const noexcept {
  return state_ ? state_->cursor.position() : 0;
}

std::uint64_t EntryStream::size() const noexcept {
  return state_ ? state_->cursor.entry().uncompressed_size : 0;
}

bool EntryStream::compressed() const noexcept {
  return state_ && !state_->cursor.entry().stored();
}

}  // namespace modelzip
