// Command-line arguments of one modelzip command: positionals, flags and
// options with values. Options may appear anywhere; "--" ends options, so
// words that start with '-' (a vocabulary word like "-Mozilla") follow it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace modelzip::cli {

// A mistake in how the command was called (exit code 2, usage shown).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `value_options` take a value ("--tag T", "--tag=T", "-k=5"); `flags` do
  // not; `pair_options` take two ("--updater VAR STATE"). A value given to a
  // flag or a pair option with '=' is a UsageError that says how to give it.
  // An empty --tag value is a UsageError (it is never a tag name).
  Args(const std::vector<std::string>& argv, const std::set<std::string>& value_options,
       const std::set<std::string>& flags, const std::set<std::string>& pair_options = {});

  const std::vector<std::string>& positional() const { return positional_; }
  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
  std::vector<std::string> values(const std::string& name) const;  // repeated option
  // Every (first, second) given to a pair option, in order.
  std::vector<std::pair<std::string, std::string>> pairs(const std::string& name) const;
  std::string value_or(const std::string& name, std::string fallback) const;
  // The option as a number in [min, max]; UsageError otherwise.
  long long number_or(const std::string& name, long long fallback, long long min,
                      long long max) const;

  // Positional i, or UsageError naming `what`.
  const std::string& at(std::size_t i, const std::string& what) const;
  // Positional i as a tag name: UsageError naming `what` if missing or empty.
  const std::string& tag_at(std::size_t i, const std::string& what) const;
  // Positional i as a file or folder path: UsageError naming `what` if
  // missing or empty ("" names no file: it is wrong usage, not an I/O error).
  const std::string& path_at(std::size_t i, const std::string& what) const;
  // At least `min` and at most `max` positionals, or UsageError: "unexpected
  // argument 'X'", or "missing B and C" when `names` names positional 0, 1,
  // ... up to min - 1 (else "too few arguments").
  void expect_positionals(std::size_t min, std::size_t max,
                          const std::vector<std::string_view>& names = {}) const;

 private:
  std::vector<std::string> positional_;
  std::set<std::string> flags_;
  std::multimap<std::string, std::string> values_;
  std::multimap<std::string, std::pair<std::string, std::string>> pairs_;
};

}  // namespace modelzip::cli
