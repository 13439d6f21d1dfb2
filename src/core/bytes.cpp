#include "modelzip/bytes.hpp"

#include <cstring>
#include <string>

#include "modelzip/error.hpp"

namespace modelzip {

Bytes Bytes::copy_of(std::span<const std::byte> data) {
  return take(std::vector<std::byte>(data.begin(), data.end()));
}

Bytes Bytes::copy_of(std::string_view text) {
  auto p = reinterpret_cast<const std::byte*>(text.data());
  return copy_of(std::span<const std::byte>(p, text.size()));
}

Bytes Bytes::take(std::vector<std::byte>&& data) {
  auto owner = std::make_shared<std::vector<std::byte>>(std::move(data));
  Bytes b;
  b.data_ = owner->data();
  b.size_ = owner->size();
  b.keeper_ = std::move(owner);
  return b;
}

Bytes Bytes::borrow(std::span<const std::byte> data, std::shared_ptr<const void> keeper) {
  Bytes b;
  b.data_ = data.data();
  b.size_ = data.size();
  b.keeper_ = std::move(keeper);
  return b;
}

Bytes Bytes::slice(std::uint64_t offset, std::uint64_t length) const {
  if (offset > size_ || length > size_ - offset)
    throw Error(ErrorCode::invalid_argument,
                "slice [" + std::to_string(offset) + ", +" + std::to_string(length) +
                    ") is outside a buffer of " + std::to_string(size_) + " bytes");
  Bytes b = *this;
  b.data_ = data_ + offset;
  b.size_ = static_cast<std::size_t>(length);
  return b;
}

}  // namespace modelzip
