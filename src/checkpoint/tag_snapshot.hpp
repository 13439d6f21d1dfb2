// Snapshots of a NewTag for background saves: a NewTag equal to the given
// one whose every byte (tensor values, offsets, indices, quantization scales
// and zero points, embedding files, extra entries) is a copy in one staging
// buffer, so that the caller may change or free its own buffers as soon as
// the snapshot returns.
//
// Ownership: each Bytes of the snapshot keeps the staging buffer alive (a
// shared_ptr aliasing it); the buffer is free again (use_count() == 1 for
// its last owner) once the snapshot and every copy of its tensors are gone.
//
// Thread safety: reads `tag` and writes only the staging buffer; `tag`'s
// bytes must not change while snapshot_tag runs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "checkpoint/staging_area.hpp"
#include "modelzip/writer.hpp"
#include "zip/known_crcs.hpp"

namespace modelzip::detail {

// Adopted buffers (BackgroundSaveOptions::adopt): memory a save takes over
// as its snapshot instead of copying. The view of `b` inside the first of
// `adopted` that holds all of it (a slice sharing that buffer's lifetime),
// or nullopt.
std::optional<Bytes> adopted_view(const Bytes& b, std::span<const Bytes> adopted);

// Staging bytes stage_buffers needs for `buffers` (each 64-byte aligned),
// not counting those inside `adopted`.
std::uint64_t staged_size(std::span<const Bytes* const> buffers,
                          std::span<const Bytes> adopted = {});

// Copies of `buffers`, in order, in `staging` (capacity at least
// staged_size(buffers, adopted)); an empty buffer's copy is empty, a buffer
// inside one of `adopted` is not copied: its "copy" is its adopted_view.
// Each copy keeps `staging` (or its adopted buffer) alive. Copied with up
// to `threads` threads; with `crcs`, each copy's CRC-32 is recorded there
// too (see snapshot_tag; adopted views are not checksummed here). Throws
// Error(invalid_argument) if the staging buffer is too small.
std::vector<Bytes> stage_buffers(std::span<const Bytes* const> buffers,
                                 const std::shared_ptr<StagingBuffer>& staging, unsigned threads,
                                 zip::KnownCrcs* crcs = nullptr,
                                 std::span<const Bytes> adopted = {});

// Staging bytes snapshot_tag needs for `tag` (each buffer 64-byte aligned),
// not counting buffers inside `adopted`.
std::uint64_t snapshot_size(const NewTag& tag, std::span<const Bytes> adopted = {});

// A copy of `tag` whose bytes live in `staging` (capacity at least
// snapshot_size(tag)), copied with up to `threads` threads. With `crcs`,
// the copy also checksums every copied buffer (parallel_copy) and records
// its CRC-32 there, under the copy's range: a commit of the snapshot inside
// a KnownCrcs::Scope of that table does not checksum those bytes again.
// Buffers inside `adopted` are used where they are (see stage_buffers).
// Throws Error(invalid_argument) if the staging buffer is too small.
NewTag snapshot_tag(const NewTag& tag, const std::shared_ptr<StagingBuffer>& staging,
                    unsigned threads, zip::KnownCrcs* crcs = nullptr,
                    std::span<const Bytes> adopted = {});

}  // namespace modelzip::detail
