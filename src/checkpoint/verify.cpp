// Archive::verify: a complete check of an archive that opened successfully
// (open already validated the directory, metadata, tags and tables): every
// entry on its own, then the rules across the entries of each tag.
#include "checkpoint/archive_impl.hpp"
#include "checkpoint/entry_validators.hpp"
#include "core/progress_tracker.hpp"
#include "format/blob_table.hpp"
#include "format/tag_name.hpp"
#include "format/tensor_blob.hpp"
#include "modelzip/error.hpp"

#include <zip.h>

#include <any>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace modelzip {

namespace {

// Problems kept per entry; the others of that entry are counted, and the
// count follows its last kept problem.
constexpr std::size_t kProblemsPerEntry = 20;

constexpr std::string_view kMoreBegin = "... and ", kMoreEnd = " in this entry";

// `problems` with a problem "... and N more" after the last problem of each
// entry that `more` counts N further problems for.
std::vector<Problem> with_counts(std::vector<Problem> problems,
                                 const std::unordered_map<std::string, std::size_t>& more) {
  if (more.empty()) return problems;
  std::unordered_map<std::string, std::size_t> last;  // entry -> index of its last problem
  for (std::size_t i = 0; i < problems.size(); ++i) last[problems[i].entry] = i;
  std::vector<Problem> out;
  out.reserve(problems.size() + more.size());
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const std::string entry = problems[i].entry;
    out.push_back(std::move(problems[i]));
    auto it = more.find(entry);
    if (it != more.end() && last.at(entry) == i)
      out.push_back(Problem{entry, std::string(kMoreBegin) + std::to_string(it->second) +
                                       " more problem" + (it->second == 1 ? "" : "s") +
                                       std::string(kMoreEnd)});
  }
  return out;
}

// N of a problem "... and N more problem(s) in this entry", or nullopt for
// any other problem.
std::optional<std::uint64_t> more_count(std::string_view message) {
  if (!message.starts_with(kMoreBegin) || !message.ends_with(kMoreEnd)) return std::nullopt;
  message.remove_prefix(kMoreBegin.size());
  message.remove_suffix(kMoreEnd.size());
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(message.data(), message.data() + message.size(), n);
  const std::string_view rest(end, static_cast<std::size_t>(message.data() + message.size() - end));
  if (ec != std::errc() || end == message.data()) return std::nullopt;
  if (rest != (n == 1 ? " more problem" : " more problems")) return std::nullopt;
  return n;
}

// `found` with the problems of the entries in `changed` (whose bytes may be
// another writer's since the Archive opened the file:
// Archive::Impl::changed_since_open) reported once per entry, where its
// first problem was, as changed rather than damaged; the others as found.
std::vector<Problem> with_changed(std::vector<Problem> found,
                                  const std::unordered_set<std::string>& changed) {
  if (changed.empty()) return found;
  std::vector<Problem> out;
  std::unordered_set<std::string> seen;
  for (Problem& p : found) {
    if (!changed.count(p.entry))
      out.push_back(std::move(p));
    else if (seen.insert(p.entry).second)
      out.push_back(Problem{p.entry, std::string(Archive::Impl::kChangedSinceOpen) +
                                         ": reopen the archive and verify it again"});
  }
  return out;
}

}  // namespace

std::uint64_t problems_found(std::span<const Problem> problems) {
  std::uint64_t found = 0;
  for (const Problem& p : problems) found += more_count(p.message).value_or(1);
  return found;
}

std::vector<Problem> Archive::verify(const ProgressCallback& progress) const {
  const Impl& a = *impl_;
  std::vector<Problem> problems;
  std::unordered_map<std::string, std::size_t> kept, more;  // problems per entry
  auto record = [&](const std::string& entry, const std::string& message) {
    if (std::size_t& n = kept[entry]; n < kProblemsPerEntry) {
      ++n;
      problems.push_back(Problem{entry, message});
    } else {
      ++more[entry];
    }
  };
  auto with_offset = [](const Error& err) {
    return err.message() + (err.context().offset
                                ? " (offset " + std::to_string(*err.context().offset) + ")"
                                : std::string());
  };

  // A remote archive: every byte, fetched once, before the checks.
  if (const io::ByteSource* source = a.reader.source()) {
    try {
      source->ensure(0, a.reader.file().size());
    } catch (const Error& e) {
      throw e.with_context(a.context());
    }
  }

  // libzip must see the same entries as our own parser.
  try {
    auto lz = a.reader.libzip();
    zip_int64_t n = zip_get_num_entries(lz->handle(), 0);
    if (n < 0 || static_cast<std::uint64_t>(n) != a.directory.entries.size())
      record("", "libzip counts " + std::to_string(n) + " entries, the central directory " +
                     std::to_string(a.directory.entries.size()));
  } catch (const Error& e) {
    record("", e.message());
  }

  // Damaged tables (open kept the first problem of each): read again, every
  // problem reported. A table that cannot be read (CRC, inflate) fails the
  // same way in the entry checks below: `unreadable` keeps it reported once.
  std::unordered_set<std::string> unreadable;  // entry + '\0' + message
  for (std::size_t t = 0; t < a.tables.size(); ++t)
    if (a.tables[t].damage) {
      auto table_problem = [&](const Error& err) {
        const auto& c = err.context();
        if (c.line) {
          record(c.entry, "line " + std::to_string(*c.line) + ": " + err.message());
        } else {
          unreadable.insert(c.entry + '\0' + err.message());
          record(c.entry, with_offset(err));
        }
      };
      std::size_t reported = 0;
      TagTables scratch;
      a.read_tables(t, scratch, [&](const Error& err) {
        ++reported;
        table_problem(err);
      });
      if (reported == 0) table_problem(*a.tables[t].damage);  // not found again (a remote read)
    }

  detail::ProgressTracker tracker(progress, "verify", a.context());
  if (tracker.enabled())
    for (const auto& e : a.directory.entries) tracker.add_to_total(e.compressed_size);

  // The rules across a tag's entries (graph checkpoints), for the tags whose
  // tables are intact (a damaged one is reported above). They are checked
  // for a tag as soon as the entry checks below have decoded its graph.fb
  // and (if it has one) trainingConfig.fb, with what those decoded (so that
  // each is decoded once, and only one tag's are kept at a time), else
  // after the entry checks; their problems are reported after the entries',
  // tag by tag. An entry those rules cannot read has been reported by the
  // entry checks as well, unless it is not one they check: then it is
  // reported with the rules' problems.
  const TagValidator validate_tag = entry_validators().tag_validator();
  struct TagRules {
    bool checked = false;
    std::vector<Problem> problems;                            // at most kProblemsPerEntry per entry
    std::unordered_map<std::string, std::size_t> kept, more;  // problems per entry
    std::optional<Error> unreadable;                          // what validate_tag threw
  };
  std::vector<TagRules> tag_rules(validate_tag ? a.tags.size() : 0);
  auto check_tag_rules = [&](std::size_t t, const DecodedTagEntries& decoded) {
    TagRules& rules = tag_rules[t];
    rules.checked = true;
    try {
      validate_tag(*this, a.tags[t], decoded,
                   [&rules](const std::string& entry, const std::string& message) {
                     if (std::size_t& n = rules.kept[entry]; n < kProblemsPerEntry) {
                       ++n;
                       rules.problems.push_back(Problem{entry, message});
                     } else {
                       ++rules.more[entry];
                     }
                   });
    } catch (const Error& err) {
      rules.unreadable = err;
    }
  };
  std::optional<std::size_t> pending;  // the tag `decoded` belongs to
  DecodedTagEntries decoded;
  auto check_pending = [&] {
    if (pending) check_tag_rules(*pending, decoded);
    pending.reset();
    decoded = {};
  };
  // Keeps what the checker of `e` decoded for its tag's rules, and checks
  // them once the tag's graph.fb and trainingConfig.fb are decoded.
  auto keep_decoded = [&](const zip::EntryInfo& e, std::any d) {
    const std::string_view tag = std::string_view(e.name).substr(0, e.name.find('/'));
    auto it = a.tag_index.find(format::ascii_lower(tag));
    if (it == a.tag_index.end() || a.tags[it->second] != tag) return;
    const std::size_t t = it->second;
    if (a.tables[t].damage || tag_rules[t].checked) return;
    if (pending != t) check_pending();
    pending = t;
    (entry_kind_of(e.name) == EntryKind::graph ? decoded.graph : decoded.training_config) =
        std::move(d);
    const bool has_training = a.find_entry(std::string(tag) + "/trainingConfig.fb") != nullptr;
    if (decoded.graph.has_value() && (decoded.training_config.has_value() || !has_training))
      check_pending();
  };

  // What a checker decoded (an EntryChecker's result), else empty.
  auto check = [&](const zip::EntryInfo& e) -> std::any {
    Bytes data = a.reader.read(e, true);  // every CRC, every decompression
    if (e.name.ends_with("/")) return {};
    auto slash = e.name.find('/');
    if (slash == std::string::npos) return {};
    // Every blob file decodes, referenced or not (FORMAT.md section 2);
    // other files of a tag are checked only if their kind has a validator.
    auto blob = format::blob_file_of(std::string_view(e.name).substr(slash + 1));
    if (blob && blob->format == format::BlobFormat::tensor) {
      (void)format::decode_tensor_blob(data, a.limits);
    } else if (auto checker = find_entry_checker(e.name)) {
      return checker(data, a.limits, [&](const Error& err) { record(e.name, with_offset(err)); });
    } else if (auto validator = find_entry_validator(e.name)) {
      validator(data, a.limits);
    }
    return {};
  };
  for (const auto& e : a.directory.entries) {
    std::any d;
    try {
      d = check(e);
    } catch (const Error& err) {
      if (!unreadable.count(e.name + '\0' + err.message())) record(e.name, with_offset(err));
    }
    if (validate_tag && d.has_value()) keep_decoded(e, std::move(d));
    tracker.advance(e.compressed_size);
  }

  if (validate_tag) {
    check_pending();
    std::unordered_set<std::string> reported;
    for (const Problem& p : problems) reported.insert(p.entry);
    for (std::size_t t = 0; t < a.tags.size(); ++t) {
      if (a.tables[t].damage) continue;
      if (!tag_rules[t].checked) check_tag_rules(t, {});
      TagRules& rules = tag_rules[t];
      for (const Problem& p : rules.problems) record(p.entry, p.message);
      for (const auto& [entry, n] : rules.more) more[entry] += n;
      if (const auto& err = rules.unreadable; err && !reported.count(err->context().entry))
        record(err->context().entry, with_offset(*err));
    }
  }
  tracker.finish();
  if (problems.empty()) return problems;
  // Checked after every read: a change it misses came after them.
  std::vector<std::string> entries;
  std::unordered_set<std::string> listed;
  for (const Problem& p : problems)
    if (listed.insert(p.entry).second) entries.push_back(p.entry);
  const std::unordered_set<std::string> changed = a.changed_since_open(entries);
  return with_changed(with_counts(std::move(problems), more), changed);
}

}  // namespace modelzip
