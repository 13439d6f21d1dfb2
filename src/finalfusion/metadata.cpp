// EmbeddingsMetadata: the TOML document of chunk 5, parsed with toml++ into the
// library-free MetadataValue tree, and the chunk format (length-prefixed
// UTF-8 TOML text).
#include <cmath>
#include <functional>
#include <sstream>

#include <toml++/toml.h>

#include "core/kept_symbol.hpp"
#include "core/utf8.hpp"
#include "finalfusion/metadata_chunk.hpp"
#include "modelzip/error.hpp"

namespace modelzip::finalfusion {
namespace {

MetadataValue from_node(const toml::node& node);

MetadataValue from_table_node(const toml::table& table) {
  std::vector<std::string> keys;
  std::vector<MetadataValue> values;
  keys.reserve(table.size());
  values.reserve(table.size());
  for (const auto& [key, value] : table) {
    keys.emplace_back(key.str());
    values.push_back(from_node(value));
  }
  return MetadataValue::table(std::move(keys), std::move(values));
}

template <class T>
std::string print(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

MetadataValue from_node(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return from_table_node(*node.as_table());
    case toml::node_type::array: {
      std::vector<MetadataValue> items;
      for (const auto& item : *node.as_array()) items.push_back(from_node(item));
      return MetadataValue::array(std::move(items));
    }
    case toml::node_type::string:
      return MetadataValue::string(node.as_string()->get());
    case toml::node_type::integer:
      return MetadataValue::integer(node.as_integer()->get());
    case toml::node_type::floating_point:
      return MetadataValue::floating(node.as_floating_point()->get());
    case toml::node_type::boolean:
      return MetadataValue::boolean(node.as_boolean()->get());
    case toml::node_type::date:
      return MetadataValue::datetime(print(node.as_date()->get()));
    case toml::node_type::time:
      return MetadataValue::datetime(print(node.as_time()->get()));
    case toml::node_type::date_time:
      return MetadataValue::datetime(print(node.as_date_time()->get()));
    case toml::node_type::none:
      break;
  }
  return MetadataValue::string("");
}

// Parses a TOML datetime literal by parsing "v = <text>".
void insert_datetime(const std::string& text, const std::function<void(toml::node&&)>& put) {
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    throw Error(ErrorCode::invalid_argument, "metadata: '" + text + "' is not a TOML date/time");
  }
  auto* node = parsed.get("v");
  if (!node || !(node->is_date() || node->is_time() || node->is_date_time()))
    throw Error(ErrorCode::invalid_argument, "metadata: '" + text + "' is not a TOML date/time");
  if (auto* v = node->as_date()) put(toml::value<toml::date>(v->get()));
  if (auto* v = node->as_time()) put(toml::value<toml::time>(v->get()));
  if (auto* v = node->as_date_time()) put(toml::value<toml::date_time>(v->get()));
}

void to_array(const MetadataValue& value, toml::array& out);

void to_table(const MetadataValue& value, toml::table& out) {
  const auto keys = value.keys();
  const auto items = value.items();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& key = keys[i];
    const auto& item = items[i];
    switch (item.kind()) {
      case MetadataValue::Kind::string:
        out.insert_or_assign(key, *item.as_string());
        break;
      case MetadataValue::Kind::integer:
        out.insert_or_assign(key, *item.as_integer());
        break;
      case MetadataValue::Kind::floating:
        out.insert_or_assign(key, *item.as_number());
        break;
      case MetadataValue::Kind::boolean:
        out.insert_or_assign(key, *item.as_boolean());
        break;
      case MetadataValue::Kind::datetime:
        insert_datetime(*item.as_string(), [&](toml::node&& n) {
          if (n.is_date()) out.insert_or_assign(key, std::move(*n.as_date()));
          if (n.is_time()) out.insert_or_assign(key, std::move(*n.as_time()));
          if (n.is_date_time()) out.insert_or_assign(key, std::move(*n.as_date_time()));
        });
        break;
      case MetadataValue::Kind::array: {
        toml::array a;
        to_array(item, a);
        out.insert_or_assign(key, std::move(a));
        break;
      }
      case MetadataValue::Kind::table: {
        toml::table t;
        to_table(item, t);
        out.insert_or_assign(key, std::move(t));
        break;
      }
    }
  }
}

void to_array(const MetadataValue& value, toml::array& out) {
  for (const auto& item : value.items()) {
    switch (item.kind()) {
      case MetadataValue::Kind::string:
        out.push_back(*item.as_string());
        break;
      case MetadataValue::Kind::integer:
        out.push_back(*item.as_integer());
        break;
      case MetadataValue::Kind::floating:
        out.push_back(*item.as_number());
        break;
      case MetadataValue::Kind::boolean:
        out.push_back(*item.as_boolean());
        break;
      case MetadataValue::Kind::datetime:
        insert_datetime(*item.as_string(), [&](toml::node&& n) {
          if (n.is_date()) out.push_back(std::move(*n.as_date()));
          if (n.is_time()) out.push_back(std::move(*n.as_time()));
          if (n.is_date_time()) out.push_back(std::move(*n.as_date_time()));
        });
        break;
      case MetadataValue::Kind::array: {
        toml::array a;
        to_array(item, a);
        out.push_back(std::move(a));
        break;
      }
      case MetadataValue::Kind::table: {
        toml::table t;
        to_table(item, t);
        out.push_back(std::move(t));
        break;
      }
    }
  }
}

}  // namespace

MetadataValue::MetadataValue() = default;

MetadataValue MetadataValue::string(std::string value) {
  MetadataValue v;
  v.kind_ = Kind::string;
  v.text_ = std::move(value);
  return v;
}
MetadataValue MetadataValue::integer(std::int64_t value) {
  MetadataValue v;
  v.kind_ = Kind::integer;
  v.integer_ = value;
  return v;
}
MetadataValue MetadataValue::floating(double value) {
  MetadataValue v;
  v.kind_ = Kind::floating;
  v.floating_ = value;
  return v;
}
MetadataValue MetadataValue::boolean(bool value) {
  MetadataValue v;
  v.kind_ = Kind::boolean;
  v.boolean_ = value;
  return v;
}
MetadataValue MetadataValue::datetime(std::string toml_text) {
  MetadataValue v;
  v.kind_ = Kind::datetime;
  v.text_ = std::move(toml_text);
  return v;
}
MetadataValue MetadataValue::array(std::vector<MetadataValue> items) {
  MetadataValue v;
  v.kind_ = Kind::array;
  v.items_ = std::move(items);
  return v;
}
MetadataValue MetadataValue::table(std::vector<std::string> keys,
                                   std::vector<MetadataValue> values) {
  if (keys.size() != values.size())
    throw Error(ErrorCode::invalid_argument, "metadata table: keys and values differ in number");
  MetadataValue v;
  v.kind_ = Kind::table;
  v.keys_ = std::move(keys);
  v.items_ = std::move(values);
  return v;
}

const std::string* MetadataValue::as_string() const& noexcept {
  return kind_ == Kind::string || kind_ == Kind::datetime ? &text_ : nullptr;
}
// 0.1.0's unqualified forms of as_string, get and find (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip11finalfusion13MetadataValue9as_stringB5cxx11Ev,
                     _ZNKR8modelzip11finalfusion13MetadataValue9as_stringB5cxx11Ev);
std::optional<std::int64_t> MetadataValue::as_integer() const noexcept {
  if (kind_ == Kind::integer) return integer_;
  return std::nullopt;
}
std::optional<double> MetadataValue::as_number() const noexcept {
  if (kind_ == Kind::floating) return floating_;
  if (kind_ == Kind::integer) return static_cast<double>(integer_);
  return std::nullopt;
}
std::optional<bool> MetadataValue::as_boolean() const noexcept {
  if (kind_ == Kind::boolean) return boolean_;
  return std::nullopt;
}

const MetadataValue* MetadataValue::get(std::string_view key) const& noexcept {
  for (std::size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return &items_[i];
  return nullptr;
}
MODELZIP_KEEP_SYMBOL(
    _ZNK8modelzip11finalfusion13MetadataValue3getESt17basic_string_viewIcSt11char_traitsIcEE,
    _ZNKR8modelzip11finalfusion13MetadataValue3getESt17basic_string_viewIcSt11char_traitsIcEE);

const MetadataValue* MetadataValue::find(std::string_view dotted_path) const& noexcept {
  const MetadataValue* v = this;
  while (v) {
    const auto dot = dotted_path.find('.');
    v = v->get(dotted_path.substr(0, dot));
    if (dot == std::string_view::npos) return v;
    dotted_path.remove_prefix(dot + 1);
  }
  return nullptr;
}
MODELZIP_KEEP_SYMBOL(
    _ZNK8modelzip11finalfusion13MetadataValue4findESt17basic_string_viewIcSt11char_traitsIcEE,
    _ZNKR8modelzip11finalfusion13MetadataValue4findESt17basic_string_viewIcSt11char_traitsIcEE);

void MetadataValue::set(std::string key, MetadataValue value) {
  if (kind_ != Kind::table)
    throw Error(ErrorCode::invalid_argument, "metadata: set() on a value that is not a table");
  for (std::size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) {
      items_[i] = std::move(value);
      return;
    }
  keys_.push_back(std::move(key));
  items_.push_back(std::move(value));
}

bool MetadataValue::operator==(const MetadataValue& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::string:
    case Kind::datetime:
      return text_ == o.text_;
    case Kind::integer:
      return integer_ == o.integer_;
    case Kind::floating:
      return floating_ == o.floating_ || (std::isnan(floating_) && std::isnan(o.floating_));
    case Kind::boolean:
      return boolean_ == o.boolean_;
    case Kind::array:
      return items_ == o.items_;
    case Kind::table: {
      // Tables compare as maps (key order does not matter).
      if (keys_.size() != o.keys_.size()) return false;
      for (std::size_t i = 0; i < keys_.size(); ++i) {
        const MetadataValue* other = o.get(keys_[i]);
        if (!other || !(items_[i] == *other)) return false;
      }
      return true;
    }
  }
  return false;
}

EmbeddingsMetadata EmbeddingsMetadata::parse(std::string_view toml_text) {
  if (auto bad = modelzip::detail::utf8_invalid_at(toml_text))
    throw Error(ErrorCode::corrupt,
                "metadata is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
  toml::table table;
  try {
    table = toml::parse(toml_text);
  } catch (const toml::parse_error& e) {
    throw Error(ErrorCode::corrupt, "invalid TOML metadata: " + std::string(e.description()),
                ErrorContext{.line = static_cast<std::uint64_t>(e.source().begin.line)});
  }
  EmbeddingsMetadata m;
  m.text_ = std::string(toml_text);
  m.root_ = from_table_node(table);
  return m;
}

EmbeddingsMetadata EmbeddingsMetadata::from_table(const MetadataValue& root) {
  if (!root.is_table()) throw Error(ErrorCode::invalid_argument, "metadata root must be a table");
  toml::table table;
  to_table(root, table);
  std::ostringstream out;
  out << table << '\n';
  return parse(out.str());
}

namespace detail {

EmbeddingsMetadata read_metadata(modelzip::detail::ByteReader& body) {
  const std::uint64_t at = body.absolute_position();
  auto text = body.string(body.remaining(), "Metadata");
  try {
    return EmbeddingsMetadata::parse(text);
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.offset = at});
  }
}

void write_metadata(Sink& sink, const EmbeddingsMetadata& metadata) {
  sink.chunk_start(ChunkId::metadata, metadata.toml().size());
  sink.bytes(metadata.toml().data(), metadata.toml().size());
}

}  // namespace detail
}  // namespace modelzip::finalfusion
