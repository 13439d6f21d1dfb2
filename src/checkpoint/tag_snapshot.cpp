#include "checkpoint/tag_snapshot.hpp"

#include <cstdint>
#include <vector>

#include "checkpoint/new_tag_contents.hpp"
#include "modelzip/error.hpp"

namespace modelzip::detail {

namespace {

constexpr std::uint64_t kAlignment = 64;

std::uint64_t aligned(std::uint64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

void add_tensor_buffers(const Tensor& t, std::vector<const Bytes*>& out) {
  out.push_back(&t.values());
  out.push_back(&t.offsets());
  out.push_back(&t.indices());
  if (const Quantization* q = t.quantization()) {
    out.push_back(&q->scales);
    out.push_back(&q->zero_points);
  }
}

// Every buffer of `tag`, in the order rebuild() takes their copies.
std::vector<const Bytes*> buffers_of(const NewTag& tag) {
  std::vector<const Bytes*> out;
  for (const auto& p : NewTag::Contents::of(tag).params) {
    if (p.source == NewTag::Contents::Param::Source::tensor) add_tensor_buffers(p.tensor, out);
    if (p.source == NewTag::Contents::Param::Source::embedding) out.push_back(&p.file);
  }
  for (const auto& s : NewTag::Contents::of(tag).updater_states)
    if (!s.shared) add_tensor_buffers(s.tensor, out);
  for (const auto& e : NewTag::Contents::of(tag).entries) out.push_back(&e.contents);
  return out;
}

// Hands out the staged copies in the order buffers_of() listed the originals.
class StagedCopies {
 public:
  explicit StagedCopies(std::vector<Bytes> copies) : copies_(std::move(copies)) {}
  Bytes next() { return copies_.at(next_++); }

  Tensor tensor(const Tensor& t) {
    Bytes values = next(), offsets = next(), indices = next();
    switch (t.layout()) {
      case Layout::sparse_coo:
        return Tensor::sparse_coo(t.dtype(), t.shape(), t.nnz(), indices, values);
      case Layout::quantized: {
        Quantization q = *t.quantization();
        q.scales = next();
        q.zero_points = next();
        return Tensor::quantized(t.dtype(), t.shape(), std::move(q), values);
      }
      case Layout::dense:
        break;
    }
    if (t.dtype() == DType::utf8) return Tensor::strings(t.shape(), offsets, values);
    return Tensor::dense(t.dtype(), t.shape(), values);
  }

 private:
  std::vector<Bytes> copies_;
  std::size_t next_ = 0;
};

NewTag rebuild(const NewTag& tag, StagedCopies& copies) {
  NewTag out;
  for (const auto& p : NewTag::Contents::of(tag).params) {
    switch (p.source) {
      case NewTag::Contents::Param::Source::tensor:
        out.add(p.name, copies.tensor(p.tensor), p.options);
        break;
      case NewTag::Contents::Param::Source::embedding:
        out.add_embedding(p.name, copies.next());
        break;
      case NewTag::Contents::Param::Source::shared:
        out.share(p.name, p.from_tag, p.from_param);
        break;
    }
  }
  for (const auto& s : NewTag::Contents::of(tag).updater_states) {
    if (s.shared)
      out.share_updater_state(s.variable, s.state, s.from_tag);
    else
      out.add_updater_state(s.variable, s.state, copies.tensor(s.tensor), s.options);
  }
  for (const auto& e : NewTag::Contents::of(tag).entries)
    out.set_entry(e.relative_name, copies.next(), e.compression);
  return out;
}

}  // namespace

std::optional<Bytes> adopted_view(const Bytes& b, std::span<const Bytes> adopted) {
  const auto at = reinterpret_cast<std::uintptr_t>(b.data());
  for (const Bytes& a : adopted) {
    const auto begin = reinterpret_cast<std::uintptr_t>(a.data());
    if (b.empty() || a.empty() || at < begin || at - begin > a.size() ||
        a.size() - (at - begin) < b.size())
      continue;
    return a.slice(at - begin, b.size());
  }
  return std::nullopt;
}

std::uint64_t staged_size(std::span<const Bytes* const> buffers, std::span<const Bytes> adopted) {
  std::uint64_t total = 0;
  for (const Bytes* b : buffers)
    if (!adopted_view(*b, adopted)) total += aligned(b->size());
  return total;
}

std::vector<Bytes> stage_buffers(std::span<const Bytes* const> buffers,
                                 const std::shared_ptr<StagingBuffer>& staging, unsigned threads,
                                 zip::KnownCrcs* crcs, std::span<const Bytes> adopted) {
  std::vector<CopyJob> jobs;
  std::vector<Bytes> copies;
  copies.reserve(buffers.size());
  const std::shared_ptr<const void> keeper = staging;
  std::uint64_t at = 0;
  for (const Bytes* b : buffers) {
    if (b->empty()) {
      copies.emplace_back();
      continue;
    }
    if (std::optional<Bytes> view = adopted_view(*b, adopted)) {
      copies.push_back(std::move(*view));
      continue;
    }
    if (!staging || staging->capacity() < at || staging->capacity() - at < b->size())
      throw Error(ErrorCode::invalid_argument, "the staging buffer is smaller than the snapshot");
    std::byte* to = staging->data() + at;
    jobs.push_back({b->data(), to, b->size()});
    copies.push_back(Bytes::borrow({to, b->size()}, keeper));
    at += aligned(b->size());
  }
  if (crcs) {
    std::vector<std::uint32_t> job_crcs(jobs.size());
    parallel_copy(jobs, threads, job_crcs);
    for (std::size_t j = 0; j < jobs.size(); ++j)
      crcs->record({jobs[j].to, jobs[j].size}, job_crcs[j]);
  } else {
    parallel_copy(jobs, threads);
  }
  return copies;
}

std::uint64_t snapshot_size(const NewTag& tag, std::span<const Bytes> adopted) {
  return staged_size(buffers_of(tag), adopted);
}

NewTag snapshot_tag(const NewTag& tag, const std::shared_ptr<StagingBuffer>& staging,
                    unsigned threads, zip::KnownCrcs* crcs, std::span<const Bytes> adopted) {
  StagedCopies staged(stage_buffers(buffers_of(tag), staging, threads, crcs, adopted));
  return rebuild(tag, staged);
}

}  // namespace modelzip::detail
