// graph.fb <-> Graph (schemas/graph.fbs).
#include "graph/flatbuffer_input.hpp"
#include "graph/rules.hpp"
#include "graph_generated.h"
#include "modelzip/error.hpp"
#include "modelzip/graph/graph.hpp"

namespace modelzip::graph {
namespace {

namespace fbs = modelzip::fb;
using detail::fail;
using detail::quote_name;
using detail::string_vector;
using detail::utf8_string;
using detail::utf8_strings;

// The reader version this code implements (graph.fbs, min_reader_version).
constexpr std::uint32_t kGraphReaderVersion = 1;

template <class T, class U>
flatbuffers::Offset<flatbuffers::Vector<T>> value_vector(flatbuffers::FlatBufferBuilder& fbb,
                                                         const std::vector<NamedArg<U>>& args) {
  if (args.empty()) return 0;
  std::vector<T> values;
  values.reserve(args.size());
  for (const auto& a : args) values.push_back(static_cast<T>(a.value));
  return fbb.CreateVector(values);
}

template <class U>
flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>> name_vector(
    flatbuffers::FlatBufferBuilder& fbb, const std::vector<NamedArg<U>>& args) {
  std::vector<std::string> names;
  names.reserve(args.size());
  for (const auto& a : args) names.push_back(a.name);
  return string_vector(fbb, names);
}

flatbuffers::Offset<fbs::Op> encode_op(flatbuffers::FlatBufferBuilder& fbb, const Op& op) {
  auto name = fbb.CreateString(op.name);
  auto type = fbb.CreateString(op.type);
  auto inputs = string_vector(fbb, op.inputs);
  auto outputs = string_vector(fbb, op.outputs);
  auto control = string_vector(fbb, op.control_deps);
  auto i_names = name_vector(fbb, op.i_args);
  auto i_values = value_vector<std::int64_t>(fbb, op.i_args);
  auto t_names = name_vector(fbb, op.t_args);
  auto t_values = value_vector<double>(fbb, op.t_args);
  auto b_names = name_vector(fbb, op.b_args);
  // FlatBuffers stores [bool] as bytes of 0 / 1.
  auto b_values = value_vector<std::uint8_t>(fbb, op.b_args);
  auto d_names = name_vector(fbb, op.d_args);
  auto d_values = value_vector<fbs::DataType>(fbb, op.d_args);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::StringArg>>> s_args = 0;
  if (!op.s_args.empty()) {
    std::vector<flatbuffers::Offset<fbs::StringArg>> args;
    for (const auto& a : op.s_args)
      args.push_back(
          fbs::CreateStringArg(fbb, fbb.CreateString(a.name), fbb.CreateString(a.value)));
    s_args = fbb.CreateVector(args);
  }
  fbs::OpBuilder b(fbb);
  b.add_name(name);
  b.add_op_type(type);
  if (!inputs.IsNull()) b.add_inputs(inputs);
  if (!outputs.IsNull()) b.add_outputs(outputs);
  if (!control.IsNull()) b.add_control_deps(control);
  if (!i_names.IsNull()) b.add_i_arg_names(i_names);
  if (!i_values.IsNull()) b.add_i_args(i_values);
  if (!t_names.IsNull()) b.add_t_arg_names(t_names);
  if (!t_values.IsNull()) b.add_t_args(t_values);
  if (!b_names.IsNull()) b.add_b_arg_names(b_names);
  if (!b_values.IsNull()) b.add_b_args(b_values);
  if (!d_names.IsNull()) b.add_d_arg_names(d_names);
  if (!d_values.IsNull()) b.add_d_args(d_values);
  if (!s_args.IsNull()) b.add_s_args(s_args);
  return b.Finish();
}

fbs::VariableKind to_fb(VariableKind kind) {
  return static_cast<fbs::VariableKind>(static_cast<std::int8_t>(kind));
}

DType decode_dtype(fbs::DataType code, const std::string& what) {
  auto t = dtype_from_code(static_cast<std::uint32_t>(static_cast<std::uint8_t>(code)));
  if (!t)
    fail(ErrorCode::unsupported, what + " has data type " + std::to_string(static_cast<int>(code)) +
                                     ", which this version does not support");
  return *t;
}

// Names and values of one argument pair, matched by index.
template <class Values>
void check_pair(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* names,
                const Values* values, const std::string& what, std::string_view pair) {
  std::size_t n = names ? names->size() : 0, m = values ? values->size() : 0;
  if (n != m)
    fail(ErrorCode::corrupt, what + " has " + std::to_string(n) + " " + std::string(pair) +
                                 " names but " + std::to_string(m) + " values");
}

Op decode_op(const fbs::Op& in, std::size_t index) {
  Op op;
  const std::string at = "op " + std::to_string(index);
  op.name = utf8_string(in.name(), at + " name");
  const std::string what = "op " + quote_name(op.name);
  op.type = utf8_string(in.op_type(), what + " op type");
  op.inputs = utf8_strings(in.inputs(), what + " input");
  op.outputs = utf8_strings(in.outputs(), what + " output");
  op.control_deps = utf8_strings(in.control_deps(), what + " control dependency");

  detail::require_aligned_elements(in.i_args(), 8, what + " i_args");
  detail::require_aligned_elements(in.t_args(), 8, what + " t_args");
  check_pair(in.i_arg_names(), in.i_args(), what, "i_args");
  check_pair(in.t_arg_names(), in.t_args(), what, "t_args");
  check_pair(in.b_arg_names(), in.b_args(), what, "b_args");
  check_pair(in.d_arg_names(), in.d_args(), what, "d_args");
  auto names = [&](auto* v, const char* kind) {
    return utf8_strings(v, what + " " + kind + " argument name");
  };
  if (in.i_args()) {
    auto n = names(in.i_arg_names(), "integer");
    for (flatbuffers::uoffset_t k = 0; k < n.size(); ++k)
      op.i_args.push_back({std::move(n[k]), in.i_args()->Get(k)});
  }
  if (in.t_args()) {
    auto n = names(in.t_arg_names(), "floating-point");
    for (flatbuffers::uoffset_t k = 0; k < n.size(); ++k)
      op.t_args.push_back({std::move(n[k]), in.t_args()->Get(k)});
  }
  if (in.b_args()) {
    auto n = names(in.b_arg_names(), "boolean");
    for (flatbuffers::uoffset_t k = 0; k < n.size(); ++k)
      op.b_args.push_back({std::move(n[k]), in.b_args()->Get(k) != 0});
  }
  if (in.d_args()) {
    auto n = names(in.d_arg_names(), "data type");
    for (flatbuffers::uoffset_t k = 0; k < n.size(); ++k) {
      DType t = decode_dtype(in.d_args()->Get(k), what + " data type argument " + quote_name(n[k]));
      op.d_args.push_back({std::move(n[k]), t});
    }
  }
  if (in.s_args()) {
    for (flatbuffers::uoffset_t k = 0; k < in.s_args()->size(); ++k) {
      const fbs::StringArg* a = in.s_args()->Get(k);
      std::string n = utf8_string(a->name(), what + " string argument name " + std::to_string(k));
      std::string v = utf8_string(a->value(), what + " string argument " + quote_name(n));
      op.s_args.push_back({std::move(n), std::move(v)});
    }
  }
  return op;
}

Variable decode_variable(const fbs::Variable& in, std::size_t index, const Limits& limits) {
  Variable v;
  v.name = utf8_string(in.name(), "variable " + std::to_string(index) + " name");
  const std::string what = "variable " + quote_name(v.name);
  auto kind = static_cast<std::uint8_t>(in.kind());
  if (kind > static_cast<std::uint8_t>(VariableKind::sequence))
    fail(ErrorCode::unsupported, what + " has kind " + std::to_string(kind) +
                                     ", which this version does not know (a newer writer?)");
  v.kind = static_cast<VariableKind>(kind);
  if (in.value_kind() != fbs::ValueKind::TENSOR)
    fail(ErrorCode::unsupported,
         what + " holds a value of kind " + std::to_string(static_cast<int>(in.value_kind())) +
             ", which this version does not support (only tensors; a newer writer?)");
  v.dtype = decode_dtype(in.dtype(), what);
  const auto* shape = in.shape();
  detail::require_aligned_elements(shape, 8, what + " shape");
  if (shape && shape->size() > limits.max_rank)
    throw Error(ErrorCode::limit_exceeded, what + " has rank " + std::to_string(shape->size()) +
                                               ", above the limit of " +
                                               std::to_string(limits.max_rank));
  if (!in.rank_known()) {
    if (shape && shape->size() != 0)
      fail(ErrorCode::corrupt, what + " has an unknown rank but lists dimensions");
    v.shape = std::nullopt;
  } else {
    v.shape = Shape();
    if (shape) v.shape->assign(shape->begin(), shape->end());
  }
  return v;
}

// Work bound against shared sub-objects. FlatBuffers offsets may point many
// times at one sub-object (a DAG): N references to one op whose inputs
// vector holds M references to one string make the verifier and the decoder
// do N x M work, and the decoder allocate N x M strings, from a buffer of
// about 4 (N + M) bytes. Without sharing, every vector reached occupies its
// own bytes, so the element bytes of all vectors reached (counting each
// reference again) cannot exceed the buffer size. This pass adds them up,
// touching each table reference once and each vector only through its
// length, before the full verifier runs: Error(limit_exceeded) when they
// exceed the buffer. Tables are checked shallowly here (the vtable and the
// vector fields this pass reads); the full verifier checks everything after.
class SharingBound {
 public:
  explicit SharingBound(const Bytes& buf, const Limits& limits)
      : buf_(reinterpret_cast<const std::uint8_t*>(buf.data())),
        size_(buf.size()),
        verifier_(buf_, size_, options(limits)) {}

  // Throws limit_exceeded when the vectors reached hold more element bytes
  // than the buffer. Returns quietly on malformed buffers (the verifier that
  // runs next reports them).
  void check() {
    if (size_ < 8) return;
    const auto root_at = verifier_.VerifyOffset(0);
    if (!root_at) return;
    const auto* graph = reinterpret_cast<const flatbuffers::Table*>(buf_ + root_at);
    if (!graph->VerifyTableStart(verifier_)) return;
    add_vector<flatbuffers::uoffset_t>(graph, fbs::Graph::VT_OUTPUTS);
    add_vector<flatbuffers::uoffset_t>(graph, fbs::Graph::VT_LOSS_VARIABLES);
    if (const auto* vars = add_vector<flatbuffers::uoffset_t>(graph, fbs::Graph::VT_VARIABLES))
      for (flatbuffers::uoffset_t i = 0; i < vars->size(); ++i)
        if (const auto* v = table_at(vars, i)) add_vector<std::int64_t>(v, fbs::Variable::VT_SHAPE);
    if (const auto* ops = add_vector<flatbuffers::uoffset_t>(graph, fbs::Graph::VT_OPS)) {
      for (flatbuffers::uoffset_t i = 0; i < ops->size(); ++i) {
        const auto* op = table_at(ops, i);
        if (!op) return;
        for (auto field : {fbs::Op::VT_INPUTS, fbs::Op::VT_OUTPUTS, fbs::Op::VT_CONTROL_DEPS,
                           fbs::Op::VT_I_ARG_NAMES, fbs::Op::VT_T_ARG_NAMES,
                           fbs::Op::VT_B_ARG_NAMES, fbs::Op::VT_D_ARG_NAMES, fbs::Op::VT_S_ARGS})
          add_vector<flatbuffers::uoffset_t>(op, field);
        add_vector<std::int64_t>(op, fbs::Op::VT_I_ARGS);
        add_vector<double>(op, fbs::Op::VT_T_ARGS);
        add_vector<std::uint8_t>(op, fbs::Op::VT_B_ARGS);
        add_vector<std::int8_t>(op, fbs::Op::VT_D_ARGS);
      }
    }
  }

 private:
  static flatbuffers::Verifier::Options options(const Limits& limits) {
    flatbuffers::Verifier::Options o;
    o.max_depth = limits.max_flatbuffer_depth;
    o.max_tables = limits.max_flatbuffer_tables;
    o.check_alignment = true;
    return o;
  }

  // The vector in `field` of `table` (null if absent or malformed), its
  // element bytes added to the total.
  template <class T>
  const flatbuffers::Vector<T>* add_vector(const flatbuffers::Table* table,
                                           flatbuffers::voffset_t field) {
    if (!table->VerifyOffset(verifier_, field)) return nullptr;
    const auto* v = table->GetPointer<const flatbuffers::Vector<T>*>(field);
    if (v == nullptr || !verifier_.VerifyVector(v)) return nullptr;
    total_ += static_cast<std::uint64_t>(v->size()) * sizeof(T);
    if (total_ > size_)
      fail(ErrorCode::limit_exceeded,
           "graph.fb: its vectors, counted at every reference, hold more than the buffer's " +
               std::to_string(size_) +
               " bytes: sub-objects are shared, which would multiply the work of reading it");
    return v;
  }

  // Element `i` of a vector of table offsets, shallowly verified (null if
  // malformed).
  const flatbuffers::Table* table_at(const flatbuffers::Vector<flatbuffers::uoffset_t>* v,
                                     flatbuffers::uoffset_t i) {
    const auto* element = reinterpret_cast<const std::uint8_t*>(v->Data()) + 4ull * i;
    const auto* t = reinterpret_cast<const flatbuffers::Table*>(
        element + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(element));
    if (!verifier_.VerifyTableStart(reinterpret_cast<const std::uint8_t*>(t))) return nullptr;
    verifier_.EndTable();
    return t;
  }

  const std::uint8_t* buf_;
  std::size_t size_;
  flatbuffers::Verifier verifier_;
  std::uint64_t total_ = 0;
};

// Bytes of all strings of a verified graph, counted at every reference:
// what decoding will copy. Error(limit_exceeded) above
// Limits::max_flatbuffer_expansion times the buffer size (one long string
// referenced from many vector slots would otherwise expand without bound).
// Work: one step per string reference, which SharingBound has bounded.
void check_string_expansion(const fbs::Graph& g, std::uint64_t size, const Limits& limits) {
  std::uint64_t total = 0;
  auto one = [&](const flatbuffers::String* s) {
    if (s) total += s->size();
  };
  auto all = [&](const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
    if (v)
      for (const auto* s : *v) one(s);
  };
  if (g.variables())
    for (const auto* v : *g.variables()) one(v->name());
  if (g.ops())
    for (const auto* op : *g.ops()) {
      one(op->name());
      one(op->op_type());
      for (const auto* v : {op->inputs(), op->outputs(), op->control_deps(), op->i_arg_names(),
                            op->t_arg_names(), op->b_arg_names(), op->d_arg_names()})
        all(v);
      if (op->s_args())
        for (const auto* a : *op->s_args()) {
          one(a->name());
          one(a->value());
        }
    }
  all(g.outputs());
  all(g.loss_variables());
  const std::uint64_t allowed = limits.max_flatbuffer_expansion > UINT64_MAX / (size + 1)
                                    ? UINT64_MAX
                                    : limits.max_flatbuffer_expansion * size;
  if (total > allowed)
    fail(ErrorCode::limit_exceeded, "graph.fb: its strings, counted at every reference, hold " +
                                        std::to_string(total) + " bytes, more than " +
                                        std::to_string(limits.max_flatbuffer_expansion) +
                                        " times the buffer's " + std::to_string(size));
}

}  // namespace

Bytes encode_graph(const Graph& graph) {
  validate_graph(graph);
  flatbuffers::FlatBufferBuilder fbb(1024);
  fbb.ForceDefaults(true);  // every scalar explicit: self-describing with flatc --json
  std::vector<flatbuffers::Offset<fbs::Variable>> vars;
  vars.reserve(graph.variables.size());
  for (const Variable& v : graph.variables) {
    auto name = fbb.CreateString(v.name);
    flatbuffers::Offset<flatbuffers::Vector<std::int64_t>> shape = 0;
    if (v.shape && !v.shape->empty()) shape = fbb.CreateVector(*v.shape);
    fbs::VariableBuilder b(fbb);
    b.add_name(name);
    b.add_kind(to_fb(v.kind));
    b.add_dtype(static_cast<fbs::DataType>(static_cast<std::int8_t>(v.dtype)));
    if (!shape.IsNull()) b.add_shape(shape);
    b.add_rank_known(v.shape.has_value());
    b.add_value_kind(fbs::ValueKind::TENSOR);
    vars.push_back(b.Finish());
  }
  auto variables = fbb.CreateVector(vars);
  std::vector<flatbuffers::Offset<fbs::Op>> op_offsets;
  op_offsets.reserve(graph.ops.size());
  for (const Op& op : graph.ops) op_offsets.push_back(encode_op(fbb, op));
  auto ops = fbb.CreateVector(op_offsets);
  auto outputs = string_vector(fbb, graph.outputs);
  auto losses = string_vector(fbb, graph.loss_variables);
  fbs::GraphBuilder b(fbb);
  b.add_min_reader_version(kGraphReaderVersion);
  b.add_variables(variables);
  b.add_ops(ops);
  if (!outputs.IsNull()) b.add_outputs(outputs);
  if (!losses.IsNull()) b.add_loss_variables(losses);
  fbb.Finish(b.Finish(), fbs::GraphIdentifier());
  return detail::finished_bytes(fbb);
}

Graph detail::decode_graph_fields(const Bytes& bytes, const Limits& limits) {
  Bytes buf = detail::verified_buffer(
      bytes, limits, "graph.fb", fbs::GraphIdentifier(),
      [](flatbuffers::Verifier& v) { return fbs::VerifyGraphBuffer(v); },
      [&](const Bytes& b) { SharingBound(b, limits).check(); });
  const fbs::Graph* in = fbs::GetGraph(buf.data());
  check_string_expansion(*in, buf.size(), limits);
  if (in->min_reader_version() > kGraphReaderVersion)
    fail(ErrorCode::unsupported, "graph.fb needs reader version " +
                                     std::to_string(in->min_reader_version()) +
                                     "; this version reads " + std::to_string(kGraphReaderVersion));
  Graph g;
  if (const auto* vars = in->variables()) {
    g.variables.reserve(vars->size());
    for (flatbuffers::uoffset_t i = 0; i < vars->size(); ++i)
      g.variables.push_back(decode_variable(*vars->Get(i), i, limits));
  }
  if (const auto* ops = in->ops()) {
    g.ops.reserve(ops->size());
    for (flatbuffers::uoffset_t i = 0; i < ops->size(); ++i)
      g.ops.push_back(decode_op(*ops->Get(i), i));
  }
  g.outputs = utf8_strings(in->outputs(), "graph output");
  g.loss_variables = utf8_strings(in->loss_variables(), "loss variable");
  return g;
}

Graph decode_graph(const Bytes& bytes, const Limits& limits) {
  Graph g = detail::decode_graph_fields(bytes, limits);
  detail::check_graph(g, limits, ErrorCode::corrupt);
  return g;
}

}  // namespace modelzip::graph
