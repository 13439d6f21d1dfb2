#include "checkpoint/new_tag_contents.hpp"
#include "core/printable.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip {

using Param = NewTag::Contents::Param;
using UpdaterState = NewTag::Contents::UpdaterState;
using Entry = NewTag::Contents::Entry;

NewTag::NewTag() = default;
NewTag::~NewTag() = default;
NewTag::NewTag(const NewTag& other)
    : contents_(other.contents_ ? std::make_unique<Contents>(*other.contents_) : nullptr) {}
NewTag& NewTag::operator=(const NewTag& other) {
  if (this != &other)
    contents_ = other.contents_ ? std::make_unique<Contents>(*other.contents_) : nullptr;
  return *this;
}
NewTag::NewTag(NewTag&& other) noexcept = default;
NewTag& NewTag::operator=(NewTag&& other) noexcept = default;

NewTag::Contents& NewTag::mutable_contents() {
  if (!contents_) contents_ = std::make_unique<Contents>();
  return *contents_;
}

const NewTag::Contents& NewTag::Contents::of(const NewTag& tag) noexcept {
  static const Contents empty;
  return tag.contents_ ? *tag.contents_ : empty;
}

namespace {
// Records `name` in `contents`; throws on an empty or duplicate one.
void claim_name(NewTag::Contents& contents, const std::string& name) {
  if (name.empty()) throw Error(ErrorCode::invalid_argument, "a parameter name must not be empty");
  if (!contents.param_names.insert(name).second)
    throw Error(ErrorCode::invalid_argument,
                "parameter " + modelzip::detail::quote_name(name) + " is added twice");
}
}  // namespace

void NewTag::add(std::string name, Tensor tensor, ParamOptions options) {
  claim_name(mutable_contents(), name);
  Param p;
  p.name = std::move(name);
  p.source = Param::Source::tensor;
  p.tensor = std::move(tensor);
  p.options = options;
  mutable_contents().params.push_back(std::move(p));
}

void NewTag::add_embedding(std::string name, Bytes fifu_file) {
  claim_name(mutable_contents(), name);
  Param p;
  p.name = std::move(name);
  p.source = Param::Source::embedding;
  p.file = std::move(fifu_file);
  mutable_contents().params.push_back(std::move(p));
}

void NewTag::share(std::string name, std::string from_tag, std::string from_param) {
  claim_name(mutable_contents(), name);
  Param p;
  p.name = std::move(name);
  p.source = Param::Source::shared;
  p.from_tag = std::move(from_tag);
  p.from_param = std::move(from_param);
  mutable_contents().params.push_back(std::move(p));
}

namespace {
// Records (variable, state) in `contents`; throws on an empty or duplicate key.
void claim_state_key(NewTag::Contents& contents, const std::string& variable,
                     const std::string& state) {
  if (variable.empty() || state.empty())
    throw Error(ErrorCode::invalid_argument, "updater variable and state names must not be empty");
  if (!contents.state_keys.emplace(variable, state).second)
    throw Error(ErrorCode::invalid_argument,
                "updater state " + modelzip::detail::quote_name(state) + " of " +
                    modelzip::detail::quote_name(variable) + " is added twice");
}
}  // namespace

void NewTag::add_updater_state(std::string variable, std::string state, Tensor tensor,
                               ParamOptions options) {
  claim_state_key(mutable_contents(), variable, state);
  mutable_contents().updater_states.push_back(
      UpdaterState{std::move(variable), std::move(state), false, std::move(tensor), {}, options});
}

void NewTag::share_updater_state(std::string variable, std::string state, std::string from_tag) {
  claim_state_key(mutable_contents(), variable, state);
  mutable_contents().updater_states.push_back(
      UpdaterState{std::move(variable), std::move(state), true, {}, std::move(from_tag), {}});
}

void NewTag::set_entry(std::string relative_name, Bytes contents, Compression compression) {
  if (auto why = zip::unsafe_name_reason(relative_name); !why.empty())
    throw Error(ErrorCode::invalid_argument,
                why + ": " + modelzip::detail::quote_name(relative_name));
  if (relative_name == "params.txt" || relative_name == "updater.txt" ||
      relative_name.starts_with("params/") || relative_name.starts_with("updater/") ||
      relative_name.ends_with("/"))
    throw Error(ErrorCode::invalid_argument, modelzip::detail::quote_name(relative_name) +
                                                 " is reserved for parameters and updater state");
  for (auto& e : mutable_contents().entries)
    if (e.relative_name == relative_name) {
      e.contents = std::move(contents);
      e.compression = compression;
      return;
    }
  mutable_contents().entries.push_back(
      Entry{std::move(relative_name), std::move(contents), compression});
}

}  // namespace modelzip
