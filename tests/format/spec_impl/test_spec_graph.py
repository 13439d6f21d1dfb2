"""schemas/GRAPH.md, graph.fbs and training.fbs are exact enough for a second
implementation: spec_graph, written from them alone, decodes the graph,
training configuration and updater state of checkpoints that modelzip wrote
as modelzip reports them, and rejects what both must reject."""
import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flatbuf  # noqa: E402
import spec_graph  # noqa: E402
import spec_reader  # noqa: E402
import spec_writer  # noqa: E402

modelzip = pytest.importorskip("modelzip")
CLI = os.environ.get("MODELZIP_CLI", "modelzip")
SOURCE = Path(os.environ.get("MODELZIP_SOURCE_DIR", Path(__file__).parents[3]))
GOLDEN = SOURCE / "tests" / "golden" / "graph" / "checkpoint-v1.zip"


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


# The shapes modelzip reports (`modelzip graph --json`, Archive.training_config())
# from spec_graph's schema-named dicts.


def cli_graph(graph):
    def arg(v):
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    ops = []
    for op in graph["ops"]:
        o = {"name": op["name"], "type": op["op_type"], "inputs": op["inputs"],
             "outputs": op["outputs"]}
        if op["control_deps"]:
            o["control_deps"] = op["control_deps"]
        for key in ("i_args", "t_args", "b_args", "d_args", "s_args"):
            if op[key]:
                o[key] = {n: arg(v) for n, v in op[key]}
        ops.append(o)
    return {"variables": [{"name": v["name"], "kind": v["kind"].lower(), "dtype": v["dtype"],
                           "shape": v["shape"]} for v in graph["variables"]],
            "ops": ops, "outputs": graph["outputs"], "loss_variables": graph["loss_variables"]}


def reported_schedule(s):
    if s is None:
        return None
    out = {"schedule": s["schedule"]}
    for key, value in s.items():
        if key == "type":
            out[key] = value.lower()
        elif key == "base":
            out[key] = reported_schedule(value)
        elif key == "steps":
            out[key] = [{"start": a, "value": v} for a, v in value]
        elif key != "schedule":
            out[key] = value
    return out


def reported_training(c):
    return {
        "updater": c["updater"],
        "learning_rate_schedule": reported_schedule(c["learning_rate_schedule"]),
        "regularization": [
            {"type": g["type"].lower(),
             "coefficient": reported_schedule(g["coefficient_schedule"])
             or {"schedule": "FixedSchedule", "value": g["coefficient"]},
             "apply_learning_rate": g["apply_learning_rate"]} for g in c["regularization"]],
        "minimize": c["minimize"],
        "feature_mapping": c["data_set_feature_mapping"],
        "label_mapping": c["data_set_label_mapping"],
        "feature_mask_mapping": c["data_set_feature_mask_mapping"],
        "label_mask_mapping": c["data_set_label_mask_mapping"],
        "loss_variables": c["loss_variables"],
        "iteration_count": c["iteration_count"], "epoch_count": c["epoch_count"],
        "properties": dict(c["properties"]),
    }


def same_dicts(a, b):
    assert a == b


def test_golden_checkpoint():
    archive = spec_reader.SpecArchive(GOLDEN)
    archive.verify()
    with modelzip.open(GOLDEN) as mz:
        for tag in archive.tags:
            cp = spec_graph.read_checkpoint(archive, tag)
            got = cli("graph", GOLDEN, "--tag", tag, "--json")
            assert got.returncode == 0, got.stderr
            same_dicts(cli_graph(cp.graph), json.loads(got.stdout))
            reported = mz.training_config(tag)
            if cp.training is None:
                assert reported is None
            else:
                same_dicts(reported_training(cp.training), reported)
            states = {(p.name, p.state): p for p in mz.updater_states(tag)}
            assert list(states) == list(cp.updater)
            for key, value in cp.updater.items():
                mine = np.asarray(value)
                theirs = mz.updater_state(*key, tag)
                assert mine.dtype == theirs.dtype and mine.tobytes() == theirs.tobytes()
                assert list(states[key].shape) == list(mine.shape)
            params = mz.load(tag)
            assert list(cp.params) == list(params)
            for name, value in cp.params.items():
                assert np.asarray(value).tobytes() == np.asarray(params[name]).tobytes()
        # The golden file has the graph's tag without training state (export).
        assert any(spec_graph.read_checkpoint(archive, t).training is None for t in archive.tags)


SCHEDULES = [
    {"schedule": "FixedSchedule", "value": 0.25},
    {"schedule": "StepSchedule", "type": "epoch", "initial_value": 0.1, "decay_rate": 0.5,
     "step": 3.0},
    {"schedule": "ExponentialSchedule", "type": "iteration", "initial_value": 0.1,
     "gamma": 0.99},
    {"schedule": "InverseSchedule", "type": "iteration", "initial_value": 0.1, "gamma": 0.5,
     "power": 2.0},
    {"schedule": "PolySchedule", "type": "epoch", "initial_value": 0.1, "power": 1.5,
     "max_iterations": 1000},
    {"schedule": "SigmoidSchedule", "type": "iteration", "initial_value": 0.1, "gamma": 0.5,
     "step_size": 7},
    {"schedule": "CycleSchedule", "type": "iteration", "initial_value": 0.01, "max_value": 0.1,
     "cycle_length": 100, "annealing_length": 10, "annealing_decay": 0.9},
    {"schedule": "MapSchedule", "type": "epoch",
     "steps": [{"start": 0, "value": 0.1}, {"start": 5, "value": 0.01}]},
    {"schedule": "RampSchedule", "num_iterations": 4,
     "base": {"schedule": "RampSchedule", "num_iterations": 2,
              "base": {"schedule": "FixedSchedule", "value": 1.0}}},
]
UPDATERS = [
    {"type": "Sgd", "learning_rate": 0.5},
    {"type": "Nesterovs", "learning_rate": 0.1, "momentum": 0.8},
    {"type": "Adam", "learning_rate": 0.001, "beta1": 0.0, "beta2": 0.5, "epsilon": 1e-6},
    {"type": "AdamW", "learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
     "weight_decay": 0.1},
    {"type": "AdaMax", "learning_rate": 0.002, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
    {"type": "AmsGrad", "learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
    {"type": "Nadam", "learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
    {"type": "RmsProp", "learning_rate": 0.1, "rms_decay": 1.0, "epsilon": 1e-8},
    {"type": "AdaGrad", "learning_rate": 0.1, "epsilon": 1e-6},
    {"type": "AdaDelta", "rho": 0.0, "epsilon": 1e-6},
    {"type": "NoOp"},
]


@pytest.mark.parametrize("updater", UPDATERS, ids=lambda u: u["type"])
def test_every_updater_and_schedule(tmp_path, updater):
    path = tmp_path / "t.zip"
    with_lr = updater["type"] not in ("AdaDelta", "NoOp")
    config = {
        "updater": updater,
        "learning_rate_schedule": SCHEDULES[len(updater) % len(SCHEDULES)] if with_lr else None,
        "regularization": [{"type": t, "coefficient": s, "apply_learning_rate": i % 2 == 0}
                           for i, (t, s) in enumerate(zip(["l1", "l2", "weight_decay"] * 3,
                                                          SCHEDULES))],
        "minimize": False, "feature_mapping": ["x"], "label_mapping": ["y", "z"],
        "feature_mask_mapping": [], "label_mask_mapping": ["m"], "loss_variables": ["loss"],
        "iteration_count": 2**62, "epoch_count": 3, "properties": {"k": "v", "\u00e9": ""},
    }
    with modelzip.Writer(path, durable=False) as w:
        w.add_tag("t", {"w": np.ones(2, np.float32)}, training=config)
    archive = spec_reader.SpecArchive(path)
    entry = "t/trainingConfig.fb"
    mine = spec_graph.read_training(entry, archive.read_entry(entry))
    with modelzip.open(path) as mz:
        same_dicts(reported_training(mine), mz.training_config("t"))


def ramps(n):
    """A chain of n schedules: n - 1 RampSchedules around a FixedSchedule."""
    s = {"schedule": "FixedSchedule", "value": 0.1}
    for _ in range(n - 1):
        s = {"schedule": "RampSchedule", "num_iterations": 2, "base": s}
    return s


def test_schedules_nest_16_deep(tmp_path):
    # §3: a chain of 16 schedules, the outermost counted, and no more.
    path = tmp_path / "t.zip"
    config = {"updater": {"type": "Sgd"}, "learning_rate_schedule": ramps(16)}
    with modelzip.Writer(path, durable=False) as w:
        w.add_tag("t", {"w": np.ones(1, np.float32)}, training=config)
    archive = spec_reader.SpecArchive(path)
    entry = "t/trainingConfig.fb"
    mine = spec_graph.read_training(entry, archive.read_entry(entry))
    with modelzip.open(path) as mz:
        same_dicts(reported_training(mine), mz.training_config("t"))
    config["learning_rate_schedule"] = ramps(17)
    with pytest.raises(modelzip.InvalidArgumentError, match="deep"):
        with modelzip.Writer(path, durable=False) as w:
            w.add_tag("u", {"w": np.ones(1, np.float32)}, training=config)


def test_torch_training_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    import modelzip.torch as mzt

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.1, amsgrad=True)
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    path = tmp_path / "run.zip"
    mzt.save_checkpoint(path, "step-1", model, optimizer, epoch=2)
    archive = spec_reader.SpecArchive(path)
    assert "step-1/graph.fb" not in archive.entries  # §4.1: a tag without a graph
    mine = spec_graph.read_training("x", archive.read_entry("step-1/trainingConfig.fb"))
    with modelzip.open(path) as mz:
        same_dicts(reported_training(mine), mz.training_config("step-1"))
    props = dict(mine["properties"])
    assert mine["updater"]["type"] == "AmsGrad" and props["torch.updater_exact"] == "true"
    assert [(g["type"], g["coefficient"]) for g in mine["regularization"]] == [("L2", 0.1)]
    assert mine["iteration_count"] == 1 and mine["epoch_count"] == 2
    # §4.1: updater.txt rows are NAME KEY, torch's state keys, values as torch has them.
    state = optimizer.state_dict()["state"]
    names = [n for n, _ in model.named_parameters()]
    groups = json.loads(props["torch.param_groups"])
    assert groups[0]["params"] == names
    tensors = archive.updater_tensors("step-1")
    for i, name in enumerate(names):
        for key, value in state[i].items():
            assert np.array_equal(tensors[(name, key)], value.numpy())


# Rejections: one field of a modelzip-written entry changed in place (every
# scalar is written explicitly, GRAPH.md §1), then read by both.


def patched(entry_bytes, identifier, path, fmt, value):
    """The entry with one scalar field replaced. `path`: steps ("table",
    field) into a table field or (i, field) into element i of a vector of
    tables, then the scalar's field index."""
    data = bytearray(entry_bytes)
    t = flatbuf.root(bytes(data), 0, len(data), identifier)
    for kind, index in path[:-1]:
        if kind == "table":
            t = t.table(index)
        else:
            slot = t._ref(index) + 4 + 4 * kind
            t = flatbuf.Table(t.data, t.base, t.end,
                              slot + struct.unpack_from("<I", t.data, slot)[0], t.depth + 1)
    pos = t.field_pos(path[-1], struct.calcsize("<" + fmt))
    assert pos is not None
    struct.pack_into("<" + fmt, data, pos, value)
    return bytes(data)


def rewrite(src, dst, entry, data):
    z = spec_writer.ZipWriter()
    archive = spec_reader.SpecArchive(src)
    for name in archive.entries:
        z.add(name, data if name == entry else archive.read_entry(name))
    Path(dst).write_bytes(z.finish())


TRAINING_CASES = {
    # (path to the field, format, value, modelzip's code)
    "min_reader_version 2": ([0], "I", 2, "unsupported"),
    "unknown updater 12": ([1], "B", 12, "unsupported"),
    "no updater": ([1], "B", 0, "corrupt"),
    "beta1 = 1": ([("table", 2), 1], "d", 1.0, "corrupt"),
    "negative learning rate": ([("table", 2), 0], "d", -1.0, "corrupt"),
    "epsilon inf": ([("table", 2), 3], "d", math.inf, "corrupt"),
    "unknown schedule 10": ([3], "B", 10, "unsupported"),
    "ramp of nothing": ([("table", 4), 0], "B", 0, "corrupt"),
    "ramp num_iterations 0": ([("table", 4), 2], "q", 0, "corrupt"),
    "step 0": ([("table", 4), ("table", 1), 3], "d", 0.0, "corrupt"),
    "unknown schedule type": ([("table", 4), ("table", 1), 0], "b", 2, "unsupported"),
    "regularization type 3": ([(0, 5), 0], "b", 3, "unsupported"),
    "negative epoch count": ([13], "q", -1, "corrupt"),
    # A schedule table whose union type says NONE (§3).
    "schedule with type NONE": ([3], "B", 0, "corrupt"),
    # The FlatBuffers verifier: an offset field holding 0 (§1 rule 4).
    "offset 0": ([7], "I", 0, "corrupt"),
}


def check_both_reject_training(tmp_path, data, code):
    """trainingConfig.fb `data` in the golden archive: the spec reader and
    modelzip both refuse it, modelzip with `code`, the spec reader with
    Unsupported exactly when `code` is "unsupported"."""
    entry = "step-1/trainingConfig.fb"
    with pytest.raises(spec_reader.SpecError) as mine:
        spec_graph.read_training(entry, data)
    path = tmp_path / "bad.zip"
    rewrite(GOLDEN, path, entry, data)
    with modelzip.open(path) as mz:
        with pytest.raises(modelzip.Error) as theirs:
            mz.training_config("step-1")
    assert theirs.value.code == code
    assert (mine.type is spec_graph.Unsupported) == (code == "unsupported"), mine.value


@pytest.mark.parametrize("case", list(TRAINING_CASES))
def test_both_reject_training_config(tmp_path, case):
    field, fmt, value, code = TRAINING_CASES[case]
    raw = spec_reader.SpecArchive(GOLDEN).read_entry("step-1/trainingConfig.fb")
    check_both_reject_training(tmp_path, patched(raw, b"MZTC", field, fmt, value), code)


def test_verifier_rules_not_stricter_than_flatbuffers(tmp_path):
    # §1 rule 4: the table size in a vtable is not checked (fields are, against
    # the buffer), and a vtable of size 2 has every field absent.
    entry = "step-1/trainingConfig.fb"
    raw = bytearray(spec_reader.SpecArchive(GOLDEN).read_entry(entry))
    root = flatbuf.root(bytes(raw), 0, len(raw), b"MZTC")
    struct.pack_into("<H", raw, root.vt + 2, 0)
    updater = root.table(2)
    struct.pack_into("<H", raw, updater.vt, 2)  # AdamW with every hyperparameter default
    data = bytes(raw)
    mine = spec_graph.read_training(entry, data)
    assert mine["updater"] == {"type": "AdamW", "learning_rate": 0.001, "beta1": 0.9,
                               "beta2": 0.999, "epsilon": 1e-8, "weight_decay": 0.01}
    path = tmp_path / "t.zip"
    rewrite(GOLDEN, path, entry, data)
    with modelzip.open(path) as mz:
        same_dicts(reported_training(mine), mz.training_config("step-1"))


@pytest.mark.parametrize("first, second, code", [
    # Verification (§1 rule 4) before any field: an unknown updater, then an
    # offset 0 in a later field.
    (([1], "B", 12), ([7], "I", 0), "corrupt"),
    # Then decoding problems before value rules: an unknown regularization
    # type (field 5) wins over a ramp of 0 iterations (field 4), an unknown
    # schedule over a negative epoch count.
    (([("table", 4), 2], "q", 0), ([(0, 5), 0], "b", 3), "unsupported"),
    (([3], "B", 10), ([13], "q", -1), "unsupported"),
    # Among value rules the first met: a ramp of 0 iterations (field 4)
    # before a negative epoch count (field 13) - both corrupt, and among
    # decoding problems: a table under union type NONE before an unknown
    # regularization type.
    (([("table", 4), 2], "q", 0), ([13], "q", -1), "corrupt"),
    (([3], "B", 0), ([(0, 5), 0], "b", 3), "corrupt"),
])
def test_first_problem_wins(tmp_path, first, second, code):
    data = spec_reader.SpecArchive(GOLDEN).read_entry("step-1/trainingConfig.fb")
    for field, fmt, value in (first, second):
        data = patched(data, b"MZTC", field, fmt, value)
    check_both_reject_training(tmp_path, data, code)


def test_graph_reports_the_first_problem_met(tmp_path):
    # §1: variable 'scale' (3) breaks a rule before variable 'xs' (9) has an
    # unknown data type: the rule is reported.
    entry = "step-1/graph.fb"
    data = spec_reader.SpecArchive(GOLDEN).read_entry(entry)
    data = patched(data, b"MZGR", [(3, 1), 4], "B", 0)
    data = patched(data, b"MZGR", [(9, 1), 2], "b", 2)
    with pytest.raises(spec_reader.SpecError) as mine:
        spec_graph.read_graph(entry, data)
    assert mine.type is not spec_graph.Unsupported and "'scale'" in str(mine.value)
    path = tmp_path / "bad.zip"
    rewrite(GOLDEN, path, entry, data)
    with modelzip.open(path) as mz:
        assert "'scale'" in mz.verify()[0][1]


GRAPH_CASES = {
    "min_reader_version 2": ([0], "I", 2, "unsupported"),
    "unknown variable kind": ([(3, 1), 1], "b", 5, "unsupported"),
    "unknown value kind": ([(3, 1), 5], "b", 1, "unsupported"),
    "data type 2": ([(3, 1), 2], "b", 2, "unsupported"),
    "constant of unknown rank": ([(3, 1), 4], "B", 0, "corrupt"),
    "op output that is a placeholder": ([(9, 1), 1], "b", 3, "corrupt"),
}


@pytest.mark.parametrize("case", list(GRAPH_CASES))
def test_both_reject_graph(tmp_path, case):
    field, fmt, value, code = GRAPH_CASES[case]
    entry = "step-1/graph.fb"
    raw = spec_reader.SpecArchive(GOLDEN).read_entry(entry)
    data = patched(raw, b"MZGR", field, fmt, value)
    with pytest.raises(spec_reader.SpecError) as mine:
        spec_graph.read_graph(entry, data)
    path = tmp_path / "bad.zip"
    rewrite(GOLDEN, path, entry, data)
    got = cli("graph", path, "--tag", "step-1", "--json")
    assert got.returncode == 1 and "entry 'step-1/graph.fb'" in got.stderr, got.stderr
    with modelzip.open(path) as mz:
        assert [entry for entry, _ in mz.verify()] == [entry]
    # §1: a commit decodes the entries of the tags it adds, not the kept ones.
    with modelzip.Writer(path, durable=False) as w:
        w.add_tag("new", {"w": np.ones(1, np.float32)})
    with modelzip.open(path) as mz:
        assert mz.tags[-1] == "new" and [e for e, _ in mz.verify()] == [entry]
    # The CLI does not print the code: §1 rules 6 and 7 say which are unsupported.
    assert (mine.type is spec_graph.Unsupported) == (code == "unsupported"), mine.value
