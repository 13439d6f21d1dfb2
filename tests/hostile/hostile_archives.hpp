// Building blocks of the hostile corpus, shared by its generator
// (make_corpus.cpp) and the hostile suite (which derives truncations and
// work-limit inputs from the same minimal archive).
//
// minimal_archive() is the smallest valid modelzip archive: modelzip.toml,
// tags.txt "t1", t1/params.txt "w 0" and t1/params/0.fb, a float32 tensor of
// shape [2]. Every hostile archive is this one with one fault.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../format/blob_builder.hpp"
#include "../zip/zip_builder.hpp"

namespace modelzip::testing {

inline std::uint64_t round_up_64(std::uint64_t n) {
  return (n + 63) / 64 * 64;
}

// A float32 tensor of shape [2] holding {1, 2}, data at the first multiple
// of 64 after the header. `edit` may change any header field.
template <class Edit>
std::string blob_with(Edit edit) {
  BlobSpec s;
  s.shape = std::vector<std::int64_t>{2};
  s.values = {{0, 8}};
  const std::uint64_t at = blob_data_offset(s);
  s.values = {{at, 8}};
  edit(s);
  return blob_entry(s, le_bytes(std::vector<float>{1.0f, 2.0f}), at);
}
inline std::string good_blob() {
  return blob_with([](BlobSpec&) {});
}

// A UTF8 tensor of shape [offsets.size() - 1]: the offsets segment at the
// first multiple of 64 after the header, the values 64 bytes later (or, with
// `overlap`, at the same offset as the offsets).
inline std::string utf8_blob(const std::vector<std::uint64_t>& offsets, const std::string& values,
                             bool overlap = false) {
  BlobSpec s;
  s.dtype = 50;
  s.shape = std::vector<std::int64_t>{static_cast<std::int64_t>(offsets.size() - 1)};
  s.offsets = {{0, offsets.size() * 8}};
  s.values = {{0, values.size()}};
  const std::uint64_t at = blob_data_offset(s);
  const std::uint64_t values_at = overlap ? at : at + round_up_64(offsets.size() * 8);
  s.offsets = {{at, offsets.size() * 8}};
  s.values = {{values_at, values.size()}};
  std::string data = le_bytes(offsets);
  if (!overlap) {
    data.resize(values_at - at, '\0');
    data += values;
  }
  return blob_entry(s, data, at);
}

// A sparse COO float32 tensor of shape [2, 2] with one value per coordinate
// pair: values at the first multiple of 64 after the header, then indices.
inline std::string coo_blob(const std::vector<std::pair<std::int64_t, std::int64_t>>& coords) {
  BlobSpec s;
  s.layout = 1;
  s.shape = std::vector<std::int64_t>{2, 2};
  s.nnz = coords.size();
  s.values = {{0, coords.size() * 4}};
  s.indices = {{0, coords.size() * 16}};
  const std::uint64_t at = blob_data_offset(s);
  const std::uint64_t indices_at = at + round_up_64(coords.size() * 4);
  s.values = {{at, coords.size() * 4}};
  s.indices = {{indices_at, coords.size() * 16}};
  std::string data(coords.size() * 4, '\0');
  data.resize(indices_at - at, '\0');
  std::vector<std::int64_t> flat;
  for (auto [r, c] : coords) flat.push_back(r), flat.push_back(c);
  data += le_bytes(flat);
  return blob_entry(s, data, at);
}

inline ZipSpec minimal_archive() {
  ZipSpec s;
  s.entries = {stored("modelzip.toml", "format_version = 1\n"), stored("tags.txt", "t1\n"),
               stored("t1/params.txt", "w 0\n"), stored("t1/params/0.fb", good_blob())};
  return s;
}

// The minimal archive with the tags `tags` (oldest first), each holding
// params.txt "w 0" and its own blob.
inline ZipSpec tagged_archive(const std::vector<std::string>& tags) {
  ZipSpec s;
  std::string list;
  for (const auto& t : tags) list += t + "\n";
  s.entries = {stored("modelzip.toml", "format_version = 1\n"), stored("tags.txt", list)};
  for (const auto& t : tags) {
    s.entries.push_back(stored(t + "/params.txt", "w 0\n"));
    s.entries.push_back(stored(t + "/params/0.fb", good_blob()));
  }
  return s;
}

inline ZipEntrySpec& entry(ZipSpec& spec, const std::string& name) {
  for (auto& e : spec.entries)
    if (e.name == name) return e;
  throw std::logic_error("no entry " + name);
}

// Replaces the content of `name` (keeping its other fields), or appends a
// stored entry.
inline void set_entry(ZipSpec& spec, const std::string& name, const std::string& content) {
  for (auto& e : spec.entries)
    if (e.name == name) {
      e.content = content;
      return;
    }
  spec.entries.push_back(stored(name, content));
}

inline ZipSpec without_entry(ZipSpec spec, const std::string& name) {
  std::erase_if(spec.entries, [&](const ZipEntrySpec& e) { return e.name == name; });
  return spec;
}

}  // namespace modelzip::testing
