// A test model for the distributed suites whose values the tests compute
// themselves (never through the library): parameter p's element i is a
// float derived from (p, i, version). The way each parameter is split over
// the ranks is chosen per parameter: rows, columns (strided), a 2-D grid, a
// whole tensor on one rank, or rows over all ranks but the last, which then
// stages nothing of it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "modelzip/dist/distributed.hpp"
#include "modelzip/tensor.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::disttest {

struct ParamDef {
  std::string name;
  Shape shape;
  enum Split { rows, columns, grid, whole_on_last, rows_but_last, whole_on_first } split;
};

inline std::vector<ParamDef> model_defs() {
  return {
      {"embed.weight", {10, 7}, ParamDef::rows},   // 10 rows over N: uneven
      {"fc.weight", {6, 9}, ParamDef::columns},    // strided column blocks
      {"conv.weight", {8, 6, 3}, ParamDef::grid},  // 2-D grid of blocks
      {"fc.bias", {5}, ParamDef::whole_on_last},   // one rank owns it
      {"head.weight", {11, 4}, ParamDef::rows_but_last},
      {"empty", {0, 3}, ParamDef::rows},        // zero elements
      {"scale", {}, ParamDef::whole_on_first},  // a scalar
      {"big", {70000, 3}, ParamDef::rows},      // > 256 KiB: CRC queue path
  };
}

inline float value_of(const std::string& name, std::uint64_t i, int version) {
  std::uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return static_cast<float>(h % 1000) + static_cast<float>(i) * 0.25f +
         static_cast<float>(version) * 1000.0f;
}

inline std::uint64_t numel_of(const Shape& s) {
  std::uint64_t n = 1;
  for (auto d : s) n *= static_cast<std::uint64_t>(d);
  return n;
}

inline std::vector<float> global_values(const ParamDef& p, int version) {
  std::vector<float> v(numel_of(p.shape));
  for (std::uint64_t i = 0; i < v.size(); ++i) v[i] = value_of(p.name, i, version);
  return v;
}

// The elements of `block` of a row-major tensor of `shape`, by visiting
// every element of the tensor (independent of the library's run logic).
inline std::vector<float> block_values(const std::vector<float>& all, const Shape& shape,
                                       const Block& block) {
  std::vector<float> out;
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> idx(rank, 0);
  for (std::uint64_t flat = 0; flat < all.size(); ++flat) {
    std::uint64_t rest = flat;
    for (std::size_t d = rank; d-- > 0;) {
      idx[d] = static_cast<std::int64_t>(rest % static_cast<std::uint64_t>(shape[d]));
      rest /= static_cast<std::uint64_t>(shape[d]);
    }
    bool inside = true;
    for (std::size_t d = 0; d < rank; ++d)
      inside = inside && idx[d] >= block.offset[d] && idx[d] < block.offset[d] + block.shape[d];
    if (inside) out.push_back(all[flat]);
  }
  return out;
}

inline Tensor float_tensor(const Shape& shape, const std::vector<float>& v) {
  return Tensor::dense(DType::float32, shape,
                       Bytes::copy_of(std::as_bytes(std::span(v.data(), v.size()))));
}

// The block rank `rank` of `n` stages of `p`, or nullopt when it stages none.
inline std::optional<Block> block_for(const ParamDef& p, int rank, int n) {
  const std::int64_t r = rank, size = n;
  switch (p.split) {
    case ParamDef::rows:
      return split_block(p.shape, 0, r, size);
    case ParamDef::columns:
      return split_block(p.shape, 1, r, size);
    case ParamDef::grid: {
      // A rows x cols grid of ranks (2 x 2 for 4 ranks, 1 x n otherwise).
      const std::int64_t grid_rows = n == 4 ? 2 : 1, grid_cols = size / grid_rows;
      Block rb = split_block(p.shape, 0, r / grid_cols, grid_rows);
      Block cb = split_block(p.shape, 1, r % grid_cols, grid_cols);
      rb.offset[1] = cb.offset[1];
      rb.shape[1] = cb.shape[1];
      return rb;
    }
    case ParamDef::whole_on_last:
      if (rank != n - 1) return std::nullopt;
      return Block{std::vector<std::int64_t>(p.shape.size(), 0), p.shape};
    case ParamDef::whole_on_first:
      if (rank != 0) return std::nullopt;
      return Block{std::vector<std::int64_t>(p.shape.size(), 0), p.shape};
    case ParamDef::rows_but_last:
      if (n > 1 && rank == n - 1) return std::nullopt;
      return split_block(p.shape, 0, r, n > 1 ? size - 1 : 1);
  }
  return std::nullopt;
}

// Which version of each parameter a checkpoint holds.
using Versions = std::function<int(const std::string&)>;
inline Versions all_at(int version) {
  return [version](const std::string&) { return version; };
}

// Stages this rank's part of the model on `w`.
inline void stage_model(CollectiveWriter& w, int rank, int n, const Versions& version) {
  for (const auto& p : model_defs()) {
    auto block = block_for(p, rank, n);
    if (!block) continue;
    const auto all = global_values(p, version(p.name));
    Tensor t = float_tensor(block->shape, block_values(all, p.shape, *block));
    if (p.split == ParamDef::whole_on_last || p.split == ParamDef::whole_on_first)
      w.add(p.name, t);
    else
      w.add_shard(p.name, t, p.shape, *block);
  }
}

// The same model as one NewTag, for a single-process save.
inline NewTag whole_model(const Versions& version, int n) {
  // Parameters in the order the collective commit lists them: first
  // appearance over ranks 0..n-1, each in staging order.
  std::vector<std::string> order;
  for (int r = 0; r < n; ++r)
    for (const auto& p : model_defs())
      if (block_for(p, r, n) && std::find(order.begin(), order.end(), p.name) == order.end())
        order.push_back(p.name);
  NewTag tag;
  for (const auto& name : order)
    for (const auto& p : model_defs())
      if (p.name == name) tag.add(p.name, float_tensor(p.shape, global_values(p, version(p.name))));
  return tag;
}

// Updater state of the model: every parameter with elements has the
// states "M" and "V", sharded exactly as the parameter, and a scalar "step"
// staged whole by the first rank that stages the parameter. Values derive
// from (parameter, state, version) like the parameters' (all distinct, so a
// single writer's dedup by content finds no duplicates either).
inline const std::vector<std::string>& updater_state_names() {
  static const std::vector<std::string> names{"M", "V"};
  return names;
}
inline ParamDef state_def(const ParamDef& p, const std::string& state) {
  return ParamDef{p.name + "#" + state, p.shape, p.split};
}
inline Tensor step_state(const ParamDef& p, int version) {
  return float_tensor({}, {value_of(p.name + "#step", 0, version)});
}
inline int first_rank_of(const ParamDef& p, int n) {
  for (int r = 0; r < n; ++r)
    if (block_for(p, r, n)) return r;
  return -1;
}

// Stages this rank's part of the updater state on `w`; "M" is at
// `m_version`, the rest at 1.
inline void stage_updater(CollectiveWriter& w, int rank, int n, int m_version) {
  for (const auto& p : model_defs()) {
    auto block = block_for(p, rank, n);
    if (!block || numel_of(p.shape) == 0) continue;
    for (const auto& s : updater_state_names()) {
      const ParamDef d = state_def(p, s);
      const auto all = global_values(d, s == "M" ? m_version : 1);
      Tensor t = float_tensor(block->shape, block_values(all, p.shape, *block));
      if (p.split == ParamDef::whole_on_last || p.split == ParamDef::whole_on_first)
        w.add_updater_state(p.name, s, t);
      else
        w.add_updater_shard(p.name, s, t, p.shape, *block);
    }
    if (first_rank_of(p, n) == rank) w.add_updater_state(p.name, "step", step_state(p, 1));
  }
}

// The same updater state added whole to `tag`, in the collective order.
inline void add_whole_updater(NewTag& tag, int n, int m_version) {
  std::vector<std::string> order;
  for (int r = 0; r < n; ++r)
    for (const auto& p : model_defs())
      if (block_for(p, r, n) && std::find(order.begin(), order.end(), p.name) == order.end())
        order.push_back(p.name);
  for (const auto& name : order)
    for (const auto& p : model_defs()) {
      if (p.name != name || numel_of(p.shape) == 0) continue;
      for (const auto& s : updater_state_names())
        tag.add_updater_state(
            p.name, s,
            float_tensor(p.shape, global_values(state_def(p, s), s == "M" ? m_version : 1)));
      tag.add_updater_state(p.name, "step", step_state(p, 1));
    }
}

}  // namespace modelzip::disttest
