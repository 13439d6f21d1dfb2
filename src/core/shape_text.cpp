#include "core/shape_text.hpp"

namespace modelzip::detail {

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace modelzip::detail
