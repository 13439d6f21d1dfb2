"""Writer: tags, dedup, sharing, removal, metadata, updater state, progress, context manager."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import modelzip
from conftest import CLI, save


def arrays(seed):
    rng = np.random.default_rng(seed)
    return {"emb": rng.standard_normal((100, 16)).astype(np.float32),
            "fc.weight": rng.standard_normal((16, 4)).astype(np.float32),
            "fc.bias": np.zeros(4, np.float32)}


def test_dedup_shares_equal_arrays_across_tags(archive_path):
    first = arrays(1)
    s1 = save(archive_path, "step-1", first)
    assert (s1.blobs_written, s1.blobs_deduplicated) == (3, 0)
    second = dict(first, **{"fc.bias": np.full(4, 0.5, np.float32)})
    s2 = save(archive_path, "step-2", {k: v.copy() for k, v in second.items()})  # equal, not same
    assert (s2.blobs_written, s2.blobs_deduplicated) == (1, 2)
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["step-1", "step-2"] and ar.newest_tag == "step-2"
        infos = {p.name: p for p in ar.params()}
        assert infos["emb"].shared and infos["emb"].owner_tag == "step-1"
        assert infos["emb"].blob == ar.param("emb", "step-1").blob
        assert infos["fc.weight"].shared
        assert not infos["fc.bias"].shared and infos["fc.bias"].owner_tag == "step-2"
        # A shared parameter loads the very same mapped bytes as in the first tag.
        assert np.shares_memory(ar.tensor("emb"), ar.tensor("emb", "step-1"))
        np.testing.assert_array_equal(ar.tensor("fc.bias"), second["fc.bias"])
        np.testing.assert_array_equal(ar.tensor("fc.bias", "step-1"), first["fc.bias"])
        assert ar.verify() == []


def test_dedup_off_writes_every_blob(archive_path):
    a = arrays(2)
    save(archive_path, "a", a)
    stats = save(archive_path, "b", a, dedup=False)
    assert (stats.blobs_written, stats.blobs_deduplicated) == (3, 0)
    assert not any(p.shared for p in modelzip.open(archive_path).params())


def test_explicit_share(archive_path):
    a = arrays(3)
    save(archive_path, "base", a)
    stats = save(archive_path, "head", {"fc.bias": np.ones(4, np.float32)},
                 share={"embedding": ("base", "emb"), "w": ("BASE", "fc.weight")})
    assert stats.blobs_written == 1
    with modelzip.open(archive_path) as ar:
        assert [p.name for p in ar.params()] == ["fc.bias", "embedding", "w"]
        assert ar.param("embedding").shared and ar.param("embedding").owner_tag == "base"
        np.testing.assert_array_equal(ar.tensor("embedding"), a["emb"])
        np.testing.assert_array_equal(ar.tensor("w"), a["fc.weight"])
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "bad", {}, share={"x": ("base", "missing")})
    assert "missing" in str(e.value)


def test_remove_tag_keeps_shared_blobs(archive_path):
    a = arrays(4)
    save(archive_path, "one", a)
    save(archive_path, "two", dict(a, extra=np.arange(3)))
    modelzip.remove_tag(archive_path, "ONE", durable=False)  # tags ignore case
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["two"]
        assert not any(p.shared for p in ar.params())
        for name, value in a.items():
            np.testing.assert_array_equal(ar.tensor(name), value)
        assert ar.verify() == []
    with pytest.raises(modelzip.NotFoundError):
        modelzip.remove_tag(archive_path, "one")


def test_find_tag_and_case(archive_path):
    save(archive_path, "Epoch-3", {"x": np.zeros(1)})
    with modelzip.open(archive_path) as ar:
        assert ar.find_tag("epoch-3") == "Epoch-3"
        assert ar.find_tag("nope") is None
        assert ar.load("EPOCH-3")["x"].tolist() == [0.0]


def test_compress_all_and_by_name(archive_path):
    a = arrays(5)
    save(archive_path, "all", a, compress=True, dedup=False)
    save(archive_path, "some", a, compress=["emb"], dedup=False)
    with modelzip.open(archive_path) as ar:
        assert all(p.compressed for p in ar.params("all"))
        assert {p.name for p in ar.params("some") if p.compressed} == {"emb"}
        for tag in ar.tags:
            for name, value in ar.load(tag).items():
                np.testing.assert_array_equal(value, a[name])


def test_metadata(archive_path):
    meta = modelzip.Metadata(model_name="mlp", description="tiny")
    save(archive_path, "t", {"x": np.zeros(1)}, metadata=meta)
    with modelzip.open(archive_path) as ar:
        m = ar.metadata
    assert (m.model_name, m.model_version, m.description) == ("mlp", None, "tiny")
    assert m.format_version == 1 and m.writer.startswith("modelzip")
    assert m == modelzip.open(archive_path).metadata and m != modelzip.Metadata()
    updated = modelzip.update_metadata(archive_path, model_version="2", durable=False)
    assert (updated.model_name, updated.model_version) == ("mlp", "2")
    # A mapping updates the fields it names, as keywords do; None clears one.
    merged = modelzip.update_metadata(archive_path, {"quantization": "none", "description": None},
                                   durable=False)
    assert (merged.model_name, merged.model_version, merged.quantization, merged.description) == (
        "mlp", "2", "none", None)
    both = modelzip.update_metadata(archive_path, {"model_name": "big"}, model_version=None,
                                 durable=False)
    assert (both.model_name, both.model_version, both.quantization) == ("big", None, "none")
    # clear=True starts from nothing; a Metadata object replaces every field.
    cleared = modelzip.update_metadata(archive_path, clear=True, description="only", durable=False)
    assert (cleared.model_name, cleared.quantization, cleared.description) == (None, None, "only")
    whole = modelzip.update_metadata(archive_path, modelzip.Metadata(model_name="x"), durable=False)
    assert (whole.model_name, whole.description) == ("x", None)
    # save(metadata=mapping) updates as well.
    save(archive_path, "t2", {"x": np.ones(1)}, metadata={"model_version": "3"})
    m = modelzip.open(archive_path).metadata
    assert (m.model_name, m.model_version) == ("x", "3")
    assert modelzip.open(archive_path).tags == ["t", "t2"]  # metadata changes keep the tags
    with pytest.raises(TypeError, match="unknown metadata field 'writer'"):
        modelzip.update_metadata(archive_path, writer="me")
    with pytest.raises(ValueError, match="unknown metadata field 'nam'"):
        modelzip.update_metadata(archive_path, {"nam": "x"})
    with pytest.raises(TypeError, match="'description' must be str or None"):
        modelzip.update_metadata(archive_path, description=3)
    with pytest.raises(AttributeError):
        m.writer = "me"


def test_updater_state(archive_path):
    m = np.full((2, 3), 0.1, np.float32)
    v = np.full((2, 3), 0.01, np.float32)
    save(archive_path, "t", {"w": np.ones((2, 3), np.float32)},
         updater={("w", "M"): m, ("w", "V"): v}, compress=[("w", "V")])
    with modelzip.open(archive_path) as ar:
        states = ar.updater_states()
        assert [(s.name, s.state) for s in states] == [("w", "M"), ("w", "V")]
        assert [s.compressed for s in states] == [False, True]
        assert not ar.param("w").compressed
        np.testing.assert_array_equal(ar.updater_state("w", "V"), v)
        assert list(ar.load()) == ["w"]  # updater state is not a parameter
    with pytest.raises(ValueError, match=r"updater state \('w', 'X'\)"):
        save(archive_path, "u", {"w": np.ones(1)}, updater={("w", "M"): m}, compress=[("w", "X")])
    with pytest.raises(TypeError, match="pairs of str"):
        save(archive_path, "u", {"w": np.ones(1)}, updater={"w": m})


def test_training_config_dict_round_trips(archive_path):
    # Integer fields of 10 and more: JSON must say 10, not 1e+01, or the
    # dict read back holds floats that writing it again refuses.
    config = {
        "updater": {"type": "Sgd", "learning_rate": 100.0},
        "learning_rate_schedule": {
            "schedule": "RampSchedule", "num_iterations": 1000,
            "base": {"schedule": "CycleSchedule", "type": "epoch", "initial_value": 0.1,
                     "max_value": 1.0, "cycle_length": 100, "annealing_length": 20,
                     "annealing_decay": 0.5}},
        "regularization": [{"type": "l2", "apply_learning_rate": True, "coefficient": {
            "schedule": "PolySchedule", "type": "iteration", "initial_value": 0.01,
            "power": 2.0, "max_iterations": 12345678901}}],
        "minimize": True, "feature_mapping": ["x"], "label_mapping": [],
        "feature_mask_mapping": [], "label_mask_mapping": [], "loss_variables": [],
        "iteration_count": 50, "epoch_count": 10, "properties": {"seed": "7"},
    }
    def add(tag, training):
        with modelzip.Writer(archive_path, durable=False) as w:
            w.add_tag(tag, {"w": np.ones(2, np.float32)}, training=training)

    add("a", config)
    with modelzip.open(archive_path) as ar:
        back = ar.training_config("a")
    assert back == config
    base = back["learning_rate_schedule"]["base"]
    assert type(base["cycle_length"]) is int and type(base["annealing_length"]) is int
    add("b", back)
    with modelzip.open(archive_path) as ar:
        assert ar.training_config("b") == config


def test_load_gives_params_txt_order_as_the_cpp_library(archive_path):
    """Archive.load() (and names=) give the tensors in params.txt order, the order the tag
    was saved in; C++'s Archive::load gives the same order (tests/checkpoint/roundtrip_test)."""
    order = ["zeta", "alpha", "mid.weight", "Beta", "a"]
    save(archive_path, "t", {name: np.full(1, i, np.int32) for i, name in enumerate(order)})
    with modelzip.open(archive_path) as ar:
        assert [p.name for p in ar.params()] == order
        assert list(ar.load()) == order
        assert list(ar.load(copy=True)) == order
        assert list(ar.load(writable=True)) == order
        assert list(ar.load(names=["a", "zeta"])) == ["a", "zeta"]
    assert list(modelzip.load(archive_path)) == order


def keys_in_order(value):
    """``value`` with every dict turned into its list of (key, value) pairs: equality then
    also compares key order."""
    if isinstance(value, dict):
        return [(k, keys_in_order(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [keys_in_order(v) for v in value]
    return value


def test_training_config_is_the_cli_document_with_float_fields_as_floats(archive_path):
    """Archive.training_config() is built from the C++ TrainingConfig directly, not by
    parsing the CLI's JSON: the same keys in the same order as `modelzip info --json`, and a
    float field holding a whole number (JSON text 100) is still a float."""
    config = {
        "updater": {"type": "AdamW", "learning_rate": 1.0, "beta1": 0.5, "beta2": 0.75,
                    "epsilon": 1e-300, "weight_decay": 0.0},
        "learning_rate_schedule": {"schedule": "MapSchedule", "type": "epoch",
                                   "steps": [{"start": 0, "value": 2.0},
                                             {"start": 10, "value": 0.1}]},
        "regularization": [{"type": "weight_decay", "coefficient": 3.0,
                            "apply_learning_rate": False}],
        "feature_mapping": ["x", "\u00e9t\u00e9"], "iteration_count": 2 ** 62,
        "properties": {"a": "1", "\u2603": "snow"},
    }
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("t", {"w": np.ones(2, np.float32)}, training=config)
    with modelzip.open(archive_path) as ar:
        got = ar.training_config()
    cli = json.loads(subprocess.run([CLI, "info", str(archive_path), "--json"], check=True,
                                    capture_output=True, text=True).stdout)["training"]
    assert keys_in_order(got) == keys_in_order(cli)
    assert got["updater"]["learning_rate"] == 1.0 and type(got["updater"]["learning_rate"]) is float
    assert type(got["learning_rate_schedule"]["steps"][0]["value"]) is float
    assert type(got["learning_rate_schedule"]["steps"][1]["start"]) is int
    coefficient = got["regularization"][0]["coefficient"]
    assert coefficient == {"schedule": "FixedSchedule", "value": 3.0}
    assert type(coefficient["value"]) is float
    assert got["iteration_count"] == 2 ** 62 and got["feature_mapping"][1] == "\u00e9t\u00e9"
    assert got["properties"] == {"a": "1", "\u2603": "snow"}


def test_writer_context_manager_commits_or_discards(archive_path):
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("a", {"x": np.zeros(2)})
        assert w.tags == ["a"]
    assert w.closed and modelzip.open(archive_path).tags == ["a"]
    with pytest.raises(RuntimeError, match="boom"):
        with modelzip.Writer(archive_path, durable=False) as w:
            w.add_tag("b", {"x": np.ones(2)})
            raise RuntimeError("boom")
    assert modelzip.open(archive_path).tags == ["a"]
    with pytest.raises(ValueError, match="closed Writer"):
        w.add_tag("c", {})
    # Several staged changes, one commit.
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("b", {"x": np.ones(2)})
        w.add_tag("c", {"x": np.ones(2)})
        w.remove_tag("a")
        assert w.tags == ["b", "c"]
    stats = w.last_stats  # still there after close
    assert (stats.blobs_written, stats.blobs_deduplicated) == (1, 1)  # "c" equals "b"
    assert modelzip.open(archive_path).tags == ["b", "c"]


def test_progress_callback_can_cancel_and_raise(archive_path):
    calls = []
    save(archive_path, "a", arrays(6), progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1] and all(d <= t for d, t in calls)
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "b", arrays(7), progress=lambda done, total: False)
    assert e.value.code == "cancelled"
    # It names the archive and the tag the save adds, as every error does.
    assert (e.value.archive, e.value.tag) == (str(archive_path), "b")
    assert str(e.value).startswith(f"{archive_path}: tag 'b': save cancelled")

    def failing(done, total):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError, match="from the callback"):
        save(archive_path, "c", arrays(8), progress=failing)
    assert modelzip.open(archive_path).tags == ["a"]  # the failed commits left it untouched


def test_failed_commit_keeps_changes_staged(archive_path):
    w = modelzip.Writer(archive_path, durable=False, progress=lambda d, t: False)
    data = np.arange(5)
    w.add_tag("t", {"d": data})
    with pytest.raises(modelzip.Error):
        w.commit()
    assert w.tags == ["t"]
    w.close()
    assert not archive_path.exists()


def test_a_failed_commit_at_the_end_of_a_with_block_closes_the_writer(archive_path):
    save(archive_path, "a", {"x": np.zeros(2)})
    before = archive_path.read_bytes()
    data = np.arange(5)
    refs = sys.getrefcount(data)
    with pytest.raises(modelzip.Error, match="gone"):
        with modelzip.Writer(archive_path, durable=False) as w:
            w.add_tag("b", {"d": data}, share={"y": ("gone", "x")})
    # The block is over: the Writer is closed and lets go of the arrays
    # (it stayed open holding them, with no block left to use it in).
    assert w.closed
    assert sys.getrefcount(data) == refs
    assert archive_path.read_bytes() == before
    with modelzip.Writer(archive_path, durable=False) as w2:
        w2.add_tag("b", {"d": data})
    assert modelzip.open(archive_path).tags == ["a", "b"]


def test_discard_drops_staged_changes_and_the_writer_stays_open(archive_path):
    save(archive_path, "a", {"x": np.zeros(2)})
    data = np.arange(5)
    refs = sys.getrefcount(data)
    w = modelzip.Writer(archive_path, durable=False)
    w.add_tag("b", {"d": data, "x": np.ones(2)}, share={"y": ("gone", "x")})
    w.update_metadata({"model_name": "discarded"})
    w.remove_tag("a")
    assert sys.getrefcount(data) > refs  # borrowed while staged
    with pytest.raises(modelzip.Error, match="gone"):
        w.commit()  # a share of a missing tag: the change stays staged, every commit fails
    assert w.tags == ["b"]
    w.discard()
    assert not w.closed and w.tags == ["a"]
    assert sys.getrefcount(data) == refs  # released
    w.add_tag("c", {"x": np.ones(2)})
    w.commit()
    w.close()
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["a", "c"] and ar.metadata.model_name is None
    with pytest.raises(ValueError, match="closed Writer"):
        w.discard()


def test_concurrent_loads_from_threads(archive_path):
    a = arrays(9)
    save(archive_path, "t", a)
    errors = []
    with modelzip.open(archive_path) as ar:
        def work():
            try:
                for _ in range(50):
                    loaded = ar.load(copy=True)
                    for name, value in a.items():
                        np.testing.assert_array_equal(loaded[name], value)
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_repr_and_entry_names(archive_path):
    save(archive_path, "t", {"w": np.zeros((2, 2), np.float16)})
    with modelzip.open(archive_path) as ar:
        assert repr(ar.param("w")) == ("modelzip.ParamInfo(name='w', dtype='float16', shape=(2, 2),"
                                       " nbytes=8, blob='t/params/0.fb', shared=False,"
                                       " compressed=False)")
        assert "t/params/0.fb" in ar.entry_names() and "t/params.txt" in ar.entry_names()
        assert repr(ar) == (f"<modelzip.Archive {str(archive_path)!r}: 1 tag ['t'], newest 't': "
                            "1 parameter (8 B)>")
    assert repr(ar) == f"<modelzip.Archive {str(archive_path)!r} (closed)>"


def test_indexing_an_archive_reads_a_parameter(archive_path):
    # `"w" in archive` worked, `archive["w"]` was "'Archive' object is not subscriptable".
    save(archive_path, "old", {"w": np.arange(3.0), "v": np.ones(2)})
    save(archive_path, "new", {"w": np.arange(3.0) + 1})
    with modelzip.open(archive_path) as ar:
        assert ar["w"].tolist() == [1.0, 2.0, 3.0]  # the newest tag, as ar.tensor("w")
        assert ar["old", "w"].tolist() == [0.0, 1.0, 2.0]
        assert not ar["w"].flags.writeable  # the zero-copy view ar.tensor gives
        with pytest.raises(KeyError, match="tag 'new': no parameter 'v'"):
            ar["v"]
        with pytest.raises(modelzip.NotFoundError, match="tag 'x': no such tag"):
            ar["x", "w"]
        with pytest.raises(KeyError, match=r"no parameter 'old'.*: 'old' is a tag: "
                                           r"archive.load\('old'\) gives its parameters, "
                                           r"archive\['old', NAME\] one of them") as e:
            ar["old"]
        assert e.value.tag == "new"
        for key in (0, ("old",), ("old", "w", "v"), ("old", 1)):
            with pytest.raises(TypeError, match="modelzip.Archive indices are a parameter name "
                                                "or a \\(tag, name\\) pair, not "):
                ar[key]
        with pytest.raises(TypeError, match="Archive' object is not iterable"):
            iter(ar)


def test_repr_of_many_tags_and_updater_state(archive_path):
    for i in range(8):
        save(archive_path, f"s{i}", {"w": np.full(256, i, np.float32), "b": np.zeros(3)},
             updater={("w", "M"): np.zeros(256, np.float32)})
    with modelzip.open(archive_path) as ar:
        assert repr(ar) == (f"<modelzip.Archive {str(archive_path)!r}: 8 tags ['s0', 's1', 's2', "
                            "..., 's5', 's6', 's7'], newest 's7': 2 parameters (1.0 KiB), "
                            "1 updater state>")


def test_in_finds_tags_and_parameters(archive_path):
    save(archive_path, "Step-1", {"w": np.zeros(2)})
    save(archive_path, "step-2", {"v": np.zeros(2)})
    with modelzip.open(archive_path) as ar:
        assert "step-1" in ar and "STEP-2" in ar  # tags, ignoring case
        assert "v" in ar and "w" not in ar  # parameters of the newest tag
        assert ("step-1", "w") in ar and ("step-2", "w") not in ar and ("nope", "w") not in ar
        assert 3 not in ar and ("a",) not in ar and "nope" not in ar


# What pytest, IPython and debuggers do with a failed call: repr() every local of every frame of
# the traceback, here also the instance whose __init__ raised (pybind11 gives it uninitialized
# memory, so a repr that reads the C++ object crashes or prints garbage, depending on what
# malloc left there: MALLOC_PERTURB_ varies it).
FAILED_CONSTRUCTORS = r"""
import sys, traceback, modelzip
def main():
    print(repr(modelzip.Archive.__new__(modelzip.Archive)))
    print(repr(modelzip.Writer.__new__(modelzip.Writer)))
    for make in (lambda: modelzip.open(sys.argv[1]), lambda: modelzip.Writer(sys.argv[2])):
        try:
            make()
            raise SystemExit("no error")
        except modelzip.Error as e:
            for frame, _ in traceback.walk_tb(e.__traceback__):
                for value in list(frame.f_locals.values()):
                    repr(value)
    print("ok")
main()
"""


def test_repr_of_an_archive_or_writer_whose_constructor_failed(tmp_path):
    for perturb in ("0", "85", "170", "255"):
        out = subprocess.run([sys.executable, "-X", "faulthandler", "-c", FAILED_CONSTRUCTORS,
                              str(tmp_path / "missing.zip"), str(tmp_path)],
                             env=dict(os.environ, MALLOC_PERTURB_=perturb), capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == ["<modelzip.Archive (not opened)>",
                                           "<modelzip.Writer (not opened)>", "ok"], out.stdout


def test_append_grows_the_file_in_place_unless_disabled(archive_path):
    save(archive_path, "a", arrays(10))
    old = archive_path.read_bytes()
    stats = save(archive_path, "b", arrays(11))
    assert stats.appended
    # Everything before the old tail (tags.txt's local header, the last
    # entry) is untouched; the tail itself was overwritten.
    tail = old.rindex(b"PK\x03\x04", 0, old.rindex(b"tags.txt"))
    assert archive_path.read_bytes()[:tail] == old[:tail]
    stats = save(archive_path, "c", arrays(12), append=False)
    assert not stats.appended
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["a", "b", "c"] and ar.verify() == []
        for tag, seed in zip(ar.tags, (10, 11, 12)):
            for name, value in arrays(seed).items():
                np.testing.assert_array_equal(ar.tensor(name, tag), value)


def test_views_stay_valid_while_another_commit_appends(archive_path):
    first = arrays(13)
    save(archive_path, "a", first)
    with modelzip.open(archive_path) as ar:
        view = ar.tensor("emb")
        save(archive_path, "b", arrays(14))  # appends to the mapped file
        np.testing.assert_array_equal(view, first["emb"])
        assert ar.tags == ["a"]  # an open Archive keeps seeing what it opened


def test_collect_garbage_drops_unreferenced_blobs(archive_path):
    import zipfile
    save(archive_path, "t", {"w": np.arange(8, dtype=np.int64)})
    with zipfile.ZipFile(archive_path) as z:
        blob = z.read("t/params/0.fb")
    with zipfile.ZipFile(archive_path, "a") as z:  # a blob no params.txt lists
        z.writestr("t/params/7.fb", blob)
    assert "t/params/7.fb" in modelzip.open(archive_path).entry_names()
    stats = modelzip.collect_garbage(archive_path, durable=False)
    assert stats.blobs_collected == 1 and stats.bytes_collected > 64
    with modelzip.open(archive_path) as ar:
        assert "t/params/7.fb" not in ar.entry_names()
        assert ar.tensor("w").tolist() == list(range(8))


def test_writer_refuses_use_while_committing(archive_path):
    """A progress callback (run during commit) cannot change the staged changes under it."""
    writer = None

    def meddle(done, total):
        writer.add_tag("late", {"x": np.zeros(1)})

    writer = modelzip.Writer(archive_path, durable=False, progress=meddle)
    writer.add_tag("t", {"x": np.ones(1)})
    with pytest.raises(ValueError, match="busy committing"):
        writer.commit()
    assert writer.tags == ["t"]  # usable again after the failed commit
    writer.close()


def test_save_replace_and_keep_last(archive_path):
    for k in range(4):
        save(archive_path, f"step-{k}", arrays(k))
    with pytest.raises(modelzip.Error):
        save(archive_path, "STEP-1", arrays(9))
    stats = save(archive_path, "step-1", arrays(9), replace=True)
    assert stats.appended and stats.bytes_freed > 0
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["step-0", "step-2", "step-3", "step-1"]
        assert np.array_equal(ar.load("step-1")["emb"], arrays(9)["emb"])
    stats = save(archive_path, "step-4", arrays(4), keep_last=2)
    # Three tags freed against two live: more free than live bytes, so the
    # commit rewrites (which drops the free entries) instead.
    assert not stats.appended and stats.bytes_freed == 0
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["step-1", "step-4"]
        assert ar.verify() == []
        assert np.array_equal(ar.load("step-1")["fc.weight"], arrays(9)["fc.weight"])
    with pytest.raises(modelzip.Error):
        save(archive_path, "step-5", arrays(5), keep_last=0)


def test_writer_keep_last_counts_tags_of_other_writers(archive_path):
    save(archive_path, "a", arrays(1))
    w = modelzip.Writer(archive_path, durable=False)
    w.keep_last(1)
    save(archive_path, "b", arrays(2))  # committed by another writer meanwhile
    stats = w.commit()
    w.close()
    assert "bytes_freed=" in repr(stats)
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["b"]


def test_an_archive_tells_whether_it_changed_since_open_and_reopens(archive_path):
    save(archive_path, "a", arrays(1))
    with modelzip.Archive(archive_path) as archive:
        assert not archive.changed_since_open()
        save(archive_path, "b", arrays(2))  # another writer's append
        assert archive.changed_since_open()
        assert archive.tags == ["a"]  # still the archive as it was opened
        with archive.reopen() as now:
            assert now.tags == ["a", "b"] and not now.changed_since_open()
            assert np.array_equal(now.load("b")["fc.weight"], arrays(2)["fc.weight"])
        assert archive.tags == ["a"] and not archive.closed
    with modelzip.Archive(archive_path) as archive:
        modelzip.remove_tag(archive_path, "a", durable=False)
        assert archive.changed_since_open()
        with archive.reopen() as now:
            assert now.tags == ["b"]
        os.remove(archive_path)
        assert archive.changed_since_open()
        with pytest.raises(FileNotFoundError):
            archive.reopen()
    archive.close()
    with pytest.raises(ValueError, match="closed"):
        archive.changed_since_open()


def test_a_touch_or_a_rolled_back_append_is_no_change(archive_path):
    """The file's times moved but its committed archive did not (a `touch`;
    an append rolled back: the old bytes back, a new modification time):
    changed_since_open() reads the tail and finds it the same (before: True).
    A commit after that is still seen."""
    save(archive_path, "a", arrays(1))
    old = archive_path.read_bytes()
    with modelzip.Archive(archive_path) as archive:
        os.utime(archive_path, (1000, 1000))
        assert not archive.changed_since_open()
        assert not archive.changed_since_open()
        save(archive_path, "b", arrays(2))
        assert archive.changed_since_open()
        with open(archive_path, "r+b") as f:  # rolled back in place, as a writer does
            f.truncate(len(old))
            f.seek(0)
            f.write(old)
        os.utime(archive_path, (2000, 2000))
        assert not archive.changed_since_open()
        with archive.reopen() as now:
            assert now.tags == ["a"]


# A process that holds the archive's write lock until its stdin closes: a
# POSIX record lock of the whole file (lockf), which the kernel makes
# conflict with the open-file-description lock modelzip's writers take.
LOCK_HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""

METADATA_SETTER = r"""
import sys
import modelzip
modelzip.update_metadata(sys.argv[1], durable=False, **{sys.argv[2]: sys.argv[3]})
"""


def sleeping_for_a_while(pid, deadline):
    """True once process `pid` was seen sleeping (state S: e.g. waiting for a
    lock) in 5 looks in a row, 50 ms apart; False at `deadline`."""
    seen = 0
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        seen = seen + 1 if state == "S" else 0
        if seen == 5:
            return True
        time.sleep(0.05)
    return False


def test_update_metadata_from_two_processes_keeps_both_changes(archive_path):
    # Both setters start while a third process holds the write lock, so both
    # have read the metadata before either commits: a read-modify-write
    # outside the lock would lose the first commit's field.
    save(archive_path, "t", {"x": np.zeros(1)}, metadata={"model_name": "base"})
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(archive_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    setters = []
    try:
        assert holder.stdout.readline() == b"locked\n"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        deadline = time.monotonic() + 120  # generous: CI machines are loaded
        for field, value in [("model_version", "2"), ("description", "tuned")]:
            setter = subprocess.Popen(
                [sys.executable, "-c", METADATA_SETTER, str(archive_path), field, value], env=env)
            setters.append(setter)
            assert sleeping_for_a_while(setter.pid, deadline), "the setter did not wait"
            assert setter.poll() is None
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        for setter in setters:
            assert setter.wait(timeout=60) == 0
    m = modelzip.open(archive_path).metadata
    assert (m.model_name, m.model_version, m.description) == ("base", "2", "tuned")
    assert modelzip.open(archive_path).tags == ["t"]


def test_writer_update_metadata_changes_only_the_named_fields(archive_path):
    save(archive_path, "t", {"x": np.zeros(1)}, metadata={"model_name": "a", "description": "d"})
    with modelzip.Writer(archive_path, durable=False) as writer:
        writer.update_metadata({"model_version": "1", "description": None})
    m = modelzip.open(archive_path).metadata
    assert (m.model_name, m.model_version, m.description) == ("a", "1", None)
    with modelzip.Writer(archive_path, durable=False) as writer:
        writer.update_metadata({"quantization": "none"}, clear=True)
    m = modelzip.open(archive_path).metadata
    assert (m.model_name, m.model_version, m.quantization) == (None, None, "none")
    with modelzip.Writer(archive_path, durable=False) as writer:
        with pytest.raises(ValueError, match="unknown metadata field 'writer'"):
            writer.update_metadata({"writer": "me"})
        with pytest.raises(TypeError, match="must be a mapping of str to str or None"):
            writer.update_metadata(["model_name"])
    # A Metadata is a whole value: it replaces every field.
    with modelzip.Writer(archive_path, durable=False) as writer:
        writer.update_metadata(modelzip.Metadata(model_name="whole"))
    m = modelzip.open(archive_path).metadata
    assert (m.model_name, m.quantization) == ("whole", None)


def test_set_metadata_spellings_are_deprecated_and_still_work(archive_path):
    save(archive_path, "t", {"x": np.zeros(1)}, metadata={"model_name": "a"})
    with pytest.warns(DeprecationWarning, match="use modelzip.update_metadata"):
        m = modelzip.set_metadata(archive_path, description="d", durable=False)
    assert (m.model_name, m.description) == ("a", "d")
    with modelzip.Writer(archive_path, durable=False) as writer:
        with pytest.warns(DeprecationWarning, match=r"use Writer.update_metadata\(metadata\)"):
            writer.set_metadata(modelzip.Metadata(model_version="2"))
    m = modelzip.open(archive_path).metadata
    assert (m.model_name, m.model_version, m.description) == (None, "2", None)
    assert "set_metadata" not in modelzip.__all__


def test_star_import_leaves_the_builtin_open_alone():
    assert "open" not in modelzip.__all__
    namespace = {}
    exec("from modelzip import *", namespace)
    assert "open" not in namespace and "save" in namespace
    assert modelzip.open is not None  # still there by its qualified name


def test_adding_a_staged_tag_again_says_it_is_staged(archive_path):
    # Only the first add is staged, not in the archive: the second is refused as staged in
    # this Writer (with the Python hint), distinct from a tag the archive holds.
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("Step", {"x": np.ones(2)})
        with pytest.raises(modelzip.Error) as e:
            w.add_tag("STEP", {"x": np.ones(2)})
        assert (e.value.code, e.value.archive, e.value.tag) == (
            "already_exists", str(archive_path), "STEP")
        assert str(e.value).endswith("tag 'Step' is already staged in this Writer, not yet "
                                     "committed (tags ignore case); replace=True replaces it")
        w.add_tag("STEP", {"x": np.zeros(2)}, replace=True)
    with modelzip.Writer(archive_path, durable=False) as w:
        with pytest.raises(modelzip.Error) as e:
            w.add_tag("step", {"x": np.ones(2)})
        assert str(e.value).endswith("tag 'STEP' exists already (tags ignore case); "
                                     "replace=True replaces it")
    assert modelzip.open(archive_path).tags == ["STEP"]


def test_save_checks_metadata_before_it_reads_the_arrays(archive_path):
    # safetensors' save_file takes free-form metadata ({"format": "pt"}); modelzip.save and
    # modelzip.torch.save read (and fetch from the GPU) every tensor before they refused it.
    class Watched:
        read = False

        def __array__(self, dtype=None):
            Watched.read = True
            return np.ones(2)
    for call in (lambda: save(archive_path, "t", {"w": Watched()}, metadata={"format": "pt"}),
                 lambda: modelzip.save(archive_path, "t", {"w": Watched()},
                                       metadata={"description": 3})):
        with pytest.raises((ValueError, TypeError)) as e:
            call()
        assert not Watched.read and not archive_path.exists()
    assert str(e.value) == ("metadata field 'description' must be str or None (None clears it), "
                            "not int")
    with pytest.raises(ValueError) as e:
        save(archive_path, "t", {"w": np.ones(1)}, metadata={"format": "pt"})
    assert str(e.value) == (
        "unknown metadata field 'format' (fields: model_name, model_version, quantization, "
        "description; metadata= takes these: free-form pairs, as safetensors' metadata= takes "
        "them, go in tag_metadata=)")


def test_arrays_that_load_gave_can_be_saved_again(archive_path):
    # modelzip.save(path, tag, modelzip.load(path)) raised the TypeError meant for torch's
    # load_state_dict: the save asked the dict for torch's _metadata.
    save(archive_path, "t", {"w": np.arange(3.0), "names": ["a", "b"]})
    save(archive_path, "copy", modelzip.load(archive_path, "t"))
    again = modelzip.load(archive_path, "copy")
    np.testing.assert_array_equal(again["w"], np.arange(3.0))
    assert again["names"].tolist() == ["a", "b"]


def test_a_loaded_dict_of_python_values_saves_to_another_archive_as_it_was(tmp_path):
    # A dict from load() holding Python values carries their _python_types record: saved as it
    # is to another archive, it reads back as the first archive does (the record kept as the
    # record), to every reader.
    first, second = tmp_path / "first.zip", tmp_path / "second.zip"
    save(first, "t", {"lr": 0.1, "steps": 3, "name": "x", "w": np.arange(3.0),
                      "milestones": [30, 60], "mixed": [1, "a", None], "nothing": None,
                      "config": {"depth": 2}, "marker": "torch.dtype:float32"})
    loaded = modelzip.load(first)
    assert "_python_types" in loaded
    save(second, "t", loaded)
    again = modelzip.load(second)
    assert list(again) == list(loaded)
    for name in loaded:
        assert again[name].dtype == loaded[name].dtype, name
        np.testing.assert_array_equal(again[name], loaded[name], err_msg=name)
    assert second.read_bytes() == first.read_bytes()
    save(second, "u", dict(loaded))  # a plain dict of the same arrays: the same tag
    with modelzip.open(second) as a:
        assert [p.blob for p in a.params("u")] == [p.blob for p in a.params("t")]
