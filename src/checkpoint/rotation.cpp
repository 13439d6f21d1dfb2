#include "checkpoint/rotation.hpp"

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/archive_plan.hpp"
#include "checkpoint/plan_entries.hpp"
#include "format/tag_name.hpp"

namespace modelzip::checkpoint {

using format::TableKind;

Rotation plan_rotation(const Archive& old, const RotationInput& in) {
  const Archive::Impl& old_impl = Archive::Impl::of(old);
  Plan plan = plan_from(&old_impl);
  const std::size_t old_count = plan.tags.size();
  TagPlan added;
  added.name = in.tag;
  added.rows[0] = in.params;
  added.rows[1] = in.updater;
  added.has_updater = in.has_updater;
  added.next_index[0] = in.new_blobs[0];
  added.next_index[1] = in.new_blobs[1];
  plan.tags.push_back(std::move(added));
  Rotation out;
  // The replaced tag goes first (Writer::replace_tag), then the oldest
  // beyond keep_last (Writer::keep_last staged after the tag). An old tag
  // comes before the new one, so removing by name finds the old one.
  if (in.replace)
    for (std::size_t i = 0; i < old_count; ++i)
      if (format::same_tag(plan.tags[i].name, in.tag)) {
        remove_from_plan(plan, plan.tags[i].name);
        out.removes = true;
        break;
      }
  if (in.keep_last)
    while (plan.tags.size() > *in.keep_last) {
      remove_from_plan(plan, plan.tags.front().name);
      out.removes = true;
    }
  if (out.removes) check_undamaged_plan(plan, old.name());
  const TagPlan& self = plan.tags.back();
  out.params = self.rows[0];
  out.updater = self.rows[1];
  out.kept = kept_in_place(plan, old_impl);
  for (const auto& t : plan.tags) {
    out.tags.push_back(t.name);
    if (&t != &self && !tables_in_place(t)) {
      out.tables.emplace_back(t.name + "/params.txt",
                              format::write_blob_table(t.rows[0], TableKind::params));
      if (t.has_updater || !t.rows[1].empty())
        out.tables.emplace_back(t.name + "/updater.txt",
                                format::write_blob_table(t.rows[1], TableKind::updater));
    }
    // Other entries of kept tags never move; blobs move only into a tag
    // (remove_from_plan), each an old entry (the new tag's own blobs are
    // not in the plan).
    for (const auto& [key, c] : t.blobs)
      if (!in_place(t.entry_name(key), c)) out.moved.push_back({c.old, t.entry_name(key)});
  }
  return out;
}

}  // namespace modelzip::checkpoint
