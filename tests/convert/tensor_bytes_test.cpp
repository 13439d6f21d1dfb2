// Internal helpers: the tiled Fortran-to-C transposition against the
// definition, element by element, and byte swapping.
#include <random>

#include "convert/tensor_bytes.hpp"
#include "convert_test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

TEST_SUITE("convert") {
  TEST_CASE("fortran_to_c_order matches the definition for random shapes and element sizes") {
    std::mt19937_64 rng(7);
    for (int round = 0; round < 60; ++round) {
      const std::size_t rank = 2 + rng() % 4;
      Shape shape(rank);
      std::uint64_t numel = 1;
      for (auto& d : shape) {
        d = static_cast<std::int64_t>(rng() % (rank == 2 ? 70 : 9));
        numel *= static_cast<std::uint64_t>(d);
      }
      const std::size_t element = std::vector<std::size_t>{1, 2, 4, 8, 12}[rng() % 5];
      INFO("shape " << convert::detail::shape_text(shape) << " element " << element);
      Bytes in = random_bytes(rng, numel * element);
      Bytes out = convert::detail::fortran_to_c_order(in.span(), shape, element);
      REQUIRE(out.size() == in.size());
      // Definition: the element at row-major index (i0..ik) is read from
      // column-major offset sum(i_j * prod(d_0..d_{j-1})).
      bool same = true;
      std::vector<std::int64_t> index(rank, 0);
      for (std::uint64_t flat = 0; flat < numel; ++flat) {
        std::uint64_t rest = flat, source = 0, stride = 1;
        for (std::size_t k = rank; k-- > 0;) {
          index[k] = static_cast<std::int64_t>(rest % static_cast<std::uint64_t>(shape[k]));
          rest /= static_cast<std::uint64_t>(shape[k]);
        }
        for (std::size_t k = 0; k < rank; ++k) {
          source += static_cast<std::uint64_t>(index[k]) * stride;
          stride *= static_cast<std::uint64_t>(shape[k]);
        }
        same = same &&
               std::memcmp(out.data() + flat * element, in.data() + source * element, element) == 0;
      }
      CHECK(same);
    }
  }
}
