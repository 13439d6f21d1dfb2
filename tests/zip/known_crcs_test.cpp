// modelzip::zip::KnownCrcs and known_crc_of: whole ranges only, scopes per
// thread and nested, small pieces computed, any unknown large piece means
// "not known".
#include <doctest/doctest.h>

#include <thread>

#include "core/crc32.hpp"
#include "test_support.hpp"
#include "zip/known_crcs.hpp"

using namespace modelzip;
using modelzip::zip::known_crc_of;
using modelzip::zip::KnownCrcs;

namespace {
std::uint32_t crc_of_all(const std::vector<Bytes>& pieces) {
  std::uint32_t crc = 0;
  for (const Bytes& p : pieces) crc = modelzip::detail::crc32_update(crc, p.span());
  return crc;
}
}  // namespace

TEST_CASE("known_crc_of combines recorded CRCs of large pieces with computed small ones") {
  std::mt19937_64 rng(5);
  const Bytes header = testing::random_bytes(rng, 100);
  const Bytes a = testing::random_bytes(rng, modelzip::zip::kSmallPiece + 1);
  const Bytes b = testing::random_bytes(rng, 3 * modelzip::zip::kSmallPiece);
  const Bytes other = testing::random_bytes(rng, modelzip::zip::kSmallPiece + 5);
  const std::vector<Bytes> pieces = {header, a, Bytes(), b};

  CHECK_FALSE(known_crc_of(pieces));  // no scope
  auto table = std::make_shared<KnownCrcs>();
  table->record(a.span(), modelzip::detail::crc32_of(a.span()));
  table->record(b.span(), modelzip::detail::crc32_of(b.span()));
  {
    const KnownCrcs::Scope scope(table);
    CHECK(known_crc_of(pieces) == crc_of_all(pieces));
    CHECK_FALSE(known_crc_of({header}));                    // nothing large: not worth a lookup
    CHECK_FALSE(known_crc_of({a, other}));                  // one large piece unknown
    CHECK_FALSE(known_crc_of({a.slice(0, a.size() - 1)}));  // a slice is another range
    // Another thread has no scope.
    bool other_thread_knows = true;
    std::thread([&] { other_thread_knows = known_crc_of(pieces).has_value(); }).join();
    CHECK_FALSE(other_thread_knows);
    {
      // The innermost scope wins, and the outer one is back after it.
      const KnownCrcs::Scope inner(std::make_shared<KnownCrcs>());
      CHECK_FALSE(known_crc_of(pieces));
    }
    CHECK(known_crc_of(pieces) == crc_of_all(pieces));
  }
  CHECK_FALSE(known_crc_of(pieces));
  // A recorded value is trusted as is (the recorder vouches for it).
  table->record(a.span(), 1234);
  const KnownCrcs::Scope scope(table);
  CHECK(known_crc_of({a}) == 1234u);
}
