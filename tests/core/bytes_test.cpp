#include <doctest/doctest.h>

#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;

TEST_CASE("Bytes owns, slices and keeps its owner alive") {
  Bytes whole = Bytes::copy_of(std::string_view("hello world"));
  Bytes world = whole.slice(6, 5);
  whole = Bytes();  // the slice keeps the memory alive
  CHECK(world.as_string_view() == "world");
  CHECK_FALSE(world.is_mapped());
  CHECK_THROWS_AS(world.slice(3, 3), Error);
  CHECK_THROWS_AS(world.slice(6, 0), Error);
  CHECK(world.slice(5, 0).empty());
  CHECK_THROWS_AS(world.slice(UINT64_MAX, 2), Error);
}

TEST_CASE("Bytes::borrow keeps the keeper alive") {
  auto owner = std::make_shared<std::string>("abc");
  std::weak_ptr<std::string> weak = owner;
  Bytes b = Bytes::borrow(std::as_bytes(std::span(owner->data(), owner->size())), owner);
  owner.reset();
  CHECK_FALSE(weak.expired());
  CHECK(b.as_string_view() == "abc");
  b = Bytes();
  CHECK(weak.expired());
}

TEST_CASE("to_owned detaches") {
  std::string s = "xyz";
  Bytes b = Bytes::borrow(std::as_bytes(std::span(s.data(), s.size())), nullptr);
  Bytes o = b.to_owned();
  s[0] = 'Q';
  CHECK(b.as_string_view() == "Qyz");
  CHECK(o.as_string_view() == "xyz");
}
