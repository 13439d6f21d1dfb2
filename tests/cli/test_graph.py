"""`modelzip graph` and `modelzip info` on the committed golden graph
checkpoint (tests/golden/graph/checkpoint-v1.zip). Expectations are written
by hand from the inputs in tests/graph/make_golden.cpp."""
import json
import os
import re
import shutil
import subprocess
import zipfile

import pytest

from conftest import SOURCE_DIR, run

GOLDEN = os.path.join(SOURCE_DIR, "tests", "golden", "graph", "checkpoint-v1.zip")

VARIABLES = [  # name, kind, dtype, shape (None: unknown rank)
    ("x", "placeholder", "float32", [-1, 2]),
    ("label", "placeholder", "float32", [-1, 1]),
    ("mask", "placeholder", "bool", None),
    ("scale", "constant", "float32", [2]),
    ("w1", "variable", "float32", [2, 2]),
    ("b1", "variable", "float32", [2]),
    ("w2", "variable", "float32", [2, 1]),
    ("step", "variable", "int64", []),
    ("history", "sequence", "float32", None),
    ("xs", "array", "float32", None),
    ("h", "array", "float32", None),
    ("y", "array", "float32", None),
    ("loss", "array", "float32", None),
]

OPS = [  # name, type, inputs, outputs
    ("scale_x", "multiply", ["x", "scale"], ["xs"]),
    ("dense1", "linear", ["xs", "w1", "b1"], ["h"]),
    ("dense2", "matmul", ["h", "w2"], ["y"]),
    ("mse", "mean_squared_error", ["y", "label"], ["loss"]),
    ("record", "list_append", ["loss"], ["history"]),
]


@pytest.fixture
def golden(tmp_path):
    # A copy: readers must not need write access, but keep the source tree clean.
    path = tmp_path / "golden.zip"
    shutil.copyfile(GOLDEN, path)
    return path


def test_graph_json(golden):
    g = json.loads(run("graph", golden, "--json").stdout)
    assert [(v["name"], v["kind"], v["dtype"], v["shape"]) for v in g["variables"]] == \
        [tuple(v) for v in VARIABLES]
    assert [(o["name"], o["type"], o["inputs"], o["outputs"]) for o in g["ops"]] == \
        [tuple(o) for o in OPS]
    ops = {o["name"]: o for o in g["ops"]}
    assert ops["dense1"]["b_args"] == {"transposeA": False}
    assert ops["dense1"]["s_args"] == {"activation": "tanh"}
    assert ops["dense2"]["t_args"] == {"alpha": 1.5, "fill": "NaN"}
    assert ops["dense2"]["d_args"] == {"dtype": "bfloat16"}
    assert ops["mse"]["i_args"] == {"reduction": 3, "dimension": -1}
    assert g["outputs"] == ["y"] and g["loss_variables"] == ["loss"]


def test_graph_dot_has_every_edge(golden):
    dot = run("graph", golden, "--dot").stdout.decode()
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    edges = set(re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', dot, re.M))
    want = set()
    for name, _, inputs, outputs in OPS:
        want |= {("v:" + i, "op:" + name) for i in inputs}
        want |= {("op:" + name, "v:" + o) for o in outputs}
    want.add(("v:mask", "op:mse"))  # mse's control dependency
    assert edges == want
    assert re.search(r'^\s*"v:mask" -> "op:mse" \[style=dashed\];$', dot, re.M)
    nodes = set(re.findall(r'^\s*"([^"]+)" \[label=', dot, re.M))
    assert nodes == {"v:" + v[0] for v in VARIABLES} | {"op:" + o[0] for o in OPS}
    # Graphviz itself accepts it (graphviz is a test dependency).
    assert shutil.which("dot"), "install graphviz"
    subprocess.run(["dot", "-Tsvg"], input=dot.encode(), check=True, capture_output=True)


def test_graph_usage_and_missing_graph(golden, quickstart_archive):
    assert run("graph", golden, "--json", "--dot", check=False).returncode == 2
    p = run("graph", quickstart_archive, check=False)
    assert p.returncode != 0 and b"graph.fb" in p.stderr


def test_info_json(golden):
    info = json.loads(run("info", golden, "--tag", "step-2", "--json").stdout)
    assert info["tag"] == "step-2" and info["tags"] == 3
    assert info["metadata"]["model_name"] == "golden-mlp"
    assert info["params"]["count"] == 5  # scale, w1, b1, w2, step
    assert info["updater"]["count"] == 6  # M and V of w1, b1, w2
    g = info["graph"]
    assert g["variables"] == 13 and g["ops"] == 5
    assert g["kinds"] == {"placeholder": 3, "constant": 1, "variable": 4, "sequence": 1,
                          "array": 4}
    assert g["outputs"] == ["y"] and g["loss_variables"] == ["loss"]
    t = info["training"]
    assert t["updater"]["type"] == "AdamW"
    assert t["iteration_count"] == 2 and t["epoch_count"] == 1
    assert t["minimize"] is True
    assert [r["type"] for r in t["regularization"]] == ["l1", "l2", "weight_decay"]
    assert t["properties"] == {"seed": "20240601", "data.position": "8"}
    export = json.loads(run("info", golden, "--json").stdout)
    assert export["tag"] == "export" and export["training"] is None and export["updater"] is None


def with_entries(src, dst, replaced):
    """A copy of the zip `src` at `dst` with the entries in `replaced` (name ->
    bytes) rewritten, every entry stored."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, replaced.get(info.filename, zin.read(info.filename)))


def test_verify_applies_the_checkpoint_rules(golden, tmp_path):
    # Each entry valid on its own, the tag not: params.txt gives w1 the blob of
    # w2 and w2 that of w1 (GRAPH.md section 4). verify reports both rows.
    assert run("verify", golden).stdout.decode().endswith(": OK\n")
    bad = tmp_path / "swapped.zip"
    with_entries(golden, bad, {"step-1/params.txt": b"scale 0\nw1 3\nb1 2\nw2 1\nstep 4\n"})
    p = run("verify", bad, check=False)
    assert p.returncode == 1, p.stdout
    assert p.stdout.decode().splitlines() == [
        f"{bad}: entry 'step-1/params.txt': parameter 'w1' has shape [2, 1], "
        "but variable 'w1' (float32 [2, 2]) does not",
        f"{bad}: entry 'step-1/params.txt': parameter 'w2' has shape [2, 2], "
        "but variable 'w2' (float32 [2, 1]) does not",
        f"{bad}: 2 problem(s)",
    ]
    # Updater state for a variable that is not trainable (step is int64).
    bad = tmp_path / "state.zip"
    with_entries(golden, bad, {"step-1/updater.txt": b"w1 M 0\nw1 V 1\nb1 M 2\nb1 V 3\n"
                                                     b"w2 M 4\nw2 V 5\nstep M 4\n"})
    p = run("verify", bad, "--quiet", check=False)
    assert p.returncode == 1
    assert p.stdout.decode() == (
        f"{bad}: entry 'step-1/updater.txt': updater state for 'step', a variable of type int64 "
        "(only trainable variables: floating-point or complex VARIABLEs have updater state)\n")


def test_graph_of_a_tag_without_one_names_the_tag_once(quickstart_archive):
    # It said "entry 'step-2/graph.fb': tag 'step-2' has no graph.fb (not a graph checkpoint)".
    p = run("graph", quickstart_archive, check=False)
    assert p.returncode == 1 and p.stderr.decode() == (
        f"modelzip: {quickstart_archive}: entry 'step-2/graph.fb': no such entry: the tag is "
        "not a graph checkpoint\n")
