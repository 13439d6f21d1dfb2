"""schemas/GRAPH.md §4 is exact enough for a second implementation: for
graph checkpoints whose entries are each valid on their own, spec_graph
(written from the spec alone) and modelzip's verify() accept and reject the
same tags, modelzip naming the entry the broken rule concerns.

Every case is the golden checkpoint's graph (tests/golden/graph) with
parameters, updater state and a training config written here: the golden
graph has a CONSTANT `scale` float32 [2], trainable VARIABLEs `w1` [2, 2],
`b1` [2] and `w2` [2, 1] (float32), the int64 scalar VARIABLE `step` (not
trainable), PLACEHOLDERs `x`, `label`, `mask`, the SEQUENCE `history` and
ARRAYs `xs`, `h`, `y`, `loss`."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_graph  # noqa: E402
import spec_reader  # noqa: E402
import spec_writer  # noqa: E402
from spec_writer import Quantized, Typed  # noqa: E402
from test_spec_graph import patched  # noqa: E402

modelzip = pytest.importorskip("modelzip")
SOURCE = Path(os.environ.get("MODELZIP_SOURCE_DIR", Path(__file__).parents[3]))
GOLDEN = SOURCE / "tests" / "golden" / "graph" / "checkpoint-v1.zip"
# A valid finalfusion file: vocabulary {"a", "b"}, a float32 2 x 2 matrix.
FIFU = SOURCE / "tests" / "hostile" / "corpus" / "ff_valid.fifu"

TAG = "t"
TRAINABLE = {"w1": (2, 2), "b1": (2,), "w2": (2, 1)}
# Variable positions in the golden graph (for patching graph.fb).
POSITION = {"scale": 3, "w1": 4, "b1": 5, "w2": 6, "step": 7}
UPDATERS = list(spec_graph.STATE_NAMES)


class Fifu:
    """A parameter stored as an embedding (.fifu) blob."""


class Sparse:
    """A SPARSE_COO blob as modelzip writes it (spec_writer writes DENSE only)."""

    def __init__(self, tmp_path, shape, indices, values):
        path = tmp_path / "sparse.zip"
        value = modelzip.SparseCOO(np.array(indices, np.int64), np.array(values, np.float32),
                                   tuple(shape))
        with modelzip.Writer(path, durable=False) as w:
            w.add_tag("s", {"p": value})
        self.blob = spec_reader.SpecArchive(path).read_entry("s/params/0.fb")


def golden_graph():
    return spec_reader.SpecArchive(GOLDEN).read_entry("step-1/graph.fb")


def patched_graph(variable, field, fmt, value):
    """The golden graph.fb with one scalar field of one variable changed
    (field 1: kind, 2: dtype)."""
    return patched(golden_graph(), b"MZGR", [(POSITION[variable], 1), field], fmt, value)


_configs = {}


def config_entry(tmp_path, updater, **fields):
    """trainingConfig.fb as modelzip writes it: `updater` (a schema name) with
    its defaults, the golden graph's mappings, and `fields` on top."""
    config = {"updater": {"type": updater}, "feature_mapping": ["x"],
              "label_mapping": ["label"], "loss_variables": ["loss"], **fields}
    key = repr(sorted(config.items()))
    if key not in _configs:
        path = tmp_path / f"config-{len(_configs)}.zip"
        with modelzip.Writer(path, durable=False) as w:
            w.add_tag("c", {"p": np.ones(1, np.float32)}, training=config)
        _configs[key] = spec_reader.SpecArchive(path).read_entry("c/trainingConfig.fb")
    return _configs[key]


def params():
    return {"scale": np.array([1.0, 0.5], np.float32),
            "w1": np.arange(4, dtype=np.float32).reshape(2, 2),
            "b1": np.array([0.25, -0.25], np.float32),
            "w2": np.array([[1.5], [-2.0]], np.float32),
            "step": np.array(7, np.int64)}


def states(updater):
    return {(v, s): np.full(shape, 0.125, np.float32)
            for v, shape in TRAINABLE.items() for s in spec_graph.STATE_NAMES[updater]}


def write_tag(path, params, states, config, graph=None, updater_txt=True):
    """An archive holding the one tag TAG: `graph` (default: the golden
    graph.fb), `config` (trainingConfig.fb bytes or None), params.txt and,
    when `updater_txt`, updater.txt with one blob per value."""
    z = spec_writer.ZipWriter()
    z.add("modelzip.toml", b"format_version = 1\n")
    tables = {"params": [], "updater": []}
    blobs = []
    for folder, values in (("params", params), ("updater", states)):
        for n, (key, value) in enumerate(values.items()):
            keys = (key,) if folder == "params" else key
            if isinstance(value, Fifu):
                ref, blob = f"{n}.fifu", FIFU.read_bytes()
            elif isinstance(value, Sparse):
                ref, blob = str(n), value.blob
            else:
                ref, blob = str(n), spec_writer.encode_blob(value)
            tables[folder].append(" ".join([*map(spec_reader.escape, keys), ref]) + "\n")
            blobs.append((f"{TAG}/{folder}/{ref if ref.endswith('.fifu') else ref + '.fb'}",
                          blob))
    z.add(f"{TAG}/params.txt", "".join(tables["params"]).encode())
    if updater_txt:
        z.add(f"{TAG}/updater.txt", "".join(tables["updater"]).encode())
    z.add(f"{TAG}/graph.fb", golden_graph() if graph is None else graph)
    if config is not None:
        z.add(f"{TAG}/trainingConfig.fb", config)
    for name, blob in blobs:
        z.add(name, blob)
    z.add("tags.txt", f"{TAG}\n".encode())
    Path(path).write_bytes(z.finish())


def verdicts(path):
    """(spec_graph's error or None, modelzip's verify() problems)."""
    archive = spec_reader.SpecArchive(path)
    archive.verify()  # every entry is valid on its own
    try:
        spec_graph.read_checkpoint(archive, TAG)
        mine = None
    except spec_reader.SpecError as err:
        mine = err
    with modelzip.open(path) as mz:
        return mine, mz.verify()


def check_case(path, entry):
    """Both accept (`entry` None) or both reject, modelzip under `entry`."""
    mine, theirs = verdicts(path)
    if entry is None:
        assert mine is None and theirs == [], (mine, theirs)
    else:
        assert mine is not None, f"spec_graph accepts, modelzip reports {theirs}"
        assert theirs, f"modelzip accepts, spec_graph says: {mine}"
        assert {e for e, _ in theirs} == {f"{TAG}/{entry}"}, theirs
        # spec_graph rejects for a rule of the same table.
        topic = {"params.txt": "parameter", "updater.txt": "updater state",
                 "trainingConfig.fb": "training config"}[entry]
        assert topic in str(mine), (str(mine), theirs)


# --------------------------------------------------------------------------
# Every updater: its own state names, all or nothing.


@pytest.mark.parametrize("updater", UPDATERS)
def test_every_updater_with_and_without_state(tmp_path, updater):
    config = config_entry(tmp_path, updater)
    path = tmp_path / "t.zip"
    write_tag(path, params(), states(updater), config)
    check_case(path, None)
    write_tag(path, params(), {}, config)  # a fresh run: no state yet
    check_case(path, None)
    write_tag(path, params(), {}, config, updater_txt=False)
    check_case(path, None)


@pytest.mark.parametrize("updater", UPDATERS)
def test_every_updater_rejects_missing_or_foreign_state(tmp_path, updater):
    config = config_entry(tmp_path, updater)
    names = spec_graph.STATE_NAMES[updater]
    path = tmp_path / "t.zip"
    for v in TRAINABLE:  # one variable without one (or every) state
        for dropped in ([names[-1]], names) if names else []:
            s = {k: x for k, x in states(updater).items() if not (k[0] == v and k[1] in dropped)}
            write_tag(path, params(), s, config)
            check_case(path, "updater.txt")
    # A state another updater keeps (for updaters with none: any state).
    foreign = [n for n in ("M", "V", "V_HAT", "G", "grad", "msg", "msdx") if n not in names]
    for name in foreign:
        s = states(updater)
        s[("w1", name)] = np.zeros((2, 2), np.float32)
        write_tag(path, params(), s, config)
        check_case(path, "updater.txt")
    if names:  # state names are case-sensitive
        s = states(updater)
        s[("w1", names[0].swapcase())] = s.pop(("w1", names[0]))
        write_tag(path, params(), s, config)
        check_case(path, "updater.txt")


# --------------------------------------------------------------------------
# Parameters (rules 2 and 3), updater state (rules 4 to 6), the config's
# names (rule 1): one change to a consistent Adam checkpoint each. The entry
# is where modelzip reports the broken rule; None: both accept.


def drop(table, *keys):
    return lambda p, s: [table(p, s).pop(k) for k in keys]


def put(table_index, key, value):
    def edit(p, s):
        (p, s)[table_index][key] = value
    return edit


P, S = 0, 1
CASES = {
    # rule 2: every VARIABLE and CONSTANT has a parameter of its dtype and shape
    "parameter of another dtype": (put(P, "b1", np.zeros(2, np.float64)), "params.txt"),
    "int64 step stored as int32": (put(P, "step", np.array(7, np.int32)), "params.txt"),
    "parameter reshaped, same element count": (put(P, "w1", np.zeros(4, np.float32)),
                                               "params.txt"),
    "scalar stored as [1]": (put(P, "step", np.array([7], np.int64)), "params.txt"),
    "transposed parameter": (put(P, "w2", np.zeros((1, 2), np.float32)), "params.txt"),
    "VARIABLE without parameter": (drop(lambda p, s: p, "w2"), "params.txt"),
    "CONSTANT without parameter": (drop(lambda p, s: p, "scale"), "params.txt"),
    "bfloat16 parameter of a float32 variable": (
        put(P, "b1", Typed("bfloat16", np.zeros(2, np.uint16))), "params.txt"),
    "quantized parameter (its original type is the variable's)": (
        put(P, "w1", Quantized("float32", np.array([[1, -2], [3, 4]]), "affine-per-tensor",
                               "int8", scale=0.5)), None),
    "quantized parameter of another original type": (
        put(P, "w1", Quantized("float64", np.array([[1, -2], [3, 4]]), "affine-per-tensor",
                               "int8", scale=0.5)), "params.txt"),
    # rule 3: every parameter names a VARIABLE or CONSTANT, and is a tensor
    "parameter the graph lacks": (put(P, "w3", np.zeros(1, np.float32)), "params.txt"),
    "parameter for a PLACEHOLDER": (put(P, "x", np.zeros((1, 2), np.float32)), "params.txt"),
    "parameter for an ARRAY": (put(P, "h", np.zeros(2, np.float32)), "params.txt"),
    "parameter for a SEQUENCE": (put(P, "history", np.zeros(1, np.float32)), "params.txt"),
    "embedding of the variable's type and shape": (put(P, "w1", Fifu()), "params.txt"),
    # rule 5: state of trainable variables only, floating-point or complex, the
    # variable's shape, any floating-point type
    "state for a CONSTANT": (put(S, ("scale", "M"), np.zeros(2, np.float32)), "updater.txt"),
    "state for an int64 VARIABLE": (put(S, ("step", "M"), np.zeros((), np.float32)),
                                    "updater.txt"),
    "state for a PLACEHOLDER": (put(S, ("x", "M"), np.zeros((1, 2), np.float32)), "updater.txt"),
    "state for an ARRAY": (put(S, ("loss", "M"), np.zeros((), np.float32)), "updater.txt"),
    "state for a name the graph lacks": (put(S, ("w3", "M"), np.zeros(1, np.float32)),
                                         "updater.txt"),
    "state of another shape": (put(S, ("b1", "V"), np.zeros((2, 1), np.float32)),
                               "updater.txt"),
    "state reshaped, same element count": (put(S, ("w1", "M"), np.zeros(4, np.float32)),
                                           "updater.txt"),
    "int32 state": (put(S, ("w1", "V"), np.zeros((2, 2), np.int32)), "updater.txt"),
    "bool state": (put(S, ("w1", "V"), np.zeros((2, 2), bool)), "updater.txt"),
    "float64 state of a float32 variable": (put(S, ("w1", "V"), np.zeros((2, 2), np.float64)),
                                            None),
    "float16 state": (put(S, ("b1", "M"), np.zeros(2, np.float16)), None),
    "bfloat16 state": (put(S, ("b1", "M"), Typed("bfloat16", np.zeros(2, np.uint16))), None),
    "float8_e4m3fn state": (put(S, ("b1", "M"), Typed("float8_e4m3fn", np.zeros(2, np.uint8))),
                            None),
    "complex64 state of a float32 variable": (
        put(S, ("w2", "M"), np.zeros((2, 1), np.complex64)), None),
    "quantized state": (put(S, ("w1", "M"), Quantized("float32", np.array([[1, 2], [3, 4]]),
                                                       "affine-per-tensor", "int8",
                                                       scale=0.5)), None),
    # rule 6: all or nothing
    "one state missing": (drop(lambda p, s: s, ("w2", "V")), "updater.txt"),
    "a variable without state": (drop(lambda p, s: s, ("b1", "M"), ("b1", "V")),
                                 "updater.txt"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_both_judge_the_tag_alike(tmp_path, case):
    edit, entry = CASES[case]
    p, s = params(), states("Adam")
    edit(p, s)
    path = tmp_path / "t.zip"
    write_tag(path, p, s, config_entry(tmp_path, "Adam"))
    check_case(path, entry)


@pytest.mark.parametrize("shape, entry", [((2, 2), None), ((4,), "params.txt")])
def test_sparse_values(tmp_path, shape, entry):
    # A SPARSE_COO tensor has its dense shape and its values' dtype (FORMAT.md
    # §6): as a parameter and as updater state.
    sparse = Sparse(tmp_path, shape, [[0, 1]] if len(shape) == 2 else [[3]], [2.5])
    p, s = params(), states("Adam")
    p["w1"] = sparse
    path = tmp_path / "t.zip"
    write_tag(path, p, s, config_entry(tmp_path, "Adam"))
    check_case(path, entry)
    p, s = params(), states("Adam")
    s[("w1", "M")] = sparse
    write_tag(path, p, s, config_entry(tmp_path, "Adam"))
    check_case(path, entry and "updater.txt")


def test_state_requires_a_training_config(tmp_path):
    # rule 4: state without trainingConfig.fb, which names the updater.
    path = tmp_path / "t.zip"
    write_tag(path, params(), states("Adam"), None)
    check_case(path, "updater.txt")
    write_tag(path, params(), {}, None)  # an inference checkpoint
    check_case(path, None)
    write_tag(path, params(), {}, None, updater_txt=False)
    check_case(path, None)


@pytest.mark.parametrize("fields, entry", [
    ({"feature_mapping": ["w1"]}, "trainingConfig.fb"),        # not a PLACEHOLDER
    ({"label_mapping": ["nope"]}, "trainingConfig.fb"),         # not in the graph
    ({"feature_mask_mapping": ["mask"]}, None),
    ({"label_mask_mapping": ["history"]}, "trainingConfig.fb"),
    ({"loss_variables": ["nope"]}, "trainingConfig.fb"),
    ({"loss_variables": ["w1", "loss"]}, None),                # any variable of the graph
    ({"loss_variables": []}, None),                            # the graph's
], ids=lambda x: repr(x))
def test_config_names_against_the_graph(tmp_path, fields, entry):
    # rule 1 (§3's rules against the graph).
    path = tmp_path / "t.zip"
    write_tag(path, params(), states("Adam"), config_entry(tmp_path, "Adam", **fields))
    check_case(path, entry)


# --------------------------------------------------------------------------
# Which variables are trainable (§2.1): changed in graph.fb.


COMPLEX64, BOOL, FLOAT8_E5M2, HALF, FLOAT, UTF8 = 20, 1, 19, 3, 5, 50
CONSTANT = 1


@pytest.mark.parametrize("name, patch, value, state_of_w1, entry", [
    # A complex VARIABLE is trainable: it needs state, which may be complex
    # or real (rule 5: the state's type need not equal the variable's).
    ("complex w1, complex state", (2, "b", COMPLEX64), np.ones((2, 2), np.complex64),
     np.zeros((2, 2), np.complex64), None),
    ("complex w1, float32 state", (2, "b", COMPLEX64), np.ones((2, 2), np.complex64),
     np.zeros((2, 2), np.float32), None),
    ("complex w1 without state", (2, "b", COMPLEX64), np.ones((2, 2), np.complex64),
     None, "updater.txt"),
    ("float16 w1 without state", (2, "b", HALF), np.ones((2, 2), np.float16), None,
     "updater.txt"),
    ("float8_e5m2 w1, float32 state", (2, "b", FLOAT8_E5M2),
     Typed("float8_e5m2", np.zeros((2, 2), np.uint8)), np.zeros((2, 2), np.float32), None),
    # A bool VARIABLE, or w1 as a CONSTANT, is not trainable: no state.
    ("bool w1 without state", (2, "b", BOOL), np.ones((2, 2), bool), None, None),
    ("bool w1 with state", (2, "b", BOOL), np.ones((2, 2), bool),
     np.zeros((2, 2), np.float32), "updater.txt"),
    ("string w1 without state", (2, "b", UTF8), np.array([["a", "b"], ["", "d"]], object),
     None, None),
    ("string w1 with state", (2, "b", UTF8), np.array([["a", "b"], ["", "d"]], object),
     np.zeros((2, 2), np.float32), "updater.txt"),
    ("w1 a CONSTANT without state", (1, "b", CONSTANT), np.ones((2, 2), np.float32), None,
     None),
    ("w1 a CONSTANT with state", (1, "b", CONSTANT), np.ones((2, 2), np.float32),
     np.zeros((2, 2), np.float32), "updater.txt"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_trainable_follows_kind_and_dtype(tmp_path, name, patch, value, state_of_w1, entry):
    graph = patched_graph("w1", *patch)
    p = params()
    p["w1"] = value
    s = {k: v for k, v in states("Adam").items() if k[0] != "w1"}
    if state_of_w1 is not None:
        s[("w1", "M")] = state_of_w1
        s[("w1", "V")] = state_of_w1
    path = tmp_path / "t.zip"
    write_tag(path, p, s, config_entry(tmp_path, "Adam"), graph=graph)
    check_case(path, entry)


@pytest.mark.parametrize("with_state", [True, False])
def test_a_trainable_scalar(tmp_path, with_state):
    # `step` made float32: a trainable scalar, whose state is a scalar too.
    graph = patched_graph("step", 2, "b", FLOAT)
    p = params()
    p["step"] = np.array(7, np.float32)
    s = states("Adam")
    if with_state:
        s[("step", "M")] = np.zeros((), np.float32)
        s[("step", "V")] = np.zeros((), np.float64)
    path = tmp_path / "t.zip"
    write_tag(path, p, s, config_entry(tmp_path, "Adam"), graph=graph)
    check_case(path, None if with_state else "updater.txt")
    if with_state:  # a state of shape [1] for the scalar
        s[("step", "V")] = np.zeros(1, np.float32)
        write_tag(path, p, s, config_entry(tmp_path, "Adam"), graph=graph)
        check_case(path, "updater.txt")


def test_golden_tags_and_tags_without_graph(tmp_path):
    # The golden checkpoint passes both; a tag without graph.fb is not subject
    # to §4 (its state needs no config, its parameters no variables).
    with modelzip.open(GOLDEN) as mz:
        assert mz.verify() == []
    path = tmp_path / "plain.zip"
    z = spec_writer.ZipWriter()
    z.add("modelzip.toml", b"format_version = 1\n")
    z.add("p/params.txt", b"anything 0\n")
    z.add("p/updater.txt", b"anything whatever 0\n")
    z.add("p/params/0.fb", spec_writer.encode_blob(np.zeros(3, np.int8)))
    z.add("p/updater/0.fb", spec_writer.encode_blob(np.zeros(5, np.int32)))
    z.add("tags.txt", b"p\n")
    path.write_bytes(z.finish())
    archive = spec_reader.SpecArchive(path)
    assert spec_graph.read_checkpoint(archive, "p").graph is None
    with modelzip.open(path) as mz:
        assert mz.verify() == []
