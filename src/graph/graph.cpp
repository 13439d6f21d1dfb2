#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/kept_symbol.hpp"
#include "core/utf8.hpp"
#include "graph/flatbuffer_input.hpp"
#include "graph/rules.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/graph.hpp"

namespace modelzip::graph {

std::string_view variable_kind_name(VariableKind kind) noexcept {
  switch (kind) {
    case VariableKind::variable:
      return "variable";
    case VariableKind::constant:
      return "constant";
    case VariableKind::array:
      return "array";
    case VariableKind::placeholder:
      return "placeholder";
    case VariableKind::sequence:
      return "sequence";
  }
  return "unknown";
}

// ---- Op --------------------------------------------------------------------

Op& Op::add_i_arg(std::string arg_name, std::int64_t value) {
  i_args.push_back({std::move(arg_name), value});
  return *this;
}
Op& Op::add_t_arg(std::string arg_name, double value) {
  t_args.push_back({std::move(arg_name), value});
  return *this;
}
Op& Op::add_b_arg(std::string arg_name, bool value) {
  b_args.push_back({std::move(arg_name), value});
  return *this;
}
Op& Op::add_d_arg(std::string arg_name, DType value) {
  d_args.push_back({std::move(arg_name), value});
  return *this;
}
Op& Op::add_s_arg(std::string arg_name, std::string value) {
  s_args.push_back({std::move(arg_name), std::move(value)});
  return *this;
}

namespace {

template <class T>
std::optional<T> find_arg(const std::vector<NamedArg<T>>& args, std::string_view name) {
  for (const auto& a : args)
    if (a.name == name) return a.value;
  return std::nullopt;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

}  // namespace

std::optional<std::int64_t> Op::i_arg(std::string_view arg_name) const {
  return find_arg(i_args, arg_name);
}
std::optional<double> Op::t_arg(std::string_view arg_name) const {
  return find_arg(t_args, arg_name);
}
std::optional<bool> Op::b_arg(std::string_view arg_name) const {
  return find_arg(b_args, arg_name);
}
std::optional<DType> Op::d_arg(std::string_view arg_name) const {
  return find_arg(d_args, arg_name);
}
std::optional<std::string> Op::s_arg(std::string_view arg_name) const {
  return find_arg(s_args, arg_name);
}

bool Op::operator==(const Op& o) const {
  if (t_args.size() != o.t_args.size()) return false;
  for (std::size_t i = 0; i < t_args.size(); ++i)
    if (t_args[i].name != o.t_args[i].name || !same_bits(t_args[i].value, o.t_args[i].value))
      return false;
  return name == o.name && type == o.type && inputs == o.inputs && outputs == o.outputs &&
         control_deps == o.control_deps && i_args == o.i_args && b_args == o.b_args &&
         d_args == o.d_args && s_args == o.s_args;
}

// ---- Graph -----------------------------------------------------------------

namespace {
Variable& append(std::vector<Variable>& vars, std::string name, VariableKind kind, DType dtype,
                 std::optional<Shape> shape) {
  vars.push_back(Variable{std::move(name), kind, dtype, std::move(shape)});
  return vars.back();
}
}  // namespace

Variable& Graph::add_variable(std::string name, DType dtype, Shape shape) {
  return append(variables, std::move(name), VariableKind::variable, dtype, std::move(shape));
}
Variable& Graph::add_constant(std::string name, DType dtype, Shape shape) {
  return append(variables, std::move(name), VariableKind::constant, dtype, std::move(shape));
}
Variable& Graph::add_placeholder(std::string name, DType dtype, std::optional<Shape> shape) {
  return append(variables, std::move(name), VariableKind::placeholder, dtype, std::move(shape));
}
Variable& Graph::add_array(std::string name, DType dtype, std::optional<Shape> shape) {
  return append(variables, std::move(name), VariableKind::array, dtype, std::move(shape));
}
Variable& Graph::add_sequence(std::string name, DType dtype) {
  return append(variables, std::move(name), VariableKind::sequence, dtype, std::nullopt);
}

Op& Graph::add_op(std::string name, std::string type, std::vector<std::string> op_inputs,
                  std::vector<std::string> op_outputs) {
  Op op;
  op.name = std::move(name);
  op.type = std::move(type);
  op.inputs = std::move(op_inputs);
  op.outputs = std::move(op_outputs);
  ops.push_back(std::move(op));
  return ops.back();
}

const Variable* Graph::find_variable(std::string_view name) const& noexcept {
  for (const auto& v : variables)
    if (v.name == name) return &v;
  return nullptr;
}
// 0.1.0's unqualified forms of find_variable, find_op and producer
// (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(
    _ZNK8modelzip5graph5Graph13find_variableESt17basic_string_viewIcSt11char_traitsIcEE,
    _ZNKR8modelzip5graph5Graph13find_variableESt17basic_string_viewIcSt11char_traitsIcEE);

const Op* Graph::find_op(std::string_view name) const& noexcept {
  for (const auto& op : ops)
    if (op.name == name) return &op;
  return nullptr;
}
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip5graph5Graph7find_opESt17basic_string_viewIcSt11char_traitsIcEE,
                     _ZNKR8modelzip5graph5Graph7find_opESt17basic_string_viewIcSt11char_traitsIcEE);

const Op* Graph::producer(std::string_view variable) const& noexcept {
  for (const auto& op : ops)
    if (std::find(op.outputs.begin(), op.outputs.end(), variable) != op.outputs.end()) return &op;
  return nullptr;
}
MODELZIP_KEEP_SYMBOL(
    _ZNK8modelzip5graph5Graph8producerESt17basic_string_viewIcSt11char_traitsIcEE,
    _ZNKR8modelzip5graph5Graph8producerESt17basic_string_viewIcSt11char_traitsIcEE);

std::vector<std::string> Graph::trainable_variables() const {
  std::vector<std::string> out;
  for (const auto& v : variables)
    if (v.is_trainable()) out.push_back(v.name);
  return out;
}

void validate_graph(const Graph& graph, const Limits& limits) {
  detail::check_graph(graph, limits, ErrorCode::invalid_argument);
}

// ---- Rules -----------------------------------------------------------------

namespace detail {
namespace {

using modelzip::detail::utf8_invalid_at;

void check_name(std::string_view name, const std::string& what, const BrokenRules& broken) {
  if (name.empty()) broken(what + " has an empty name");
  if (auto bad = utf8_invalid_at(name))
    broken(what + " name is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
}

template <class T>
void check_arg_names(const std::vector<NamedArg<T>>& args, const std::string& op,
                     std::string_view list, const BrokenRules& broken) {
  std::unordered_set<std::string_view> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    check_name(args[i].name, op + " " + std::string(list) + " argument " + std::to_string(i),
               broken);
    if (!seen.insert(args[i].name).second)
      broken(op + " has two " + std::string(list) + " arguments named " + quote_name(args[i].name));
  }
}

}  // namespace

void check_graph(const Graph& graph, const Limits& limits, const BrokenRules& broken) {
  std::unordered_map<std::string_view, const Variable*> vars;  // the first of each name
  vars.reserve(graph.variables.size());
  for (std::size_t i = 0; i < graph.variables.size(); ++i) {
    const Variable& v = graph.variables[i];
    check_name(v.name, "variable " + std::to_string(i), broken);
    const std::string what = "variable " + quote_name(v.name);
    if (!vars.emplace(v.name, &v).second) broken("two variables are named " + quote_name(v.name));
    if (static_cast<unsigned>(v.kind) > static_cast<unsigned>(VariableKind::sequence))
      broken(what + " has unknown kind " + std::to_string(static_cast<unsigned>(v.kind)));
    if (!dtype_from_code(static_cast<std::uint32_t>(v.dtype)))
      broken(what + " has unsupported data type " + std::to_string(static_cast<unsigned>(v.dtype)));
    if (!v.shape) {
      if (v.has_value())
        broken(what + " is a " + std::string(variable_kind_name(v.kind)) +
               " and needs a known shape, but its rank is unknown");
      continue;
    }
    if (v.shape->size() > limits.max_rank) {
      broken(ErrorCode::limit_exceeded, what + " has rank " + std::to_string(v.shape->size()) +
                                            ", above the limit of " +
                                            std::to_string(limits.max_rank));
      continue;
    }
    for (std::size_t d = 0; d < v.shape->size(); ++d) {
      std::int64_t dim = (*v.shape)[d];
      if (dim < kUnknownDim)
        broken(what + " has dimension " + std::to_string(d) + " = " + std::to_string(dim) +
               " (dimensions are >= 0, or -1 when unknown)");
      if (dim == kUnknownDim && v.has_value())
        broken(what + " is a " + std::string(variable_kind_name(v.kind)) +
               " and needs a known shape, but dimension " + std::to_string(d) + " is unknown");
    }
  }

  // The variable `name`, or nullptr (reported) when the graph has none.
  auto require_variable = [&](std::string_view name, const std::string& what) -> const Variable* {
    auto it = vars.find(name);
    if (it != vars.end()) return it->second;
    broken(what + " names " + quote_name(name) + ", which is not a variable of the graph");
    return nullptr;
  };

  std::unordered_set<std::string_view> op_names;
  std::unordered_map<std::string_view, std::string_view> producer;  // variable -> op
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    check_name(op.name, "op " + std::to_string(i), broken);
    const std::string what = "op " + quote_name(op.name);
    if (!op_names.insert(op.name).second) broken("two ops are named " + quote_name(op.name));
    if (op.type.empty()) broken(what + " has an empty op type");
    if (auto bad = utf8_invalid_at(op.type))
      broken(what + " op type is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
    for (std::size_t k = 0; k < op.inputs.size(); ++k)
      require_variable(op.inputs[k], what + " input " + std::to_string(k));
    for (std::size_t k = 0; k < op.control_deps.size(); ++k)
      require_variable(op.control_deps[k], what + " control dependency " + std::to_string(k));
    for (std::size_t k = 0; k < op.outputs.size(); ++k) {
      const Variable* v = require_variable(op.outputs[k], what + " output " + std::to_string(k));
      if (!v) continue;
      if (v->kind != VariableKind::array && v->kind != VariableKind::sequence)
        broken(what + " output " + std::to_string(k) + " is " + quote_name(v->name) + ", a " +
               std::string(variable_kind_name(v->kind)) + " (op outputs are arrays or sequences)");
      auto [it, fresh] = producer.emplace(v->name, op.name);
      if (!fresh)
        broken("variable " + quote_name(v->name) + " is an output of both op " +
               quote_name(it->second) + " and op " + quote_name(op.name));
    }
    check_arg_names(op.i_args, what, "integer", broken);
    check_arg_names(op.t_args, what, "floating-point", broken);
    check_arg_names(op.b_args, what, "boolean", broken);
    check_arg_names(op.d_args, what, "data type", broken);
    check_arg_names(op.s_args, what, "string", broken);
    for (const auto& a : op.d_args)
      if (!dtype_from_code(static_cast<std::uint32_t>(a.value)))
        broken(what + " data type argument " + quote_name(a.name) + " has unsupported value " +
               std::to_string(static_cast<unsigned>(a.value)));
    for (const auto& a : op.s_args)
      if (auto bad = utf8_invalid_at(a.value))
        broken(what + " string argument " + quote_name(a.name) + " is not valid UTF-8 (byte " +
               std::to_string(*bad) + ")");
  }
  for (const Variable& v : graph.variables)
    if (v.kind == VariableKind::array && !producer.count(v.name))
      broken("variable " + quote_name(v.name) + " is an array but no op produces it");

  auto check_list = [&](const std::vector<std::string>& names, const std::string& what) {
    std::unordered_set<std::string_view> seen;
    for (std::size_t k = 0; k < names.size(); ++k) {
      require_variable(names[k], what + " " + std::to_string(k));
      if (!seen.insert(names[k]).second)
        broken(what + " " + std::to_string(k) + " repeats " + quote_name(names[k]));
    }
  };
  check_list(graph.outputs, "graph output");
  check_list(graph.loss_variables, "loss variable");
}

}  // namespace detail
}  // namespace modelzip::graph
