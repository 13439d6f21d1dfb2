// Writes the hostile-input corpus of tests/hostile/ (every file that
// expected.tsv lists) into the folder given as the only argument.
//
// Each file is a small, valid modelzip archive (or finalfusion / converter
// file) with one deliberate fault, built byte by byte with the test helpers
// (tests/zip/zip_builder.hpp, tests/format/blob_builder.hpp), so that the
// fault is exactly the one the file name describes. The output is
// deterministic; the committed files are the truth and this program only
// documents how they were made. The expected outcomes live in expected.tsv,
// written by hand from schemas/FORMAT.md, not from running modelzip.
//
// Usage: make_hostile_corpus <folder>
#include <flatbuffers/flatbuffers.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "../format/blob_builder.hpp"
#include "../zip/zip_builder.hpp"
#include "graph_generated.h"
#include "hostile_archives.hpp"

using namespace modelzip::testing;
using namespace std::string_literals;

namespace {

std::filesystem::path g_out;

void emit(const std::string& name, const std::string& bytes) {
  std::ofstream f(g_out / name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + name);
}

void emit_zip(const std::string& name, const ZipSpec& spec) {
  emit(name, build_zip(spec).bytes);
}

// The minimal archive with one more stored entry `name` holding `content`.
ZipSpec with_stored(const std::string& name, const std::string& content) {
  ZipSpec spec = minimal_archive();
  spec.entries.push_back(stored(name, content));
  return spec;
}

// Writes the minimal archive as `change` leaves it.
template <class Change>
void emit_changed(const std::string& name, Change change) {
  ZipSpec spec = minimal_archive();
  change(spec);
  emit_zip(name, spec);
}

// The minimal archive with `entry` replaced by (or, if absent, given) content.
ZipSpec with_entry(const std::string& entry, const std::string& content) {
  ZipSpec spec = minimal_archive();
  set_entry(spec, entry, content);
  return spec;
}

std::string u32s(std::uint32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}
std::string u64s(std::uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 8);
}

void zip_structure_cases() {
  {
    // Truncations of the minimal archive inside each structure kind.
    BuiltZip z = build_zip(minimal_archive());
    emit("zip_truncated_in_first_local_header.zip", z.bytes.substr(0, 17));
    emit("zip_truncated_in_blob_data.zip", z.bytes.substr(0, z.data_offsets[3] + 5));
    emit("zip_truncated_in_central_directory.zip", z.bytes.substr(0, z.central_offsets[1] + 10));
    emit("zip_truncated_in_end_record.zip", z.bytes.substr(0, z.eocd_offset + 11));
    ZipSpec s64 = minimal_archive();
    s64.zip64_end = true;
    BuiltZip z64 = build_zip(s64);
    emit("zip_truncated_in_zip64_end_record.zip", z64.bytes.substr(0, *z64.zip64_end_offset + 30));
    emit("zip_truncated_in_zip64_locator.zip", z64.bytes.substr(0, *z64.zip64_locator_offset + 8));
    // End records intact, the ZIP64 locator removed.
    std::string no_locator =
        z64.bytes.substr(0, *z64.zip64_locator_offset) + z64.bytes.substr(z64.eocd_offset);
    emit("zip_zip64_locator_missing.zip", no_locator);
  }
  {
    // ZIP64 end records beside 32-bit fields that hold the real values
    // (Python's zipfile beyond 2 GiB): valid; then each way to break them.
    ZipSpec s = minimal_archive();
    s.zip64_end = true;
    s.zip64_real_32bit = true;
    BuiltZip z = build_zip(s);
    emit("valid_zip64_end_records_beside_real_values.zip", z.bytes);
    std::string count = z.bytes;
    patch16(count, z.eocd_offset + 8, 3);
    patch16(count, z.eocd_offset + 10, 3);
    emit("zip_zip64_entry_count_disagrees.zip", count);
    std::string offset = z.bytes;
    patch32(offset, z.eocd_offset + 16, get32(z.bytes, z.eocd_offset + 16) + 1);
    emit("zip_zip64_cd_offset_disagrees.zip", offset);
    std::string record = z.bytes;
    patch64(record, *z.zip64_end_offset + 4, 60);
    emit("zip_zip64_record_size_wrong.zip", record);
  }
  {
    // A comment and trailing bytes (a newline, as some tools append): valid.
    ZipSpec s = minimal_archive();
    s.comment = "made by zip -z";
    s.trailing = "\n";
    emit_zip("valid_comment_and_trailing_newline.zip", s);
    // A comment length that runs past the end of the file.
    s.trailing.clear();
    s.comment_length = static_cast<std::uint16_t>(s.comment.size() + 1);
    emit_zip("zip_comment_length_beyond_file.zip", s);
  }
  emit_changed("zip_cd_offset_lies.zip", [](ZipSpec& s) { s.cd_offset = 3; });
  emit_changed("zip_entry_count_lies.zip", [](ZipSpec& s) { s.count = 1000; });
  emit_changed("zip_local_offset_outside.zip",
               [](ZipSpec& s) { entry(s, "t1/params/0.fb").local_offset = 0x7FFFFFF0; });
  emit_changed("zip_stored_sizes_differ.zip",
               [](ZipSpec& s) { entry(s, "t1/params/0.fb").uncompressed_size = 1 << 20; });
  emit_changed("zip_data_size_lies.zip", [](ZipSpec& s) {
    auto& e = entry(s, "t1/params/0.fb");
    e.compressed_size = e.uncompressed_size = 1 << 20;
  });
  emit_changed("zip_local_name_differs.zip",
               [](ZipSpec& s) { entry(s, "tags.txt").local_name = "tags.txu"; });
  {
    // "outer" (first entry, local header at 0, name 5 bytes, data at 35)
    // holds in its data a complete local header of "inner"; the central
    // directory points "inner" there.
    ZipSpec s = minimal_archive();
    std::string inner_local;
    put32(inner_local, 0x04034b50);
    put16(inner_local, 20);
    put16(inner_local, 0x0800);
    put16(inner_local, 0);
    put32(inner_local, 0x00210000);
    put32(inner_local, crc32_of("x"));
    put32(inner_local, 1);
    put32(inner_local, 1);
    put16(inner_local, 5);
    put16(inner_local, 0);
    inner_local += "innerx";
    ZipEntrySpec outer = stored("outer", inner_local);
    ZipEntrySpec inner = stored("inner", "x");
    inner.local_offset = 35;
    inner.raw_data = "";  // nothing of its own in the local area
    inner.compressed_size = inner.uncompressed_size = 1;
    s.entries.insert(s.entries.begin(), {outer, inner});
    emit_zip("zip_overlapping_entries.zip", s);
  }
  emit_zip("zip_duplicate_names.zip", with_stored("tags.txt", "t1\n"));
  emit_zip("zip_path_traversal_dotdot.zip", with_stored("t1/../../evil.sh", "#!/bin/sh\n"));
  emit_zip("zip_path_absolute.zip", with_stored("/etc/cron.d/evil", "x"));
  emit_zip("zip_path_backslash.zip", with_stored("t1\\..\\evil", "x"));
  emit_zip("zip_path_drive_letter.zip", with_stored("C:evil", "x"));
  emit_zip("zip_name_invalid_utf8.zip", with_stored("t1/\xC3\x28.txt", "x"));
  emit_zip("zip_name_control_character.zip", with_stored("t1/a\x01"
                                                         "b",
                                                         "x"));
  // 10 MiB declared from the few bytes deflate makes of "t1\n".
  emit_changed("zip_deflate_ratio_lie.zip", [](ZipSpec& s) {
    auto& e = entry(s, "tags.txt");
    e.method = 8;
    e.uncompressed_size = 10u << 20;
  });
  {
    // A deflate bomb declaring 3 bytes: 4 MiB of '\n' deflate to about 4 KiB.
    ZipSpec s = minimal_archive();
    auto& e = entry(s, "tags.txt");
    e.method = 8;
    e.raw_data = deflate_raw(std::string(4u << 20, '\n'));
    e.uncompressed_size = 3;
    e.crc = crc32_of("t1\n");
    emit_zip("zip_deflate_bomb_underdeclared.zip", s);
  }
  emit_changed("zip_crc_mismatch_blob.zip",
               [](ZipSpec& s) { entry(s, "t1/params/0.fb").crc = 0x12345678; });
  emit_changed("zip_crc_mismatch_tags.zip",
               [](ZipSpec& s) { entry(s, "tags.txt").crc = 0x12345678; });
  emit_changed("zip_encrypted_entry.zip",
               [](ZipSpec& s) { entry(s, "t1/params/0.fb").flags |= 0x0001; });
  emit_changed("zip_bzip2_entry.zip", [](ZipSpec& s) { entry(s, "t1/params/0.fb").method = 12; });
  emit_changed("zip_multi_disk.zip", [](ZipSpec& s) { s.disk = 1; });
  // Sizes of 0xFFFFFFFF say "see the ZIP64 extra field", which is absent.
  emit_changed("zip_zip64_extra_missing.zip", [](ZipSpec& s) {
    auto& e = entry(s, "t1/params/0.fb");
    e.compressed_size = e.uncompressed_size = 0xFFFFFFFFu;
  });
  emit_changed("zip_zip64_cd_offset_lies.zip", [](ZipSpec& s) {
    s.zip64_end = true;
    s.cd_offset = 7;  // in the ZIP64 end record
  });
  emit_changed("zip_zip64_entry_count_huge.zip", [](ZipSpec& s) {
    s.zip64_end = true;
    s.count = 1ull << 40;  // in the ZIP64 end record
  });
  emit("zip_not_a_zip.zip", "modelzip? no: just text, long enough for an end record\n");
}

void table_cases() {
  emit_zip("tags_case_duplicate.zip", tagged_archive({"Step-1", "STEP-1"}));
  emit_zip("tags_invalid_utf8.zip", with_entry("tags.txt", "t1\n\xC3\x28\n"));
  emit_zip("tags_overlong_utf8.zip", with_entry("tags.txt", "t1\n\xC0\xAF\n"));
  emit_zip("tags_empty_line.zip", with_entry("tags.txt", "t1\n\n"));
  emit_zip("tags_carriage_return.zip", with_entry("tags.txt", "t1\r\n"));
  emit_zip("tags_nul_byte.zip", with_entry("tags.txt", std::string("t1\nt\0"
                                                                   "2\n",
                                                                   6)));
  emit_zip("tags_path_traversal.zip", with_entry("tags.txt", "t1\n..\n"));
  emit_zip("tags_slash.zip", with_entry("tags.txt", "t1\na/b\n"));
  emit_zip("tags_device_name.zip", with_entry("tags.txt", "t1\nCom1.bak\n"));
  emit_zip("tags_too_long.zip", with_entry("tags.txt", "t1\n" + std::string(101, 'a') + "\n"));
  emit_zip("tags_missing_entry.zip", without_entry(minimal_archive(), "tags.txt"));
  emit_zip("metadata_missing_entry.zip", without_entry(minimal_archive(), "modelzip.toml"));
  emit_zip("metadata_newer_version.zip", with_entry("modelzip.toml", "format_version = 2\n"));
  emit_zip("metadata_version_wrong_type.zip",
           with_entry("modelzip.toml", "format_version = \"1\"\n"));
  emit_zip("metadata_not_toml.zip", with_entry("modelzip.toml", "format_version = = 1\n"));
  emit_zip("folder_of_unlisted_tag.zip", with_stored("t2/params.txt", "w 0\n"));
  emit_zip("folder_case_differs.zip", with_stored("T1/notes.txt", "x"));
  {
    // Folder entries are ignored wherever they lie (FORMAT.md section 2).
    ZipSpec s = minimal_archive();
    s.entries.push_back(stored("other/", ""));
    s.entries.push_back(stored("other/deeper/", ""));
    s.entries.push_back(stored("T1/", ""));
    s.entries.push_back(stored("t1/", ""));
    s.entries.push_back(stored("t1/params/", ""));
    emit_zip("valid_folder_entries_outside_tag_folders.zip", s);
  }
  {
    // Files under params/ and updater/ whose names are not blob names are
    // ordinary files: never decoded (these hold no tensor blob).
    ZipSpec s = minimal_archive();
    for (const char* name :
         {"t1/params/00.fb", "t1/params/-1.fb", "t1/params/1234567890123456.fb",
          "t1/params/sub/1.fb", "t1/params/1.FB", "t1/params/1.fb.bak", "t1/params/x.fb",
          "t1/params/.fb", "t1/params/1.fifu.fb.txt", "t1/updater/x.fb", "t1/updater/1.fifu",
          "t1/updater/01.fb", "t1/params1.fb", "t1/other/1.fb"})
      s.entries.push_back(stored(name, "not a tensor blob"));
    emit_zip("valid_non_blob_names_in_blob_folders.zip", s);
  }
  // Blob names that no table references must still be valid blobs.
  emit_zip("blob_unreferenced_garbage.zip", with_stored("t1/params/7.fb", "not a tensor blob"));
  emit_zip("blob_unreferenced_garbage_updater.zip",
           with_stored("t1/updater/123456789012345.fb", "not a tensor blob"));
  {
    // A byte-order mark is refused in every text entry.
    emit_zip("bom_in_modelzip_toml.zip", with_entry("modelzip.toml",
                                                    "\xEF\xBB\xBF"
                                                    "format_version = 1\n"));
    emit_zip("bom_in_tags_txt.zip", with_entry("tags.txt", "\xEF\xBB\xBFt1\n"));
    emit_zip("bom_in_params_txt.zip", with_entry("t1/params.txt", "\xEF\xBB\xBFw 0\n"));
    emit_zip("bom_in_updater_txt.zip", with_stored("t1/updater.txt", "\xEF\xBB\xBFw M 0\n"));
  }
  emit_zip("params_missing_entry.zip", without_entry(minimal_archive(), "t1/params.txt"));
  emit_zip("params_malformed_escape.zip", with_entry("t1/params.txt", "w 0\nx%G1 0\n"));
  emit_zip("params_truncated_escape.zip", with_entry("t1/params.txt", "w%2 0\n"));
  emit_zip("params_unescaped_hash.zip", with_entry("t1/params.txt", "w#1 0\n"));
  emit_zip("params_invalid_utf8_escaped.zip", with_entry("t1/params.txt", "w%FF 0\n"));
  emit_zip("params_invalid_utf8_raw.zip", with_entry("t1/params.txt", "w\xFF 0\n"));
  emit_zip("params_surrogate_utf8.zip", with_entry("t1/params.txt", "w\xED\xA0\x80 0\n"));
  emit_zip("params_duplicate_name.zip", with_entry("t1/params.txt", "w 0\n# c\nw 0\n"));
  emit_zip("params_double_space.zip", with_entry("t1/params.txt", "w  0\n"));
  emit_zip("params_leading_zero.zip", with_entry("t1/params.txt", "w 00\n"));
  emit_zip("params_index_too_long.zip", with_entry("t1/params.txt", "w 1234567890123456\n"));
  emit_zip("params_ref_unlisted_tag.zip", with_entry("t1/params.txt", "w t9/0\n"));
  {
    ZipSpec s = tagged_archive({"Base", "t1"});
    set_entry(s, "t1/params.txt", "w Base/0\nv base/0\n");
    emit_zip("params_ref_tag_case_differs.zip", s);
  }
  emit_zip("params_ref_missing_blob.zip", with_entry("t1/params.txt", "w 0\nv 7\n"));
  emit_zip("params_ref_missing_fifu.zip", with_entry("t1/params.txt", "e 0.fifu\n"));
  emit_zip("params_ref_invalid_tag.zip", with_entry("t1/params.txt", "w ../0\n"));
  emit_zip("updater_fifu_reference.zip", with_stored("t1/updater.txt", "w M 0.fifu\n"));
  emit_zip("updater_missing_field.zip", with_stored("t1/updater.txt", "w M\n"));
}

// A blob entry whose FlatBuffer is valid but for `patch`.
std::string patched_good_blob(void (*patch)(std::string&)) {
  std::string b = good_blob();
  patch(b);
  return b;
}

// Quantized blobs (FORMAT.md section 6.1) that break one rule each.
template <class Emit>
void quantized_blob_cases(Emit blob_zip) {
  using modelzip::testing::blocks;
  using modelzip::testing::le_bytes;
  using modelzip::testing::per_axis;
  using modelzip::testing::per_tensor;
  using modelzip::testing::qblob;
  using modelzip::testing::QuantSpec;
  const std::string six(6, '\1');
  const std::string sc2 = le_bytes(std::vector<double>{0.5, 2.0});
  const std::string zp2 = le_bytes(std::vector<std::int64_t>{0, 1});
  blob_zip("blob_quant_scale_zero.zip", entry(qblob(5, {2}, per_tensor(0, 0), "\1\2")));
  blob_zip("blob_quant_scale_negative.zip", entry(qblob(5, {2}, per_tensor(-1, 0), "\1\2")));
  blob_zip("blob_quant_scale_nan.zip", entry(qblob(5, {2}, per_tensor(NAN, 0), "\1\2")));
  blob_zip("blob_quant_zero_point_out_of_range.zip",
           entry(qblob(5, {2}, per_tensor(1, 300, 1), "\1\2")));
  blob_zip("blob_quant_unknown_scheme.zip", entry(qblob(5, {2}, QuantSpec{.scheme = 9}, "\1\2")));
  blob_zip("blob_quant_int_original.zip", entry(qblob(9, {2}, per_tensor(1, 0), "\1\2")));
  blob_zip("blob_quant_missing_table.zip", [&] {
    auto b = qblob(5, {2}, per_tensor(1, 0), "\1\2");
    b.spec.quantization.reset();
    return entry(b);
  }());
  blob_zip("blob_quant_axis_out_of_range.zip", entry(qblob(5, {2, 3}, per_axis(2), six, sc2, zp2)));
  blob_zip("blob_quant_scale_count_wrong.zip", entry(qblob(5, {2, 3}, per_axis(1), six, sc2, zp2)));
  blob_zip(
      "blob_quant_per_axis_scale_inf.zip",
      entry(qblob(5, {2, 3}, per_axis(0), six, le_bytes(std::vector<double>{1, INFINITY}), zp2)));
  blob_zip(
      "blob_quant_per_axis_zero_point_out_of_range.zip",
      entry(qblob(5, {2, 3}, per_axis(0), six, sc2, le_bytes(std::vector<std::int64_t>{0, -200}))));
  blob_zip("blob_quant_block_size_zero.zip",
           entry(qblob(5, {4}, blocks(0, 0, 0, 3), "\1\1\1\1",
                       le_bytes(std::vector<std::uint16_t>{0x3C00}))));
  blob_zip("blob_quant_block_scale_negative_half.zip",
           entry(qblob(5, {4}, blocks(0, 4, 0, 3), "\1\1\1\1",
                       le_bytes(std::vector<std::uint16_t>{0xBC00}))));
  blob_zip("blob_quant_int4_length_mismatch.zip",
           entry(qblob(5, {4}, blocks(0, 4, 2, 3), "\1\1\1\1",
                       le_bytes(std::vector<std::uint16_t>{0x3C00}))));
  blob_zip("blob_quant_int4_padding_nibble.zip",
           entry(qblob(5, {3}, blocks(0, 4, 2, 3), "\x11\x11",
                       le_bytes(std::vector<std::uint16_t>{0x3C00}))));
  blob_zip("blob_quant_scales_overlap_values.zip", [&] {
    auto b = qblob(5, {2, 3}, per_axis(0), six, sc2, zp2);
    b.spec.quantization->scales->first = b.spec.values->first;
    return entry(b);
  }());
}

void blob_cases() {
  auto blob_zip = [](const std::string& file, const std::string& blob) {
    emit_zip(file, with_entry("t1/params/0.fb", blob));
  };
  blob_zip("blob_empty.zip", "");
  blob_zip("blob_truncated_size_prefix.zip", good_blob().substr(0, 3));
  blob_zip("blob_truncated_flatbuffer.zip", good_blob().substr(0, 20));
  blob_zip("blob_truncated_data.zip", good_blob().substr(0, good_blob().size() - 1));
  blob_zip("blob_size_prefix_lies.zip",
           patched_good_blob([](std::string& b) { patch32(b, 0, 1000); }));
  blob_zip("blob_size_prefix_huge.zip",
           patched_good_blob([](std::string& b) { patch32(b, 0, 0xFFFFFFF0u); }));
  // The root table offset (bytes 4..8) pointing far past the buffer.
  blob_zip("blob_fb_root_offset_out_of_range.zip",
           patched_good_blob([](std::string& b) { patch32(b, 4, 0x7FFFFFF0u); }));
  // The root table's vtable offset (first 4 bytes of the table) far out.
  blob_zip("blob_fb_vtable_out_of_range.zip", patched_good_blob([](std::string& b) {
             std::uint64_t table = 4 + get32(b, 4);
             patch32(b, table, 0x7FFFFFF0u);
           }));
  // The shape vector's element count far past the buffer.
  blob_zip("blob_fb_vector_length_out_of_range.zip", patched_good_blob([](std::string& b) {
             const auto* h = modelzip::fb::GetSizePrefixedTensorHeader(b.data());
             auto at = reinterpret_cast<const char*>(h->shape()) - b.data();
             patch32(b, static_cast<std::size_t>(at), 0x10000000u);
           }));
  blob_zip("blob_fb_no_identifier.zip",
           patched_good_blob([](std::string& b) { std::memcpy(b.data() + 8, "XXXX", 4); }));
  blob_zip("blob_unsupported_dtype.zip", blob_with([](BlobSpec& s) { s.dtype = 2; }));
  blob_zip("blob_negative_dimension.zip", blob_with([](BlobSpec& s) { s.shape = {{-1, -2}}; }));
  blob_zip("blob_shape_overflows.zip", blob_with([](BlobSpec& s) {
             s.shape = {{1ll << 31, 1ll << 31, 1ll << 31}};
           }));
  blob_zip("blob_shape_huge.zip", blob_with([](BlobSpec& s) {
             s.shape = {{1ll << 30, 1ll << 30}};
           }));
  blob_zip("blob_rank_65.zip",
           blob_with([](BlobSpec& s) { s.shape = std::vector<std::int64_t>(65, 1); }));
  blob_zip("blob_alignment_not_power_of_two.zip", blob_with([](BlobSpec& s) { s.alignment = 24; }));
  blob_zip("blob_segment_past_end.zip", blob_with([](BlobSpec& s) { s.values->first += 64; }));
  blob_zip("blob_segment_inside_header.zip", blob_with([](BlobSpec& s) { s.values->first = 0; }));
  blob_zip("blob_segment_offset_huge.zip",
           blob_with([](BlobSpec& s) { s.values->first = 0xFFFFFFFFFFFFFFC0ull; }));
  blob_zip("blob_dense_nnz.zip", blob_with([](BlobSpec& s) { s.nnz = 1; }));
  blob_zip("blob_utf8_invalid.zip", utf8_blob({0, 2, 4}, "ok\xC3\x28"));
  blob_zip("blob_utf8_offsets_decrease.zip", utf8_blob({0, 3, 2}, "abc"));
  blob_zip("blob_utf8_offsets_past_values.zip", utf8_blob({0, 2, 9}, "abc"));
  blob_zip("blob_utf8_segments_overlap.zip", utf8_blob({0, 1, 2}, "ab", /*overlap=*/true));
  blob_zip("blob_coo_coordinate_out_of_range.zip", coo_blob({{0, 1}, {1, 5}}));
  blob_zip("blob_coo_nnz_above_numel.zip", coo_blob({{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 0}}));
  quantized_blob_cases(blob_zip);
}

// graph.fb (schemas/graph.fbs, identifier "MZGR"): one placeholder "x" and
// `ops` references to one op "op" whose inputs hold `inputs` references to
// the string "x" (ops = 1 and inputs = 1: a valid graph).
// A graph with placeholder "x" read by `ops` ops, each `inputs` times, and,
// when `w_shape` is given, the float32 VARIABLE "w" of that shape (the
// minimal archive's parameter w is a float32 [2]).
std::string graph_fb(int ops, int inputs,
                     std::optional<std::vector<std::int64_t>> w_shape = std::nullopt) {
  flatbuffers::FlatBufferBuilder fbb;
  auto x = fbb.CreateString("x");
  auto in_vec = fbb.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>(inputs, x));
  auto op = modelzip::fb::CreateOp(fbb, fbb.CreateString("op"), fbb.CreateString("add"), in_vec);
  auto ops_vec = fbb.CreateVector(std::vector<flatbuffers::Offset<modelzip::fb::Op>>(ops, op));
  std::vector<flatbuffers::Offset<modelzip::fb::Variable>> vars{
      modelzip::fb::CreateVariable(fbb, x, modelzip::fb::VariableKind::PLACEHOLDER)};
  if (w_shape)
    vars.push_back(modelzip::fb::CreateVariable(
        fbb, fbb.CreateString("w"), modelzip::fb::VariableKind::VARIABLE,
        modelzip::fb::DataType::FLOAT, fbb.CreateVector(*w_shape)));
  fbb.Finish(modelzip::fb::CreateGraph(fbb, 1, fbb.CreateVector(vars), ops_vec),
             modelzip::fb::GraphIdentifier());
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

void graph_cases() {
  emit_zip("graph_valid.zip", with_entry("t1/graph.fb", graph_fb(1, 1, {{2}})));
  // Each entry valid on its own, the checkpoint not (GRAPH.md section 4).
  emit_zip("graph_param_not_in_graph.zip", with_entry("t1/graph.fb", graph_fb(1, 1)));
  emit_zip("graph_param_wrong_shape.zip", with_entry("t1/graph.fb", graph_fb(1, 1, {{3}})));
  {
    ZipSpec s = with_entry("t1/graph.fb", graph_fb(1, 1, {{2}}));
    s.entries.push_back(stored("t1/updater.txt", "w M 0\n"));
    s.entries.push_back(stored("t1/updater/0.fb", good_blob()));
    emit_zip("graph_state_without_config.zip", s);
  }
  std::string root_out = graph_fb(1, 1);
  patch32(root_out, 0, 0x7FFFFFF0u);
  emit_zip("graph_root_offset_out_of_range.zip", with_entry("t1/graph.fb", root_out));
  std::string no_id = graph_fb(1, 1);
  std::memcpy(no_id.data() + 4, "XXXX", 4);
  emit_zip("graph_wrong_identifier.zip", with_entry("t1/graph.fb", no_id));
  emit_zip("graph_shared_subobjects.zip", with_entry("t1/graph.fb", graph_fb(300, 300)));
}

// finalfusion files: "FiFu", version 0, chunk count, chunk ids, chunks.
std::string fifu_header(std::initializer_list<std::uint32_t> ids) {
  std::string b = "FiFu" + u32s(0) + u32s(static_cast<std::uint32_t>(ids.size()));
  for (auto id : ids) b += u32s(id);
  return b;
}

void finalfusion_cases() {
  // The valid file: SimpleVocab {"a", "b"}, NdArray 2 x 2 f32.
  // Header is 4 + 4 + 4 + 8 = 20 bytes; the vocab chunk starts at 20.
  std::string vocab = u32s(1) + u64s(8 + 2 * 5) + u64s(2) + u32s(1) + "a" + u32s(1) + "b";
  // NdArray at 20 + 30 = 50: id, length, rows u64, cols u32, type u32 at
  // 62..78; padding 4 - (78 % 4) = 2 bytes; data at 80.
  auto ndarray = [](std::uint64_t rows, std::uint32_t cols, std::uint64_t data_bytes) {
    std::string body =
        u64s(rows) + u32s(cols) + u32s(10) + std::string(2, '\0') + std::string(data_bytes, '\0');
    return u32s(2) + u64s(body.size()) + body;
  };
  emit("ff_valid.fifu", fifu_header({1, 2}) + vocab + ndarray(2, 2, 16));
  emit("ff_truncated_magic.fifu", std::string("FiF"));
  emit("ff_bad_magic.fifu", "FuFi" + u32s(0) + u32s(0));
  emit("ff_truncated_in_vocab.fifu", (fifu_header({1, 2}) + vocab).substr(0, 40));
  emit("ff_truncated_in_matrix.fifu",
       fifu_header({1, 2}) + vocab + ndarray(2, 2, 16).substr(0, 40));
  emit("ff_chunk_length_lies.fifu",
       fifu_header({1, 2}) + u32s(1) + u64s(1ull << 40) + u64s(0) + ndarray(0, 2, 0));
  emit("ff_vocab_count_huge.fifu", fifu_header({1, 2}) + u32s(1) + u64s(8 + 64) + u64s(1ull << 60) +
                                       std::string(64, 'x') + ndarray(0, 2, 0));
  emit("ff_word_length_huge.fifu", fifu_header({1, 2}) + u32s(1) + u64s(8 + 4 + 1) + u64s(1) +
                                       u32s(0xFFFFFFFFu) + "a" + ndarray(1, 2, 8));
  emit("ff_matrix_rows_huge.fifu", fifu_header({1, 2}) + vocab + ndarray(1ull << 40, 300, 64));
  emit("ff_matrix_size_overflows.fifu",
       fifu_header({1, 2}) + vocab + ndarray(1ull << 62, 0xFFFFFFFFu, 64));
  emit("ff_invalid_utf8_word.fifu", fifu_header({1, 2}) + u32s(1) + u64s(8 + 2 * 5) + u64s(2) +
                                        u32s(1) + "a" + u32s(1) + "\xFF" + ndarray(2, 2, 16));
  emit("ff_unknown_chunk.fifu", fifu_header({1, 77}) + vocab + u32s(77) + u64s(0));
}

void converter_cases() {
  auto npy = [](const std::string& dict, const std::string& data) {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out = "\x93NUMPY\x01";
    out += '\0';
    put16(out, header.size());
    return out + header + data;
  };
  emit("npy_shape_huge.npy",
       npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
           std::string(8, '\0')));
  emit("npy_shape_overflows.npy",
       npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }",
           std::string(8, '\0')));
  {
    std::string f =
        npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'));
    patch16(f, 8, 0xFFFF);
    emit("npy_header_length_lies.npy", f);
  }
  emit("npy_data_short.npy",
       npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", std::string(8, '\0')));
  {
    // An npz member "x.npy" declaring 1 GiB deflated from a few bytes.
    ZipSpec z;
    z.entries = {deflated("x.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                       std::string(8, '\0')))};
    z.entries[0].uncompressed_size = 1u << 30;
    emit("npz_member_ratio_lie.npz", build_zip(z).bytes);
  }
  auto st = [](const std::string& json, const std::string& data) {
    return u64s(json.size()) + json + data;
  };
  emit("safetensors_header_size_huge.safetensors", u64s(1ull << 62) + "{}");
  emit("safetensors_header_size_past_end.safetensors", u64s(1000) + "{}");
  emit("safetensors_shape_huge.safetensors",
       st(R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})",
          std::string(8, '\0')));
  emit("safetensors_offsets_overlap.safetensors",
       st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          std::string(12, '\0')));
  // 100000 nested arrays where the metadata object belongs (offset 8 + 16).
  emit("safetensors_deep_nesting.safetensors",
       st(R"({"__metadata__":)" + std::string(100000, '[') + "}", ""));
  // Quantized tensors as plain arrays (FORMAT.md section 6.1, "As plain
  // arrays"): w (the integers), w.scales, w.zero_points and the description
  // w.quantization; each file breaks one rule.
  const std::string per_tensor =
      R"({"version":1,"scheme":"affine-per-tensor","storage":"int8","bits":8,"dtype":"float32"})";
  auto quoted = [](const std::string& json) {  // as a JSON string
    std::string out = "\"";
    for (char c : json) out += c == '"' ? std::string("\\\"") : std::string(1, c);
    return out + "\"";
  };
  // Scale 0.0 (float64 zero: eight zero bytes).
  emit("safetensors_quantized_scale_zero.safetensors",
       st(R"({"__metadata__":{"w.quantization":)" + quoted(per_tensor) +
              R"(},"w.scales":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
              R"("w.zero_points":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
              R"("w":{"dtype":"I8","shape":[2],"data_offsets":[16,18]}})",
          std::string(16, '\0') + "\x01\x02"s));
  // Rows of 40 in blocks of 32 need 2 scales per row; 1 is given.
  emit("safetensors_quantized_block_count.safetensors",
       st(R"({"__metadata__":{"w.quantization":)" +
              quoted(R"({"version":1,"scheme":"block-symmetric","storage":"int8","bits":8,)"
                     R"("axis":1,"block_size":32,"dtype":"float32"})") +
              R"(},"w.scales":{"dtype":"F16","shape":[2,1],"data_offsets":[0,4]},)"
              R"("w":{"dtype":"I8","shape":[2,40],"data_offsets":[4,84]}})",
          "\x00\x3C\x00\x3C"s + std::string(80, '\x01')));
  // The description's JSON ends after its first member.
  emit("safetensors_quantized_bad_json.safetensors",
       st(R"({"__metadata__":{"w.quantization":)" + quoted(R"({"version":1,)") +
              R"(},"w.scales":{"dtype":"F64","shape":[],"data_offsets":[0,8]},)"
              R"("w.zero_points":{"dtype":"I64","shape":[],"data_offsets":[8,16]},)"
              R"("w":{"dtype":"I8","shape":[2],"data_offsets":[16,18]}})",
          "\0\0\0\0\0\0\xF0\x3F"s + std::string(8, '\0') + "\x01\x02"s));
  {
    // int4 values one per int8 element; 9 does not fit in 4 bits.
    const std::string desc =
        R"({"version":1,"scheme":"block-symmetric","storage":"int4","bits":4,"axis":0,)"
        R"("block_size":4,"dtype":"float32"})";
    std::string ucs4;  // numpy's '<U' items: UTF-32LE code units
    for (char c : desc) ucs4 += std::string(1, c) + std::string(3, '\0');
    ZipSpec z;
    z.entries = {
        stored("w.npy",
               npy("{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", "\x01\x09\x00"s)),
        stored("w.scales.npy",
               npy("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", "\x00\x3C"s)),
        stored("w.quantization.npy", npy("{'descr': '<U" + std::to_string(desc.size()) +
                                             "', 'fortran_order': False, 'shape': (), }",
                                         ucs4))};
    emit("npz_quantized_int4_out_of_range.npz", build_zip(z).bytes);
  }
  emit("btf_tensor_count_huge.btf", u64s(1ull << 60) + u64s(16));
  emit("btf_rank_huge.btf", u64s(1) + u64s(16) + u64s(1ull << 40) + std::string(8, '\0'));
  {
    // fastText: magic, version 12, args (dim 2, ws, epoch, minCount, neg,
    // wordNgrams, loss 2, model 2, bucket 10, minn 3, maxn 6, lrUpdateRate,
    // t), then at offset 64 the dictionary: size = nwords = 2^31 - 1, no
    // labels, tokens, pruneidx_size -1.
    std::string f = u32s(793712314) + u32s(12);
    for (std::uint32_t v : {2u, 5u, 5u, 1u, 5u, 1u, 2u, 2u, 10u, 3u, 6u, 100u}) f += u32s(v);
    f += std::string(8, '\0');
    f += u32s(0x7FFFFFFFu) + u32s(0x7FFFFFFFu) + u32s(0) + u64s(0) + u64s(~0ull);
    f += std::string(64, 'w');
    emit("fasttext_billions_of_words.bin", f);
  }
  emit("word2vec_billions_of_words.bin", "3000000000 300\nw " + std::string(1200, '\0'));
  emit("textdims_billions_of_words.txt", "3000000000 2\nw 1 2\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_hostile_corpus <folder>\n";
    return 2;
  }
  g_out = argv[1];
  std::filesystem::create_directories(g_out);
  emit_zip("valid_minimal.zip", minimal_archive());
  zip_structure_cases();
  table_cases();
  blob_cases();
  graph_cases();
  finalfusion_cases();
  converter_cases();
  return 0;
}
