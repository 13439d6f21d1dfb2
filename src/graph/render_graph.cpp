// graph_json and graph_dot.
#include <unordered_set>

#include "graph/json_writer.hpp"
#include "graph/render.hpp"

namespace modelzip::graph {
namespace {

using detail::JsonWriter;

void string_list(JsonWriter& w, std::string_view key, const std::vector<std::string>& items) {
  w.key(key).begin_array(true);
  for (const auto& s : items) w.value(s);
  w.end_array();
}

template <class T, class F>
void named_args(JsonWriter& w, std::string_view key, const std::vector<NamedArg<T>>& args,
                F&& write_value) {
  if (args.empty()) return;
  w.key(key).begin_object(true);
  for (const auto& a : args) {
    w.key(a.name);
    write_value(a.value);
  }
  w.end_object();
}

// A DOT double-quoted string: quotes and backslashes escaped, line breaks
// as \n (so names cannot end the string or inject attributes).
std::string dot_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      continue;
    else
      out += c;
  }
  return out + "\"";
}

std::string shape_label(const std::optional<Shape>& shape) {
  if (!shape) return "?";  // unknown rank
  std::string s = "[";
  for (std::size_t i = 0; i < shape->size(); ++i) {
    if (i) s += ", ";
    s += (*shape)[i] == kUnknownDim ? "?" : std::to_string((*shape)[i]);
  }
  return s + "]";
}

}  // namespace

std::string graph_json(const Graph& graph) {
  JsonWriter w;
  w.begin_object();
  w.key("variables").begin_array();
  for (const Variable& v : graph.variables) {
    w.begin_object(true);
    w.key("name").value(v.name);
    w.key("kind").value(variable_kind_name(v.kind));
    w.key("dtype").value(dtype_name(v.dtype));
    w.key("shape");
    if (v.shape) {
      w.begin_array(true);
      for (auto d : *v.shape) w.value(d);
      w.end_array();
    } else {
      w.null();
    }
    w.end_object();
  }
  w.end_array();
  w.key("ops").begin_array();
  for (const Op& op : graph.ops) {
    w.begin_object();
    w.key("name").value(op.name);
    w.key("type").value(op.type);
    string_list(w, "inputs", op.inputs);
    string_list(w, "outputs", op.outputs);
    if (!op.control_deps.empty()) string_list(w, "control_deps", op.control_deps);
    named_args(w, "i_args", op.i_args, [&](std::int64_t v) { w.value(v); });
    named_args(w, "t_args", op.t_args, [&](double v) { w.value(v); });
    named_args(w, "b_args", op.b_args, [&](bool v) { w.value(v); });
    named_args(w, "d_args", op.d_args, [&](DType v) { w.value(dtype_name(v)); });
    named_args(w, "s_args", op.s_args, [&](const std::string& v) { w.value(v); });
    w.end_object();
  }
  w.end_array();
  string_list(w, "outputs", graph.outputs);
  string_list(w, "loss_variables", graph.loss_variables);
  w.end_object();
  return w.take();
}

std::string graph_dot(const Graph& graph) {
  std::unordered_set<std::string_view> outputs(graph.outputs.begin(), graph.outputs.end());
  std::unordered_set<std::string_view> losses(graph.loss_variables.begin(),
                                              graph.loss_variables.end());
  std::string out = "digraph modelzip_graph {\n";
  out += "  rankdir=TB;\n";
  out += "  node [fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (const Variable& v : graph.variables) {
    std::string attrs = "shape=ellipse";
    switch (v.kind) {
      case VariableKind::variable:
        attrs += ", style=filled, fillcolor=\"#cfe2ff\"";
        break;
      case VariableKind::constant:
        attrs += ", style=filled, fillcolor=\"#e2e3e5\"";
        break;
      case VariableKind::placeholder:
        attrs += ", style=filled, fillcolor=\"#fff3cd\"";
        break;
      case VariableKind::sequence:
        attrs += ", style=dashed";
        break;
      case VariableKind::array:
        break;
    }
    if (outputs.count(v.name)) attrs += ", peripheries=2";
    if (losses.count(v.name)) attrs += ", color=red";
    std::string label = v.name + "\n" + std::string(variable_kind_name(v.kind)) + " " +
                        std::string(dtype_name(v.dtype)) + " " + shape_label(v.shape);
    out += "  " + dot_quote("v:" + v.name) + " [label=" + dot_quote(label) + ", " + attrs + "];\n";
  }
  for (const Op& op : graph.ops) {
    out += "  " + dot_quote("op:" + op.name) + " [label=" + dot_quote(op.name + "\n" + op.type) +
           ", shape=box, style=rounded];\n";
  }
  for (const Op& op : graph.ops) {
    const std::string id = dot_quote("op:" + op.name);
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      out += "  " + dot_quote("v:" + op.inputs[i]) + " -> " + id;
      if (op.inputs.size() > 1) out += " [label=\"" + std::to_string(i) + "\"]";
      out += ";\n";
    }
    for (const auto& dep : op.control_deps)
      out += "  " + dot_quote("v:" + dep) + " -> " + id + " [style=dashed];\n";
    for (const auto& o : op.outputs) out += "  " + id + " -> " + dot_quote("v:" + o) + ";\n";
  }
  out += "}\n";
  return out;
}

}  // namespace modelzip::graph
