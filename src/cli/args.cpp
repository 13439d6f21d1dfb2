#include "cli/args.hpp"
#include "cli/terminal.hpp"

#include <charconv>
#include <string_view>

#include "core/suggestions.hpp"

namespace modelzip::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& value_options,
           const std::set<std::string>& flags, const std::set<std::string>& pair_options) {
  bool options_done = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (options_done || a.size() < 2 || a[0] != '-' || a == "-") {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    std::string name = a, inline_value;
    bool has_inline = false;
    // "--tag=T", and "-k=5" as Python's argparse reads it.
    if (auto eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
      has_inline = true;
    }
    if (pair_options.count(name) && !has_inline) {
      if (i + 2 >= argv.size()) throw UsageError("option " + name + " needs two values");
      pairs_.emplace(name, std::make_pair(argv[i + 1], argv[i + 2]));
      i += 2;
    } else if (value_options.count(name)) {
      if (!has_inline) {
        if (i + 1 >= argv.size()) throw UsageError("option " + name + " needs a value");
        inline_value = argv[++i];
      }
      if (name == "--tag" && inline_value.empty())
        throw UsageError(
            "option --tag needs a tag name, got an empty one (leave --tag out to "
            "mean the newest tag)");
      values_.emplace(name, inline_value);
    } else if (flags.count(name) && !has_inline) {
      flags_.insert(name);
    } else if (flags.count(name)) {
      throw UsageError("option " + name + " takes no value, got " + quoted_name(a));
    } else if (pair_options.count(name)) {
      throw UsageError("option " + name + " takes its two values as separate arguments, got " +
                       quoted_name(a) + " (see the usage below)");
    } else {
      std::vector<std::string_view> known{"--help"};
      for (const auto* options : {&value_options, &flags, &pair_options})
        known.insert(known.end(), options->begin(), options->end());
      const std::string suggestion = detail::did_you_mean(name, known);
      throw UsageError(
          "unknown option " + name +
          (suggestion.empty() ? " (put -- before words that start with -)" : suggestion));
    }
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  auto range = values_.equal_range(name);
  if (range.first == range.second) return std::nullopt;
  return std::prev(range.second)->second;  // the last one wins
}

std::vector<std::string> Args::values(const std::string& name) const {
  std::vector<std::string> out;
  for (auto [it, end] = values_.equal_range(name); it != end; ++it) out.push_back(it->second);
  return out;
}

std::vector<std::pair<std::string, std::string>> Args::pairs(const std::string& name) const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [it, end] = pairs_.equal_range(name); it != end; ++it) out.push_back(it->second);
  return out;
}

std::string Args::value_or(const std::string& name, std::string fallback) const {
  auto v = value(name);
  return v ? *v : fallback;
}

long long Args::number_or(const std::string& name, long long fallback, long long min,
                          long long max) const {
  auto v = value(name);
  if (!v) return fallback;
  long long n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || p != v->data() + v->size() || n < min || n > max)
    throw UsageError("option " + name + " needs a whole number from " + std::to_string(min) +
                     " to " + std::to_string(max) + ", got " + quoted_name(*v));
  return n;
}

const std::string& Args::at(std::size_t i, const std::string& what) const {
  if (i >= positional_.size()) throw UsageError("missing " + what);
  return positional_[i];
}

const std::string& Args::tag_at(std::size_t i, const std::string& what) const {
  const std::string& tag = at(i, what);
  if (tag.empty()) throw UsageError(what + " needs a tag name, got an empty one");
  return tag;
}

const std::string& Args::path_at(std::size_t i, const std::string& what) const {
  const std::string& path = at(i, what);
  if (path.empty()) throw UsageError(what + " needs a path, got an empty one");
  return path;
}

void Args::expect_positionals(std::size_t min, std::size_t max,
                              const std::vector<std::string_view>& names) const {
  if (positional_.size() < min && names.size() >= min) {
    std::string missing;
    for (std::size_t i = positional_.size(); i < min; ++i)
      missing += std::string(i == positional_.size() ? ""
                             : i + 1 == min          ? " and "
                                                     : ", ") +
                 std::string(names[i]);
    throw UsageError("missing " + missing);
  }
  if (positional_.size() < min) throw UsageError("too few arguments");
  if (positional_.size() > max)
    throw UsageError("unexpected argument " + quoted_name(positional_[max]));
}

}  // namespace modelzip::cli
