#include "checkpoint/fill_gate.hpp"

#include <functional>
#include <iterator>

#include "modelzip/error.hpp"

namespace modelzip::detail {

namespace {
thread_local const FillGate::Scope* current = nullptr;
}  // namespace

void FillGate::filled(std::size_t offset, std::size_t n) {
  if (offset > memory_.size() || memory_.size() - offset < n || n == 0) return;
  std::size_t begin = offset, end = offset + n;
  {
    std::lock_guard lock(mutex_);
    // Merge with the ranges it touches or overlaps.
    auto it = filled_.upper_bound(begin);
    if (it != filled_.begin() && std::prev(it)->second >= begin) --it;
    while (it != filled_.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = filled_.erase(it);
    }
    filled_.emplace(begin, end);
  }
  changed_.notify_all();
}

void FillGate::fail(std::string message) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::move(message);
  }
  changed_.notify_all();
}

bool FillGate::holds(std::span<const std::byte> range) const noexcept {
  const std::less<const std::byte*> before;
  const std::byte* end = memory_.data() + memory_.size();
  return !range.empty() && !before(range.data(), memory_.data()) && !before(end, range.data()) &&
         static_cast<std::size_t>(end - range.data()) >= range.size();
}

bool FillGate::covered(std::size_t begin, std::size_t end) const {
  auto it = filled_.upper_bound(begin);
  if (it == filled_.begin()) return false;
  --it;
  return it->first <= begin && it->second >= end;
}

void FillGate::wait(std::span<const std::byte> range) const {
  const auto begin = static_cast<std::size_t>(range.data() - memory_.data());
  const std::size_t end = begin + range.size();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return covered(begin, end) || failure_.has_value(); });
  if (!covered(begin, end))
    throw Error(ErrorCode::io, "the tensors' bytes did not arrive: " + *failure_);
}

FillGate::Scope::Scope(std::vector<std::shared_ptr<const FillGate>> gates)
    : gates_(std::move(gates)), outer_(current) {
  current = this;
}

FillGate::Scope::~Scope() {
  current = outer_;
}

void wait_filled(const std::vector<Bytes>& pieces) {
  for (const FillGate::Scope* scope = current; scope; scope = scope->outer_)
    for (const Bytes& piece : pieces)
      for (const auto& gate : scope->gates_)
        if (gate->holds(piece.span())) gate->wait(piece.span());
}

}  // namespace modelzip::detail
