// FillGate: memory that another thread is still filling while a commit
// already runs, so that a save writes the first tensors while the last ones
// are still arriving (a blocking save of CUDA tensors: the fetch from the
// device lands in a staging area, modelzip/_device_save.py, while the
// writer writes what has landed).
//
// The filler calls filled(offset, n) once the bytes of a range are final,
// and fail(message) if it stops before filling everything. A commit run on
// the thread that opened a FillGate::Scope calls wait_filled() before it
// first reads new bytes (to checksum, compare or write them): it returns
// once every piece lying in a gate's memory is filled, or throws
// Error(io) with the filler's message, which fails the commit before the
// new archive becomes visible (the old one stays).
//
// Ownership: a Scope shares its gates (std::shared_ptr); the memory belongs
// to whoever made the gate and must outlive every wait.
//
// Thread safety: filled(), fail() and waits may be called from any threads
// at once. Scopes are per thread (the innermost wins; they nest).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "modelzip/bytes.hpp"

namespace modelzip::detail {

class FillGate {
 public:
  explicit FillGate(std::span<const std::byte> memory) noexcept : memory_(memory) {}
  FillGate(const FillGate&) = delete;
  FillGate& operator=(const FillGate&) = delete;

  // [offset, offset + n) of the memory holds its final bytes. Ranges
  // outside the memory are ignored.
  void filled(std::size_t offset, std::size_t n);
  // The filler stopped: waits for ranges not filled yet throw Error(io)
  // with `message`.
  void fail(std::string message);
  // Whether `range` lies wholly in this gate's memory.
  bool holds(std::span<const std::byte> range) const noexcept;
  // Waits until `range` (held by this gate) is filled; throws Error(io)
  // once the filler failed and the range is not filled.
  void wait(std::span<const std::byte> range) const;

  class Scope {
   public:
    explicit Scope(std::vector<std::shared_ptr<const FillGate>> gates);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::vector<std::shared_ptr<const FillGate>> gates_;
    const Scope* outer_;
    friend void wait_filled(const std::vector<Bytes>& pieces);
  };

 private:
  bool covered(std::size_t begin, std::size_t end) const;  // with mutex_ held

  std::span<const std::byte> memory_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::size_t, std::size_t> filled_;  // disjoint, merged: begin -> end
  std::optional<std::string> failure_;
};

// Waits for every piece that lies in a gate of the calling thread's scope
// (FillGate::wait); returns at once when no scope is open.
void wait_filled(const std::vector<Bytes>& pieces);

}  // namespace modelzip::detail
