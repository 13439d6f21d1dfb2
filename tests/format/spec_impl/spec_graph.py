"""A second reader of the graph checkpoint entries, written from
schemas/GRAPH.md, graph.fbs and training.fbs alone (stdlib only).

    read_graph(entry, data) -> dict     <tag>/graph.fb
    read_training(entry, data) -> dict  <tag>/trainingConfig.fb

Field names are the schemas'; enum and union values are given by their
schema names, DataType by spec_reader's dtype names; absent fields take the
schemas' defaults. A variable whose rank is unknown has `shape` None. Named
op arguments are lists of (name, value) pairs in stored order. A schedule is
{"schedule": member name, field: value...}. The rules of GRAPH.md §1 - §3 that
concern one entry are checked; a violation raises `SpecError` (its
`unsupported` flavour `Unsupported`) naming the entry.
"""
import math
import struct

import flatbuf
from spec_reader import DTYPES, SpecError


class Unsupported(SpecError):
    """GRAPH.md §1 rules 6 and 7: modelzip's Error(unsupported)."""


MAX_RANK = 64
MAX_SCHEDULE_DEPTH = 16
VARIABLE_KINDS = ["VARIABLE", "CONSTANT", "ARRAY", "PLACEHOLDER", "SEQUENCE"]
VALUE_KINDS = ["TENSOR"]
FLOATING = {"float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
            "complex64", "complex128"}

# Updater tables by union number: (name, [(field, default)] by field id).
UPDATERS = {
    1: ("Sgd", [("learning_rate", 0.001)]),
    2: ("Nesterovs", [("learning_rate", 0.1), ("momentum", 0.9)]),
    3: ("Adam", [("learning_rate", 0.001), ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8)]),
    4: ("AdamW", [("learning_rate", 0.001), ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8),
                  ("weight_decay", 0.01)]),
    5: ("AdaMax", [("learning_rate", 0.001), ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8)]),
    6: ("AmsGrad", [("learning_rate", 0.001), ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8)]),
    7: ("Nadam", [("learning_rate", 0.001), ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-8)]),
    8: ("RmsProp", [("learning_rate", 0.1), ("rms_decay", 0.95), ("epsilon", 1e-8)]),
    9: ("AdaGrad", [("learning_rate", 0.1), ("epsilon", 1e-6)]),
    10: ("AdaDelta", [("rho", 0.95), ("epsilon", 1e-6)]),
    11: ("NoOp", []),
}
# GRAPH.md §4: updater.txt state names per updater.
STATE_NAMES = {"Sgd": [], "NoOp": [], "Nesterovs": ["V"], "Adam": ["M", "V"], "AdamW": ["M", "V"],
               "AdaMax": ["M", "V"], "Nadam": ["M", "V"], "AmsGrad": ["M", "V", "V_HAT"],
               "RmsProp": ["G"], "AdaGrad": ["grad"], "AdaDelta": ["msg", "msdx"]}
NON_NEGATIVE = {"learning_rate", "momentum", "epsilon", "weight_decay"}
UNIT_OPEN = {"beta1", "beta2"}      # [0, 1)
UNIT_CLOSED = {"rms_decay", "rho"}  # [0, 1]

# Schedule tables by union number: (name, [(field, format, default)] by field id;
# "t" is the ScheduleType byte). MapSchedule and RampSchedule are read apart.
_T = ("type", "b", 0)
SCHEDULES = {
    1: ("FixedSchedule", [("value", "d", 0.0)]),
    2: ("StepSchedule", [_T, ("initial_value", "d", 0.0), ("decay_rate", "d", 0.0),
                         ("step", "d", 1.0)]),
    3: ("ExponentialSchedule", [_T, ("initial_value", "d", 0.0), ("gamma", "d", 0.0)]),
    4: ("InverseSchedule", [_T, ("initial_value", "d", 0.0), ("gamma", "d", 0.0),
                            ("power", "d", 0.0)]),
    5: ("PolySchedule", [_T, ("initial_value", "d", 0.0), ("power", "d", 0.0),
                         ("max_iterations", "q", 1)]),
    6: ("SigmoidSchedule", [_T, ("initial_value", "d", 0.0), ("gamma", "d", 0.0),
                            ("step_size", "q", 0)]),
    7: ("CycleSchedule", [_T, ("initial_value", "d", 0.0), ("max_value", "d", 0.0),
                          ("cycle_length", "q", 2), ("annealing_length", "q", 0),
                          ("annealing_decay", "d", 1.0)]),
    8: ("MapSchedule", None),
    9: ("RampSchedule", None),
}
SCHEDULE_TYPES = ["ITERATION", "EPOCH"]
REGULARIZATION_TYPES = ["L1", "L2", "WEIGHT_DECAY"]


class _Reader:
    """Structural problems (what the FlatBuffers verifier rejects, §1 rule 4)
    raise at once. The others are collected in the order the decoding meets
    them; `finish` raises the first. For trainingConfig.fb (`two_groups`)
    decoding problems (the version, unknown enum and union values, union type
    and table that do not match, UTF-8) come before the value rules of §3
    (§1)."""

    def __init__(self, entry, two_groups):
        self.entry = entry
        self.decoding, self.rules = [], []
        self.two_groups = two_groups

    def fail(self, msg, decoding=False):
        group = self.rules if self.two_groups and not decoding else self.decoding
        group.append(SpecError(f"{self.entry}: {msg}"))

    def unsupported(self, msg):
        self.decoding.append(Unsupported(f"{self.entry}: {msg}"))

    def structure(self, msg):
        raise SpecError(f"{self.entry}: {msg}")

    def finish(self, value):
        if self.decoding or self.rules:
            raise (self.decoding or self.rules)[0]
        return value

    def _offset(self, t, pos):
        t._need(pos, 4, 4, "offset")
        return pos + struct.unpack_from("<I", t.data, pos)[0]

    def _str_at(self, t, pos, what):
        t._need(pos, 4, 4, what)
        (n,) = struct.unpack_from("<I", t.data, pos)
        t._need(pos + 4, n + 1, 1, what)  # the FlatBuffers verifier wants the terminator
        if t.data[pos + 4 + n] != 0:
            self.structure(f"{what} is not NUL-terminated")
        try:
            return bytes(t.data[pos + 4:pos + 4 + n]).decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"{what} is not valid UTF-8", decoding=True)
            return ""

    def string(self, t, index, what, required=False):
        p = t._ref(index)
        if p is None:
            if required:
                self.structure(f"{what} is missing (required)")
            return None
        return self._str_at(t, p, what)

    def _elements(self, t, index, what):
        p = t._ref(index)
        if p is None:
            return None, []
        t._need(p, 4, 4, what)
        (n,) = struct.unpack_from("<I", t.data, p)
        t._need(p + 4, 4 * n, 4, what)
        return p, [p + 4 + 4 * i for i in range(n)]

    def strings(self, t, index, what):
        _, slots = self._elements(t, index, what)
        return [self._str_at(t, self._offset(t, s), f"{what}[{i}]") for i, s in enumerate(slots)]

    def tables(self, t, index, what):
        _, slots = self._elements(t, index, what)
        return [flatbuf.Table(t.data, t.base, t.end, self._offset(t, s), t.depth + 1)
                for s in slots]

    def scalars(self, t, index, fmt, align, what):
        v = t.vector(index, fmt, align)
        return [] if v is None else v

    def enum(self, value, names, what):
        if not 0 <= value < len(names):
            self.unsupported(f"unknown {what} {value}")
            return None
        return names[value]

    def dtype(self, value, what):
        if value not in DTYPES:
            self.unsupported(f"{what}: unknown data type {value}")
            return None
        return DTYPES[value][0]


def _root(entry, data, identifier):
    data = bytes(data)
    if not 8 <= len(data) < 2**31:
        raise SpecError(f"{entry}: {len(data)} bytes is not a FlatBuffer size")
    try:
        return flatbuf.root(data, 0, len(data), identifier)
    except flatbuf.FlatBufferError as err:
        raise SpecError(f"{entry}: {err}") from None


def _version(r, t):
    v = t.scalar(0, "I", 1)
    if v > 1:
        r.unsupported(f"min_reader_version {v} is newer than 1")
    return v


def _named(r, t, names_index, values, what):
    names = r.strings(t, names_index, f"{what} names")
    if len(names) != len(values):
        r.fail(f"{what}: {len(names)} names for {len(values)} values")
    if any(not n for n in names) or len(set(names)) != len(names):
        r.fail(f"{what}: names must be non-empty and distinct")
    return list(zip(names, values))


# --------------------------------------------------------------------------
# GRAPH.md §2


def read_graph(entry, data):
    r = _Reader(entry, two_groups=False)
    try:
        return r.finish(_graph(r, _root(entry, data, b"MZGR")))
    except flatbuf.FlatBufferError as err:
        raise SpecError(f"{entry}: {err}") from None


def _graph(r, g):
    graph = {"min_reader_version": _version(r, g), "variables": [], "ops": []}
    names = set()
    for i, v in enumerate(r.tables(g, 1, "variables")):
        name = r.string(v, 0, f"variable {i} name", required=True)
        if not name or name in names:
            r.fail(f"variable name {name!r} is empty or not unique")
        names.add(name)
        kind = r.enum(v.scalar(1, "b", 0), VARIABLE_KINDS, f"variable kind of {name!r}")
        dtype = r.dtype(v.scalar(2, "b", 5), f"variable {name!r}")
        shape = r.scalars(v, 3, "q", 8, f"shape of {name!r}")
        rank_known = bool(v.scalar(4, "B", 1))
        value_kind = r.enum(v.scalar(5, "b", 0), VALUE_KINDS, f"value kind of {name!r}")
        if len(shape) > MAX_RANK:
            r.fail(f"variable {name!r}: rank {len(shape)} > {MAX_RANK}")
        if any(d < -1 for d in shape):
            r.fail(f"variable {name!r}: dimension < -1")
        if not rank_known and shape:
            r.fail(f"variable {name!r}: a shape with an unknown rank")
        if kind in ("VARIABLE", "CONSTANT") and (not rank_known or -1 in shape):
            r.fail(f"variable {name!r}: a {kind} needs a fully known shape")
        graph["variables"].append({"name": name, "kind": kind, "dtype": dtype,
                                   "shape": shape if rank_known else None,
                                   "value_kind": value_kind})
    kinds = {v["name"]: v["kind"] for v in graph["variables"]}
    op_names, produced = set(), set()
    for i, o in enumerate(r.tables(g, 2, "ops")):
        name = r.string(o, 0, f"op {i} name", required=True)
        op_type = r.string(o, 1, f"op {name!r} op_type", required=True)
        if not name or name in op_names or not op_type:
            r.fail(f"op {name!r}: empty or repeated name, or empty op_type")
        op_names.add(name)
        op = {"name": name, "op_type": op_type}
        for index, key in ((2, "inputs"), (3, "outputs"), (4, "control_deps")):
            op[key] = r.strings(o, index, f"op {name!r} {key}")
            for n in op[key]:
                if n not in kinds:
                    r.fail(f"op {name!r}: {key} names no variable: {n!r}")
        for n in op["outputs"]:
            if kinds.get(n) not in ("ARRAY", "SEQUENCE") or n in produced:
                r.fail(f"op {name!r}: output {n!r} is not an ARRAY/SEQUENCE produced once")
            produced.add(n)
        op["i_args"] = _named(r, o, 5, r.scalars(o, 6, "q", 8, "i_args"), f"op {name!r} i_args")
        op["t_args"] = _named(r, o, 7, r.scalars(o, 8, "d", 8, "t_args"), f"op {name!r} t_args")
        op["b_args"] = _named(r, o, 9, [b != 0 for b in r.scalars(o, 10, "B", 1, "b_args")],
                              f"op {name!r} b_args")
        d_args = [r.dtype(d, f"op {name!r} d_args") for d in r.scalars(o, 12, "b", 1, "d_args")]
        op["d_args"] = _named(r, o, 11, d_args, f"op {name!r} d_args")
        s_args = []
        for k, s in enumerate(r.tables(o, 13, f"op {name!r} s_args")):
            s_args.append((r.string(s, 0, f"op {name!r} s_args[{k}] name", required=True),
                           r.string(s, 1, f"op {name!r} s_args[{k}] value", required=True)))
        if any(not n for n, _ in s_args) or len({n for n, _ in s_args}) != len(s_args):
            r.fail(f"op {name!r} s_args: names must be non-empty and distinct")
        op["s_args"] = s_args
        graph["ops"].append(op)
    for n, kind in kinds.items():
        if kind == "ARRAY" and n not in produced:
            r.fail(f"ARRAY variable {n!r} is the output of no op")
    for index, key in ((3, "outputs"), (4, "loss_variables")):
        graph[key] = r.strings(g, index, key)
        if any(n not in kinds for n in graph[key]) or len(set(graph[key])) != len(graph[key]):
            r.fail(f"{key}: every name must name a variable, once")
    return graph


# --------------------------------------------------------------------------
# GRAPH.md §3


def read_training(entry, data):
    r = _Reader(entry, two_groups=True)
    try:
        return r.finish(_training(r, _root(entry, data, b"MZTC")))
    except flatbuf.FlatBufferError as err:
        raise SpecError(f"{entry}: {err}") from None


def _finite(r, value, what):
    if not math.isfinite(value):
        r.fail(f"{what} is not finite")
    return value


def _union(r, t, index, what, members):
    """(type number, table or None) of the union whose table is field `index`.
    As the FlatBuffers verifier, only the table of a known member is looked
    into; for NONE or an unknown member only its offset is checked."""
    kind = t.scalar(index - 1, "B", 0)
    p = t._ref(index)
    if p is not None:
        t._need(p, 1, 1, f"{what} table")
    table = flatbuf.Table(t.data, t.base, t.end, p, t.depth + 1) \
        if p is not None and kind in members else None
    if kind and p is None:
        r.fail(f"{what}: union type {kind} without its table", decoding=True)
    if not kind and p is not None:
        r.fail(f"{what}: a table with union type NONE", decoding=True)
    return kind, table


def _updater(r, t):
    kind, table = _union(r, t, 2, "updater", UPDATERS)
    if kind == 0:
        r.fail("the config has no updater", decoding=True)
        return {"type": None}
    if kind not in UPDATERS:
        r.unsupported(f"unknown updater {kind}")
        return {"type": None}
    if table is None:
        return {"type": UPDATERS[kind][0]}
    name, fields = UPDATERS[kind]
    out = {"type": name}
    for i, (field, default) in enumerate(fields):
        value = _finite(r, table.scalar(i, "d", default), f"{name}.{field}")
        if field in NON_NEGATIVE and value < 0 \
                or field in UNIT_OPEN and not 0 <= value < 1 \
                or field in UNIT_CLOSED and not 0 <= value <= 1:
            r.fail(f"{name}.{field} = {value} is out of range")
        out[field] = value
    return out


def _schedule(r, t, index, what, depth=1):
    kind, table = _union(r, t, index, what, SCHEDULES)
    if kind == 0:
        return None
    if kind not in SCHEDULES:
        r.unsupported(f"{what}: unknown schedule {kind}")
        return None
    if depth > MAX_SCHEDULE_DEPTH:
        r.fail(f"{what}: schedules nest deeper than {MAX_SCHEDULE_DEPTH}")
    if table is None:
        return None
    name, fields = SCHEDULES[kind]
    s = {"schedule": name}
    if name == "RampSchedule":
        s["base"] = _schedule(r, table, 1, f"{what} base", depth + 1)
        s["num_iterations"] = table.scalar(2, "q", 1)
        if s["base"] is None or s["num_iterations"] <= 0:
            r.fail(f"{what}: RampSchedule needs a base and num_iterations > 0")
        return s
    if name == "MapSchedule":
        s["type"] = r.enum(table.scalar(0, "b", 0), SCHEDULE_TYPES, f"{what} schedule type")
        p = table._ref(1)
        if p is None:
            r.structure(f"{what}: MapSchedule steps are missing (required)")
        table._need(p, 4, 4, "steps")
        (n,) = struct.unpack_from("<I", table.data, p)
        table._need(p + 4, 16 * n, 8, "steps")  # struct ScheduleStep {long, double}: 16 bytes
        steps = [struct.unpack_from("<qd", table.data, p + 4 + 16 * i) for i in range(n)]
        if not steps or steps[0][0] != 0 \
                or any(a[0] >= b[0] for a, b in zip(steps, steps[1:])):
            r.fail(f"{what}: MapSchedule steps must start at 0 and increase")
        s["steps"] = [(start, _finite(r, v, f"{what} step value")) for start, v in steps]
        return s
    for i, (field, fmt, default) in enumerate(fields):
        value = table.scalar(i, fmt, default)
        if field == "type":
            value = r.enum(value, SCHEDULE_TYPES, f"{what} schedule type")
        elif fmt == "d":
            _finite(r, value, f"{what} {name}.{field}")
        s[field] = value
    if name == "StepSchedule" and not s["step"] > 0 \
            or name == "PolySchedule" and s["max_iterations"] <= 0:
        r.fail(f"{what}: {name} out of range")
    if name == "CycleSchedule":
        # Integer division as C does it (towards zero); only values >= 1 pass.
        span = s["cycle_length"] - s["annealing_length"]
        if s["annealing_length"] < 0 or int(span / 2) < 1:
            r.fail(f"{what}: CycleSchedule lengths out of range")
    return s


def _training(r, t):
    config = {"min_reader_version": _version(r, t), "updater": _updater(r, t)}
    config["learning_rate_schedule"] = _schedule(r, t, 4, "learning_rate_schedule")
    if config["learning_rate_schedule"] and config["updater"]["type"] in ("AdaDelta", "NoOp"):
        r.fail(f"{config['updater']['type']} has no learning rate to schedule")
    config["regularization"] = []
    for i, g in enumerate(r.tables(t, 5, "regularization")):
        reg = {"type": r.enum(g.scalar(0, "b", 0), REGULARIZATION_TYPES,
                              f"regularization {i} type")}
        reg["coefficient"] = _finite(r, g.scalar(1, "d", 0.0), f"regularization {i} coefficient")
        reg["coefficient_schedule"] = _schedule(r, g, 3, f"regularization {i} schedule")
        reg["apply_learning_rate"] = bool(g.scalar(4, "B", 1))
        config["regularization"].append(reg)
    config["minimize"] = bool(t.scalar(6, "B", 1))
    for index, key in ((7, "data_set_feature_mapping"), (8, "data_set_label_mapping"),
                       (9, "data_set_feature_mask_mapping"), (10, "data_set_label_mask_mapping"),
                       (11, "loss_variables")):
        config[key] = r.strings(t, index, key)
        if any(not n for n in config[key]):
            r.fail(f"{key}: an empty name")
    config["iteration_count"] = t.scalar(12, "q", 0)
    config["epoch_count"] = t.scalar(13, "q", 0)
    if config["iteration_count"] < 0 or config["epoch_count"] < 0:
        r.fail("iteration_count and epoch_count must be >= 0")
    props = [(r.string(p, 0, f"property {i} key", required=True),
              r.string(p, 1, f"property {i} value", required=True))
             for i, p in enumerate(r.tables(t, 14, "properties"))]
    if len({k for k, _ in props}) != len(props):
        r.fail("property keys are not distinct")
    config["properties"] = props
    return config


# --------------------------------------------------------------------------
# GRAPH.md §4


class Checkpoint:
    """A tag's graph (None for a tag without graph.fb), training config
    (None without trainingConfig.fb), {name: parameter value} in params.txt
    order and {(variable, state): value} in updater.txt order."""

    def __init__(self, graph, training, params, updater):
        self.graph, self.training, self.params, self.updater = graph, training, params, updater


def read_checkpoint(archive, tag):
    """Decodes one tag of a spec_reader.SpecArchive; for a tag with a graph,
    checks the consistency rules of §4 (and the config's names against the
    graph, §3)."""
    entries = archive.entries
    graph = read_graph(f"{tag}/graph.fb", archive.read_entry(f"{tag}/graph.fb")) \
        if f"{tag}/graph.fb" in entries else None
    training = read_training(f"{tag}/trainingConfig.fb",
                             archive.read_entry(f"{tag}/trainingConfig.fb")) \
        if f"{tag}/trainingConfig.fb" in entries else None
    params, dtypes = {}, {}
    for name, blob in archive.params[tag]:
        params[name], dtypes[name] = archive.blob(blob)
    updater, state_dtypes = {}, {}
    for key, blob in archive.updater[tag]:
        updater[key], state_dtypes[key] = archive.blob(blob)
    if graph is not None:
        _check_checkpoint(f"{tag}: ", graph, training, params, dtypes, updater, state_dtypes)
    return Checkpoint(graph, training, params, updater)


def _check_checkpoint(where, graph, training, params, dtypes, updater, state_dtypes):
    def fail(msg):
        raise SpecError(where + msg)

    variables = {v["name"]: v for v in graph["variables"]}
    if training is not None:
        for key in ("data_set_feature_mapping", "data_set_label_mapping",
                    "data_set_feature_mask_mapping", "data_set_label_mask_mapping"):
            for n in training[key]:
                if variables.get(n, {}).get("kind") != "PLACEHOLDER":
                    fail(f"training config {key}: {n!r} is not a PLACEHOLDER of the graph")
        for n in training["loss_variables"]:
            if n not in variables:
                fail(f"training config loss variable {n!r} is not in the graph")
    valued = [v for v in graph["variables"] if v["kind"] in ("VARIABLE", "CONSTANT")]
    for v in valued:
        if v["name"] not in params:
            fail(f"{v['kind']} {v['name']!r} has no parameter")
        value = params[v["name"]]
        if dtypes[v["name"]] != v["dtype"] or list(getattr(value, "shape", ())) != v["shape"]:
            fail(f"parameter {v['name']!r} is not a {v['dtype']} of shape {v['shape']}")
    for name in params:
        if variables.get(name, {}).get("kind") not in ("VARIABLE", "CONSTANT"):
            fail(f"parameter {name!r} is no VARIABLE or CONSTANT of the graph")
    if updater and training is None:
        fail("updater state without a training config")
    trainable = [v["name"] for v in graph["variables"]
                 if v["kind"] == "VARIABLE" and v["dtype"] in FLOATING]
    states = STATE_NAMES[training["updater"]["type"]] if training else []
    for (name, state), value in updater.items():
        if name not in trainable or state not in states:
            fail(f"updater state {name!r} {state!r}: not a trainable variable's state")
        if state_dtypes[(name, state)] not in FLOATING \
                or list(value.shape) != variables[name]["shape"]:
            fail(f"updater state {name!r} {state!r}: wrong type or shape")
    if updater and set(updater) != {(n, s) for n in trainable for s in states}:
        fail("updater state exists for some trainable variables or states only")
