// Bytes: an immutable run of bytes that either owns its memory or keeps alive
// whatever it borrows from (a memory mapping, a parent buffer).
//
// Ownership is in the type: copying a Bytes shares the same memory (it is a
// reference-counted view, cheap to copy); the memory lives as long as any
// Bytes that views it. Bytes::borrow with a null keeper is the one exception:
// the caller promises the memory outlives every use (used for caller-owned
// tensors during a save, documented at each use).
//
// Thread safety: a Bytes is immutable; distinct threads may read and copy the
// same Bytes concurrently.
//
// KeptView<View>: a view (std::span or std::string_view) that also holds a
// share of the memory it views, which lives as long as the KeptView (and its
// copies). View accessors called on a temporary return one (Bytes::span(),
// Tensor::as<T>(), Vocab::words()...), so that
// `for (float x : archive.tensor("w").as<float>())` reads memory that lives
// until the loop ends. A KeptView is a View (derived from it): it can be
// passed where a View is taken, and a View copied out of it (a View
// variable, subspan(), first()...) is a plain view again, valid only while
// some owner of the memory lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "modelzip/export.hpp"

namespace modelzip {

template <class View>
class KeptView;

class MODELZIP_API Bytes {
 public:
  Bytes() = default;

  // Copies `data` into newly owned memory.
  static Bytes copy_of(std::span<const std::byte> data);
  static Bytes copy_of(std::string_view text);
  // Takes ownership of `data` without copying.
  static Bytes take(std::vector<std::byte>&& data);
  // Views `data` and keeps `keeper` alive as long as any copy of the view
  // lives. A null keeper means the caller guarantees the lifetime.
  static Bytes borrow(std::span<const std::byte> data, std::shared_ptr<const void> keeper);

  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Views of the bytes; called on a temporary (`tensor.values().span()` of
  // a temporary Tensor), views that keep the memory alive (KeptView).
  std::span<const std::byte> span() const& noexcept { return {data_, size_}; }
  KeptView<std::span<const std::byte>> span() const&& noexcept;
  std::string_view as_string_view() const& noexcept {
    return {reinterpret_cast<const char*>(data_), size_};
  }
  KeptView<std::string_view> as_string_view() const&& noexcept;

  // A sub-view sharing this buffer's lifetime. Throws Error(invalid_argument)
  // if [offset, offset + length) is not inside this view.
  Bytes slice(std::uint64_t offset, std::uint64_t length) const;

  // An owned deep copy (detaches from any mapping).
  Bytes to_owned() const { return copy_of(span()); }

  // True when the bytes live in a memory mapping of a file (zero-copy view).
  bool is_mapped() const noexcept { return mapped_; }

  // Sets is_mapped() (opaque: defined and used only inside modelzip, where
  // files are mapped).
  class MappedAccess;

 private:
  template <class View>
  friend class KeptView;

  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<const void> keeper_;
  bool mapped_ = false;
};

template <class View>
class KeptView : public View {
 public:
  // `view` of memory that `owner` holds (keeps it alive).
  KeptView(View view, const Bytes& owner) noexcept : View(view), keeper_(owner.keeper_) {}
  // `view` of memory that `owner` keeps alive (a part of it, another type).
  template <class OtherView>
  KeptView(View view, const KeptView<OtherView>& owner) noexcept
      : View(view), keeper_(owner.keeper_) {}
  // `view` of memory that lives as long as `keeper` (or, for a null keeper,
  // as the caller promises).
  KeptView(View view, std::shared_ptr<const void> keeper) noexcept
      : View(view), keeper_(std::move(keeper)) {}

 private:
  template <class OtherView>
  friend class KeptView;

  std::shared_ptr<const void> keeper_;
};

inline KeptView<std::span<const std::byte>> Bytes::span() const&& noexcept {
  return {span(), *this};
}
inline KeptView<std::string_view> Bytes::as_string_view() const&& noexcept {
  return {as_string_view(), *this};
}

}  // namespace modelzip
