// How messages and listings write a tensor shape: "[2, 3]" ("[]" for a
// scalar). Pure; thread-safe; no errors.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace modelzip::detail {

std::string shape_text(std::span<const std::int64_t> shape);

}  // namespace modelzip::detail
