#include "modelzip/version.hpp"

namespace modelzip {

std::string_view version() noexcept {
  return MODELZIP_VERSION;  // meson.build's project version (a -D of this build)
}

}  // namespace modelzip
