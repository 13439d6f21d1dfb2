#include "core/byte_swap.hpp"

#include <algorithm>
#include <vector>

namespace modelzip::detail {

std::size_t byte_swap_unit(DType type) noexcept {
  if (type == DType::utf8) return 1;
  return dtype_is_complex(type) ? dtype_size(type) / 2 : dtype_size(type);
}

Bytes byteswapped(std::span<const std::byte> data, std::size_t unit) {
  std::vector<std::byte> out(data.begin(), data.end());
  if (unit > 1)
    for (std::size_t i = 0; i + unit <= out.size(); i += unit)
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(i),
                   out.begin() + static_cast<std::ptrdiff_t>(i + unit));
  return Bytes::take(std::move(out));
}

}  // namespace modelzip::detail
