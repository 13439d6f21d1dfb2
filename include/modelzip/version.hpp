// The version of the modelzip library a program runs with.
#pragma once

#include <string_view>

#include "modelzip/export.hpp"

namespace modelzip {

// "MAJOR.MINOR.PATCH" of the shared library loaded at run time (which may be
// newer than the headers the program was compiled with); the same string as
// `modelzip --version`, Python's modelzip.__version__ and the `writer` an
// archive's metadata records ("modelzip " + version()). Thread-safe; the
// view refers to static storage.
MODELZIP_API std::string_view version() noexcept;

}  // namespace modelzip
