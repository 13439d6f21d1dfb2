"""modelzip.torch.load / save / load_into: zero-copy private views, independence of deduplicated
tensors, tied weights, strict checks before any copy, CRC checks on demand, the staging pipeline."""
import gc
import functools
import hashlib
import json
import os
import random
import re
import subprocess
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

import modelzip
import modelzip.torch as mzt
from conftest import CLI
from modelzip import _device_copy
from modelzip._torch_load import load_copied, to_device

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device here (device loads not run)")


def file_hash(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mapped_paths(tensor):
    """The file-backed mappings (/proc/self/maps) that hold the tensor's first byte."""
    address = tensor.data_ptr()
    paths = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if start <= address < end:
                paths.append(fields[5] if len(fields) > 5 else "")
    return paths


def anonymous_bytes():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Anonymous line in smaps_rollup")


def test_cpu_load_of_1_gib_maps_the_file_without_anonymous_memory(archive_path):
    tensors = {f"layer{i}.weight": torch.full((4096, 4096), float(i)) for i in range(16)}  # 1 GiB
    mzt.save(tensors, archive_path, "t", durable=False)
    del tensors
    gc.collect()
    before = anonymous_bytes()
    state = mzt.load(archive_path)
    total = 0.0
    for name, tensor in state.items():
        total += float(tensor[::64, ::64].sum())  # touches a page in every 64 rows
    grown = anonymous_bytes() - before
    assert grown < 64 << 20, f"a zero-copy load of 1 GiB grew anonymous memory by {grown} bytes"
    assert total == sum(float(i) * 64 * 64 for i in range(16))
    for tensor in state.values():
        assert mapped_paths(tensor) == [os.path.realpath(archive_path)]


def test_writes_stay_private(archive_path):
    mzt.save({"w": torch.arange(10000, dtype=torch.float32)}, archive_path, "t", durable=False)
    before = file_hash(archive_path)
    first = mzt.load(archive_path)
    first["w"].mul_(2)
    second = mzt.load(archive_path)
    with modelzip.open(archive_path) as archive:
        numpy_view = archive.tensor("w")
        torch_state = archive.load_torch()
    assert file_hash(archive_path) == before
    expected = torch.arange(10000, dtype=torch.float32)
    assert torch.equal(second["w"], expected) and torch.equal(torch_state["w"], expected)
    np.testing.assert_array_equal(numpy_view, expected.numpy())
    assert torch.equal(first["w"], expected * 2)


def test_tensors_outlive_the_archive_and_its_file(archive_path):
    mzt.save({"w": torch.ones(3, 5)}, archive_path, "t", durable=False)
    with modelzip.open(archive_path) as archive:
        state = archive.load_torch()
    os.unlink(archive_path)
    gc.collect()
    state["w"] += 1
    assert torch.equal(state["w"], torch.full((3, 5), 2.0))


@pytest.mark.parametrize("numel", [16, 1 << 16])  # copied / mapped on their own pages
def test_deduplicated_tensors_load_independently(archive_path, numel):
    stats = mzt.save({"a": torch.ones(numel), "b": torch.ones(numel), "c": torch.ones(numel)},
                     archive_path, "t", durable=False)
    assert stats.blobs_deduplicated == 2  # one blob on disk
    state = mzt.load(archive_path)
    state["a"].mul_(2)
    state["b"].add_(1)
    assert state["a"][0] == 2 and state["b"][0] == 2 and state["c"][0] == 1
    assert len({state[n].data_ptr() for n in "abc"}) == 3
    with modelzip.open(archive_path) as archive:
        assert archive.entry_names().count("t/ties.json") == 0


def test_batch_norm_statistics_do_not_alias_weights(archive_path):
    """The issue's resnet18 case: bn.weight and bn.running_var both start as ones."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Conv2d(8, 8, 3),
                          nn.BatchNorm2d(8))
    mzt.save(model.state_dict(), archive_path, "t", durable=False)
    with modelzip.open(archive_path) as archive:
        blobs = {p.name: p.blob for p in archive.params()}
        assert blobs["1.weight"] == blobs["1.running_var"] == blobs["3.weight"]
        state = archive.load_torch()
    state["1.weight"].mul_(2)
    assert torch.equal(state["1.running_var"], torch.ones(8))
    assert torch.equal(state["3.weight"], torch.ones(8))


def test_tied_weights_load_as_one_tensor(archive_path):
    embed = nn.Embedding(100, 16)
    head = nn.Linear(16, 100, bias=False)
    head.weight = embed.weight
    model = nn.ModuleDict({"embed": embed, "head": head})
    state = model.state_dict()
    state["copy"] = embed.weight.detach().clone()  # byte-equal, not tied
    mzt.save(state, archive_path, "t", durable=False)
    with modelzip.open(archive_path) as archive:
        assert json.loads(archive.entry("t/ties.json")) == [["embed.weight", "head.weight"]]
    loaded = mzt.load(archive_path)
    assert loaded["embed.weight"] is loaded["head.weight"]
    assert loaded["copy"].data_ptr() != loaded["embed.weight"].data_ptr()
    assert torch.equal(loaded["copy"], loaded["embed.weight"])
    only_head = mzt.load(archive_path, names=["head.weight"])
    assert list(only_head) == ["head.weight"]
    assert torch.equal(only_head["head.weight"], embed.weight.detach())


def test_archives_without_ties_load_every_name_independently(archive_path):
    """What archives written before ties.json do: names sharing a blob are not tied."""
    same = np.arange(64, dtype=np.float32)
    modelzip.save(archive_path, "t", {"a": same, "b": same}, durable=False)
    with modelzip.open(archive_path) as archive:
        assert archive.param("a").blob == archive.param("b").blob
        state = archive.load_torch()
    assert state["a"] is not state["b"]
    state["a"].zero_()
    assert state["b"][1] == 1


def rewrite_entry(path, name, data):
    """The archive at ``path`` with entry ``name`` replaced or added (Python's zipfile)."""
    source = path.with_suffix(".orig")
    path.rename(source)
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(path, "w") as new:
        for info in old.infolist():
            if info.filename != name:
                new.writestr(info, old.read(info))
        new.writestr(name, data)


@pytest.mark.parametrize("text, why", [
    (b"{", "not JSON"),
    (b'{"a": 1}', "not a JSON array"),
    (b'[["a"]]', "group 0 is not an array of at least 2"),
    (b'[["a", "nope"]]', "'nope' is not a tensor parameter"),
    (b'[["a", "b"], ["b", "c"]]', "'b' is named twice"),
])
def test_damaged_ties_are_reported_with_the_entry(archive_path, text, why):
    mzt.save({"a": torch.ones(4), "b": torch.ones(4), "c": torch.ones(4)}, archive_path, "t",
             durable=False)
    rewrite_entry(archive_path, "t/ties.json", text)
    with pytest.raises(modelzip.Error, match=why) as info:
        mzt.load(archive_path)
    assert info.value.code == "corrupt" and info.value.entry == "t/ties.json"


def test_ties_of_different_blobs_stay_untied(archive_path):
    mzt.save({"a": torch.ones(4), "b": torch.zeros(4)}, archive_path, "t", durable=False)
    rewrite_entry(archive_path, "t/ties.json", b'[["a", "b"]]')
    state = mzt.load(archive_path)
    assert state["a"] is not state["b"] and state["b"].sum() == 0


ALL_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
              torch.complex128]


def test_every_dtype_round_trips(archive_path):
    tensors = {str(dtype): (torch.arange(24) % 5).to(dtype).reshape(2, 3, 4) for dtype in ALL_DTYPES}
    tensors["scalar"] = torch.tensor(2.5)
    tensors["empty"] = torch.zeros(0, 3)
    tensors["channels_last"] = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    mzt.save(tensors, archive_path, "t", durable=False)
    state = mzt.load(archive_path)
    assert list(state) == list(tensors)
    for name, expected in tensors.items():
        assert state[name].dtype == expected.dtype and torch.equal(state[name], expected), name


def test_quantized_tensors_load_as_load_torch_gives_them(archive_path):
    q = torch.quantize_per_tensor(torch.randn(4, 4), 0.1, 3, torch.qint8)
    mzt.save({"q": q}, archive_path, "t", durable=False)
    loaded = mzt.load(archive_path)["q"]
    assert loaded.is_quantized and torch.equal(loaded.int_repr(), q.int_repr())
    assert mzt.load(archive_path, dequantize=True)["q"].dtype == torch.float32


def test_missing_tag_and_name_are_key_errors(archive_path):
    mzt.save({"w": torch.ones(2)}, archive_path, "t", durable=False)
    with pytest.raises(KeyError, match="nope"):
        mzt.load(archive_path, "nope")
    with pytest.raises(KeyError, match="absent"):
        mzt.load(archive_path, names=["w", "absent"])
    with pytest.raises(modelzip.NotFoundError):
        mzt.load_into(nn.Linear(1, 2), archive_path, "nope")


def test_names_must_be_a_list_not_one_str(archive_path):
    """A str is iterable: taken as names it would ask for each of its characters."""
    mzt.save({"emb": torch.ones(2), "e": torch.zeros(1)}, archive_path, "t", durable=False)
    with pytest.raises(TypeError, match=r"argument 'names' must be a list .* not str "
                                        r"\(one name: names=\['emb'\]\)"):
        mzt.load(archive_path, names="emb")
    assert list(mzt.load(archive_path, names=["emb"])) == ["emb"]


def _flip_byte_at(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))


def _last_data_byte(path, entry):
    """The file offset of the stored entry's last data byte (its tensor data)."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(entry)
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = (int.from_bytes(f.read(2), "little") for _ in range(2))
    return info.header_offset + 30 + name_len + extra_len + info.file_size - 1


def flip_byte_in(path, entry):
    """Flips one byte of the stored entry's data (its last byte: tensor data)."""
    _flip_byte_at(path, _last_data_byte(path, entry))


def test_verify_finds_a_flipped_byte_the_default_load_does_not(archive_path):
    mzt.save({"w": torch.ones(1000)}, archive_path, "t", durable=False)
    flip_byte_in(archive_path, "t/params/0.fb")
    assert mzt.load(archive_path)["w"][-1] != 1  # documented: not checked by default
    with pytest.raises(modelzip.Error, match="CRC-32 mismatch") as info:
        mzt.load(archive_path, verify=True)
    assert info.value.entry == "t/params/0.fb"
    module = nn.Module()
    module.w = nn.Parameter(torch.zeros(1000))
    with pytest.raises(modelzip.Error, match="CRC-32"):
        mzt.load_into(module, archive_path, verify=True)
    assert module.w.sum() == 0


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.norm = nn.BatchNorm1d(3)

    def forward(self, x):
        return self.norm(self.fc(x))


def test_load_into_copies_into_the_existing_tensors(archive_path):
    torch.manual_seed(3)
    source = Small()
    mzt.save(source.state_dict(), archive_path, "t", durable=False)
    target = Small()
    weight = target.fc.weight
    result = mzt.load_into(target, archive_path)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert target.fc.weight is weight  # the same parameter, filled in place
    for name, tensor in source.state_dict().items():
        assert torch.equal(target.state_dict()[name], tensor), name


def test_load_into_reports_the_keys_load_state_dict_reports(archive_path):
    # A tag's keys are those of the state dict the torch loads give: load_into reported a
    # list's elements (hist.0, hist.1) as unexpected keys of their own and a str value (note),
    # a torch dtype and a tuple of tensors not at all, so a strict load_into loaded a tag that
    # load_state_dict refuses, and strict=False returned other keys.
    torch.manual_seed(4)
    state = {**Small().state_dict(), "epoch": 5, "hist": [torch.ones(1), torch.zeros(1)],
             "note": "hi", "betas": (0.9, 0.99), "amp": torch.float16,
             "pair": (torch.ones(1), None), "_metadata": "torch.metadata:{}"}
    del state["fc.bias"]
    mzt.save(state, archive_path, "t", durable=False)
    with pytest.raises(RuntimeError) as torch_error:
        Small().load_state_dict(mzt.load(archive_path))
    with pytest.raises(RuntimeError) as error:
        mzt.load_into(Small(), archive_path)
    assert str(error.value) == str(torch_error.value).replace(
        "for Small:", f"for Small from {archive_path}, tag 't':")
    assert mzt.load_into(Small(), archive_path, strict=False) == \
        Small().load_state_dict(mzt.load(archive_path), strict=False)

    class WithEpoch(Small):  # a tensor where the tag holds a Python value
        def __init__(self):
            super().__init__()
            self.register_buffer("epoch", torch.tensor(0))
    with pytest.raises(RuntimeError) as torch_error:
        WithEpoch().load_state_dict(mzt.load(archive_path), strict=False)
    with pytest.raises(RuntimeError) as error:
        mzt.load_into(WithEpoch(), archive_path, strict=False)
    assert str(error.value) == str(torch_error.value).replace(
        "for WithEpoch:", f"for WithEpoch from {archive_path}, tag 't':")


def test_load_into_strict_and_not_strict(archive_path):
    torch.manual_seed(4)
    state = Small().state_dict()
    state["extra"] = torch.ones(2)
    del state["fc.bias"]
    mzt.save(state, archive_path, "t", durable=False)
    target = Small()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(RuntimeError) as error:
        mzt.load_into(target, archive_path)
    with pytest.raises(RuntimeError) as torch_error:
        Small().load_state_dict(state)
    # torch's message, with the archive and tag (Missing key(s) first, then Unexpected key(s))
    assert str(error.value) == str(torch_error.value).replace(
        "for Small:", f"for Small from {archive_path}, tag 't':")
    for name, tensor in target.state_dict().items():
        assert torch.equal(tensor, before[name]), f"{name} changed by a failed load"
    result = mzt.load_into(target, archive_path, strict=False)
    assert result.missing_keys == ["fc.bias"] and result.unexpected_keys == ["extra"]
    assert torch.equal(target.fc.weight, state["fc.weight"])
    assert torch.equal(target.fc.bias, before["fc.bias"])


def test_load_into_refuses_shape_mismatches_before_copying(archive_path):
    state = Small().state_dict()
    state["fc.weight"] = torch.ones(5, 4)
    mzt.save(state, archive_path, "t", durable=False)
    target = Small()
    before = target.norm.running_mean.clone()
    with pytest.raises(RuntimeError, match=r"size mismatch for fc.weight") as e:
        mzt.load_into(target, archive_path, strict=False)
    assert torch.equal(target.norm.running_mean, before)
    # As load_state_dict words it, and naming the archive and tag it came from.
    assert str(e.value).startswith(
        f"Error(s) in loading state_dict for Small from {archive_path}, tag 't':\n\t"
        "size mismatch for fc.weight: ")


def test_load_into_refuses_meta_tensors_instead_of_leaving_them_empty(archive_path):
    # A module built on the meta device (no memory) "loaded" without a word and stayed on meta:
    # copy_ into a meta tensor does nothing.
    torch.manual_seed(0)
    mzt.save(nn.Linear(3, 2).state_dict(), archive_path, "t", durable=False)
    module = nn.Linear(3, 2, device="meta")
    with pytest.raises(RuntimeError) as e:
        mzt.load_into(module, archive_path)
    assert str(e.value) == (
        f"Error(s) in loading state_dict for Linear from {archive_path}, tag 't':\n\t"
        'While copying the parameter named "weight": the tensor in the current model is on the '
        "meta device, which has no memory to copy into; materialize the module first "
        "(module.to_empty(device=...)).\n\t"
        'While copying the parameter named "bias": the tensor in the current model is on the '
        "meta device, which has no memory to copy into; materialize the module first "
        "(module.to_empty(device=...)).")
    module.to_empty(device="cpu")
    mzt.load_into(module, archive_path)
    assert torch.equal(module.weight, mzt.load(archive_path)["weight"])


def test_load_into_refuses_expanded_tensors_by_name_before_copying(archive_path):
    """A buffer made by expand() has elements sharing memory: copying into it fails, so the
    load names it before anything is copied (load_state_dict names it too)."""
    module = nn.Module()
    module.a = nn.Parameter(torch.zeros(3))
    module.register_buffer("b", torch.zeros(4, 1).expand(4, 3))
    mzt.save({"a": torch.ones(3), "b": torch.ones(4, 3)}, archive_path, "t", durable=False)
    with pytest.raises(RuntimeError, match='parameter named "b": .*expand'):
        mzt.load_into(module, archive_path)
    assert torch.equal(module.a, torch.zeros(3))


def test_load_into_converts_to_the_module_dtype(archive_path):
    torch.manual_seed(5)
    source = nn.Linear(3, 2).to(torch.float64)
    mzt.save(source.state_dict(), archive_path, "t", durable=False)
    target = nn.Linear(3, 2)
    mzt.load_into(target, archive_path)
    assert target.weight.dtype == torch.float32
    assert torch.equal(target.weight, source.weight.float())


class Tied(nn.Module):
    """embed.weight and head.weight one Parameter (the model's state dict names it twice)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(300, 64)
        self.head = nn.Linear(64, 300, bias=False)
        self.head.weight = self.embed.weight


def test_load_into_a_tied_model_copies_the_later_name_last(archive_path):
    """An untied checkpoint into a tied model: as load_state_dict copies name by name in the
    model's state-dict order, head.weight (the later name) is what the shared tensor holds,
    whatever the types (a dtype conversion is copied on its own, before the parallel copies) or
    the order in which the threads run the pieces."""
    embed, head = torch.full((300, 64), 1.0), torch.full((300, 64), 2.0)
    for embed_dtype, head_dtype in ((torch.float32, torch.float64),
                                    (torch.float64, torch.float32),
                                    (torch.float32, torch.float32)):
        mzt.save({"embed.weight": embed.to(embed_dtype), "head.weight": head.to(head_dtype)},
                 archive_path, f"{embed_dtype}-{head_dtype}", durable=False)
        model = Tied()
        mzt.load_into(model, archive_path, f"{embed_dtype}-{head_dtype}")
        assert model.head.weight is model.embed.weight
        assert torch.equal(model.embed.weight, head), (embed_dtype, head_dtype)
        reference = Tied()
        reference.load_state_dict(mzt.load(archive_path, f"{embed_dtype}-{head_dtype}"))
        assert torch.equal(model.embed.weight, reference.embed.weight)


def test_copies_into_overlapping_destinations_keep_the_given_order(monkeypatch):
    """A flat buffer and views of parts of it (FSDP's flat parameters, a fused QKV): a later pair
    overwrites what it overlaps of an earlier one, even when the threads run the pieces in
    reverse (here they are made to)."""
    run = _device_copy._run
    monkeypatch.setattr(_device_copy, "_run",
                        lambda jobs, work, threads: _reversed_run(run, jobs, work))
    monkeypatch.setattr(_device_copy, "_MAX_PIECE", 4096)
    flat = torch.zeros(4096)
    q, k = flat[:1024], flat[1024:3072]
    sources = [torch.full((4096,), 1.0), torch.full((1024,), 2.0), torch.full((2048,), 3.0),
               torch.full((2048,), 4.0)]
    _device_copy.copy_pairs([(sources[0], flat), (sources[1], q), (sources[2], k),
                             (sources[3], flat[2048:])])
    assert torch.equal(flat, torch.cat([torch.full((1024,), 2.0), torch.full((1024,), 3.0),
                                        torch.full((2048,), 4.0)]))


def _reversed_run(run, jobs, work):
    """_device_copy._run with its jobs handed out last first, on one thread."""
    jobs = list(jobs)
    order = list(range(len(jobs)))[::-1]
    return run([jobs[i] for i in order], lambda i, job: work(order[i], job), 1)


@pytest.fixture
def small_pieces(monkeypatch):
    """Staging pieces of 4 KiB, so that small tensors exercise splitting and packing."""
    monkeypatch.setattr(_device_copy, "_MIN_PIECE", 4096)
    monkeypatch.setattr(_device_copy, "_MAX_PIECE", 4096)
    monkeypatch.setattr(_device_copy, "_pools", {})


def test_staging_pipeline_in_host_memory(archive_path, small_pieces):
    tensors = {"big": torch.randn(3000), "small1": torch.arange(10), "small2": torch.ones(7),
               "bf16": torch.randn(513).to(torch.bfloat16), "tied": None, "empty": torch.zeros(0)}
    tensors["tied"] = tensors["big"]
    mzt.save(tensors, archive_path, "t", durable=False)
    state = mzt.load(archive_path)
    target = _device_copy.HostTarget()
    moved = to_device(state, torch.device("cpu"), staging=target)
    assert moved["tied"] is moved["big"]
    for name, tensor in tensors.items():
        assert torch.equal(moved[name], tensor), name
        if tensor.numel():
            assert moved[name].data_ptr() != state[name].data_ptr()
    pool = _device_copy._pools[("HostTarget", "cpu")]
    again = to_device(state, torch.device("cpu"), staging=target)
    assert _device_copy._pools[("HostTarget", "cpu")] is pool  # buffers reused between loads
    assert torch.equal(again["big"], tensors["big"])


def test_staging_jobs_split_large_and_pack_small_tensors():
    pairs = [(torch.zeros(10000, dtype=torch.uint8), torch.empty(10000, dtype=torch.uint8)),
             (torch.zeros(100, dtype=torch.uint8), torch.empty(100, dtype=torch.uint8)),
             (torch.zeros(200, dtype=torch.uint8), torch.empty(200, dtype=torch.uint8))]
    jobs = _device_copy._jobs(pairs, 4096)
    assert [sum(piece.src.numel() for piece in job) for job in jobs] == [4096, 4096, 1808, 300]


def test_staging_shape_stays_within_256_mib():
    for total in (0, 1, 10 << 20, 3 << 30, 1 << 40):
        piece, count = _device_copy.staging_shape(total)
        assert piece * count <= _device_copy.MAX_STAGING_BYTES
        assert 1 << 20 <= piece <= 32 << 20 and count >= 1


def test_a_failing_copy_is_raised(archive_path, small_pieces):
    class Failing(_device_copy.HostTarget):
        def send(self, destination, staged):
            raise OSError("device gone")
    mzt.save({"w": torch.randn(5000)}, archive_path, "t", durable=False)
    state = mzt.load(archive_path)
    with pytest.raises(OSError, match="device gone"):
        to_device(state, torch.device("cpu"), staging=Failing())


def test_failed_checkpoint_load_changes_nothing(archive_path):
    torch.manual_seed(6)
    model = Small()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    fresh = Small()
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    wrong = torch.optim.SGD(fresh.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="Adam"):
        mzt.load_checkpoint(archive_path, None, fresh, wrong, strict=False)
    for name, tensor in fresh.state_dict().items():
        assert torch.equal(tensor, before[name]), f"{name} overwritten by a failed load"
    assert wrong.state_dict()["state"] == {}


def test_data_ranges_locate_stored_dense_tensors_only(archive_path):
    tensors = {"w": torch.randn(300), "b": torch.arange(5).to(torch.bfloat16),
               "q": torch.quantize_per_tensor(torch.randn(8), 0.1, 0, torch.qint8)}
    mzt.save(tensors, archive_path, "t", durable=False)
    mzt.save({"z": torch.ones(100)}, archive_path, "deflated", durable=False, compress=True)
    with modelzip.Archive(archive_path) as archive:
        blobs = {p.name: p.blob for p in archive.params("t") if p.kind == "tensor"}
        with _device_copy.FileData(archive, "t", blobs) as files:
            assert files.get("q") is None  # quantized: not one run of raw data
            data = archive_path.read_bytes()
            for name in ("w", "b"):
                located = files.get(name)
                raw = _device_copy.as_bytes(tensors[name]).numpy().tobytes()
                assert located.nbytes == len(raw)
                assert data[located.offset:located.offset + located.nbytes] == raw
                assert f"entry '{blobs[name]}'" in located.where
        deflated = {p.name: p.blob for p in archive.params("deflated")}
        with _device_copy.FileData(archive, "deflated", deflated) as files:
            assert files.get("z") is None


@pytest.mark.parametrize("source", ["read", "mapping"])
@pytest.mark.parametrize("staged", [True, False], ids=["staged", "direct"])
def test_read_and_mapping_sources_copy_the_same_bytes(archive_path, small_pieces, source, staged,
                                                      monkeypatch):
    reads = []
    preadv = os.preadv
    monkeypatch.setattr(os, "preadv", lambda *a: reads.append(a[2]) or preadv(*a))
    tensors = {"big": torch.randn(3000), "small1": torch.arange(10), "small2": torch.ones(7),
               "bf16": torch.randn(513).to(torch.bfloat16), "tied": None, "empty": torch.zeros(0),
               "q": torch.quantize_per_tensor(torch.randn(8), 0.1, 0, torch.qint8)}
    tensors["tied"] = tensors["big"]
    mzt.save(tensors, archive_path, "t", durable=False)
    for verify in (False, True):
        moved = load_copied(archive_path, None, torch.device("cpu"), verify=verify,
                            staging=_device_copy.HostTarget() if staged else None, source=source)
        assert moved["tied"] is moved["big"]
        for name, tensor in tensors.items():
            assert torch.equal(moved[name].dequantize() if tensor.is_quantized else moved[name],
                               tensor.dequantize() if tensor.is_quantized else tensor), name
        assert (len(reads) > 0) == (source == "read")


@pytest.mark.parametrize("source", ["read", "mapping"])
@pytest.mark.parametrize("staged", [True, False], ids=["staged", "direct"])
def test_verify_while_copying_finds_a_flipped_byte(archive_path, small_pieces, source, staged):
    mzt.save({"w": torch.ones(5000), "ok": torch.zeros(10)}, archive_path, "t", durable=False)
    flip_byte_in(archive_path, "t/params/0.fb")

    def copy(verify):
        return load_copied(archive_path, "t", torch.device("cpu"), verify=verify, source=source,
                           staging=_device_copy.HostTarget() if staged else None)
    assert copy(False)["w"][-1] != 1  # not checked unless asked
    with pytest.raises(modelzip.Error, match="CRC-32 mismatch") as info:
        copy(True)
    assert info.value.code == "corrupt"
    assert "entry 't/params/0.fb'" in str(info.value)  # the entry's folder names the tag
    assert (info.value.entry, info.value.tag) == ("t/params/0.fb", "t")


def test_verify_of_a_device_load_checks_what_is_not_staged_first(archive_path):
    quantized = torch.quantize_per_tensor(torch.randn(1000), 0.1, 0, torch.qint8)
    mzt.save({"q": quantized}, archive_path, "t", durable=False)
    flip_byte_in(archive_path, "t/params/0.fb")  # no data range: checked before copying
    with pytest.raises(modelzip.Error, match="CRC-32 mismatch"):
        load_copied(archive_path, "t", torch.device("cpu"), verify=True,
                    staging=_device_copy.HostTarget())


@pytest.mark.parametrize("staged", [False, True])
def test_verify_of_a_device_load_tells_a_commit_during_it_from_damage(tmp_path, monkeypatch,
                                                                      staged):
    """A commit that lands while a verified device load copies (here: after the archive was
    opened, before the copies start) and removes the loaded tag in place may overwrite its
    blob's bytes (the first bytes of a freed run, in another writer's archive: the test
    overwrites them itself): the load says the archive changed, as the archive's own reads do.
    After an append, which leaves the blob where it was, a mismatch is damage."""
    copy_pairs = _device_copy.copy_pairs
    for commit in ("removal", "append"):
        path = tmp_path / f"{commit}.zip"
        mzt.save({"w": torch.ones(5000)}, path, "t", durable=False)
        # live bytes after the removal: it stays in place
        mzt.save({"big": torch.randn(100_000)}, path, "big", durable=False)
        at = _last_data_byte(path, "t/params/0.fb")

        def commit_then_copy(*args, **kwargs):
            if commit == "removal":
                assert modelzip.remove_tag(path, "t", durable=False).appended
            else:
                assert mzt.save({"x": torch.zeros(3)}, path, "x", durable=False).appended
            _flip_byte_at(path, at)
            return copy_pairs(*args, **kwargs)
        monkeypatch.setattr(_device_copy, "copy_pairs", commit_then_copy)
        with pytest.raises(modelzip.Error) as info:
            load_copied(path, "t", torch.device("cpu"), verify=True,
                        staging=_device_copy.HostTarget() if staged else None)
        error = info.value
        if commit == "removal":
            assert isinstance(error, modelzip.FileError) and error.code == "io", str(error)
            assert "changed by another writer since this reader opened it" in str(error)
            assert "reopen the archive" in str(error)
        else:
            assert error.code == "corrupt", str(error)
            assert "CRC-32 mismatch: the entry data is damaged" in str(error)
        assert (error.entry, error.tag) == ("t/params/0.fb", "t"), str(error)


@pytest.mark.parametrize("staged", [False, True])
@pytest.mark.parametrize("verify", [False, True])
def test_a_device_load_from_a_file_cut_or_replaced_under_it_says_the_archive_changed(
        tmp_path, monkeypatch, staged, verify):
    """The archive's file cut inside a blob while a device load reads it (source "read", after
    the open, before the copies): the load says the archive changed since it was opened
    (FileError, naming the entry and tag), as the archive's own reads do (before: a plain Error
    "the file ended inside the entry's data", neither damage nor a change). A file renamed over
    the path instead leaves the load reading the file it opened: the old values."""
    copy_pairs = _device_copy.copy_pairs
    for how in ("cut", "replaced"):
        path = tmp_path / f"{how}.zip"
        mzt.save({"w": torch.ones(5000)}, path, "t", durable=False)
        cut_at = _last_data_byte(path, "t/params/0.fb") - 100

        def change_then_copy(*args, **kwargs):
            if how == "cut":
                os.truncate(path, cut_at)
            else:
                other = tmp_path / "other.zip"
                mzt.save({"w": torch.zeros(5000)}, other, "t", durable=False)
                os.replace(other, path)
            return copy_pairs(*args, **kwargs)
        monkeypatch.setattr(_device_copy, "copy_pairs", change_then_copy)
        load = functools.partial(load_copied, path, "t", torch.device("cpu"), verify=verify,
                                 source="read",
                                 staging=_device_copy.HostTarget() if staged else None)
        if how == "replaced":
            assert torch.equal(load()["w"], torch.ones(5000))
            continue
        with pytest.raises(modelzip.Error) as info:
            load()
        error = info.value
        assert isinstance(error, modelzip.FileError) and error.code == "io", str(error)
        assert "changed by another writer since this reader opened it" in str(error)
        assert (error.entry, error.tag) == ("t/params/0.fb", "t"), str(error)


def test_load_into_runs_state_dict_hooks(archive_path):
    torch.manual_seed(8)
    source = Small()
    state = {("old_" + k if k.startswith("fc.") else k): v for k, v in source.state_dict().items()}
    mzt.save(state, archive_path, "t", durable=False)
    target = Small()
    renamed, reported = [], []

    def rename(state_dict, prefix, *args):  # saved as old_fc.*: renamed before loading
        for key in [k for k in state_dict if k.startswith(prefix + "old_fc.")]:
            renamed.append(key)
            state_dict[prefix + key[len(prefix) + 4:]] = state_dict.pop(key)
    target._register_load_state_dict_pre_hook(rename)
    if hasattr(target, "register_load_state_dict_post_hook"):
        target.register_load_state_dict_post_hook(
            lambda module, keys: reported.append(list(keys.missing_keys)))
    result = mzt.load_into(target, archive_path)
    assert sorted(renamed) == ["old_fc.bias", "old_fc.weight"]
    assert result.missing_keys == [] and result.unexpected_keys == []
    if hasattr(target, "register_load_state_dict_post_hook"):
        assert reported == [[]]
    for name, tensor in source.state_dict().items():
        assert torch.equal(target.state_dict()[name], tensor), name


@needs_cuda
def test_cuda_load_matches_the_cpu_load(archive_path):
    tensors = {"w": torch.randn(1000, 1000), "b": torch.randn(1000).to(torch.bfloat16),
               "tied": None}
    tensors["tied"] = tensors["w"]
    mzt.save(tensors, archive_path, "t", durable=False)
    state = mzt.load(archive_path, device="cuda")
    assert state["w"].is_cuda and state["tied"] is state["w"]
    for name, tensor in tensors.items():
        assert torch.equal(state[name].cpu(), tensor), name


@needs_cuda
def test_load_into_a_cuda_module(archive_path):
    torch.manual_seed(7)
    source = Small()
    mzt.save(source.state_dict(), archive_path, "t", durable=False)
    target = Small().cuda()
    mzt.load_into(target, archive_path)
    for name, tensor in source.state_dict().items():
        assert torch.equal(target.state_dict()[name].cpu(), tensor), name


@needs_cuda
def test_cuda_load_reads_and_verifies_while_staging(archive_path):
    tensors = {"w": torch.randn(4096, 1024), "b": torch.randn(1000).to(torch.bfloat16)}
    mzt.save(tensors, archive_path, "t", durable=False)
    for source in ("read", "mapping"):
        state = load_copied(archive_path, None, torch.device("cuda"), verify=True, source=source)
        for name, tensor in tensors.items():
            assert torch.equal(state[name].cpu(), tensor), (source, name)
    flip_byte_in(archive_path, "t/params/0.fb")
    with pytest.raises(modelzip.Error, match="CRC-32 mismatch"):
        mzt.load(archive_path, device="cuda", verify=True)


@needs_cuda
def test_cuda_checkpoint_optimizer_state_lands_on_the_parameters_device(archive_path):
    torch.manual_seed(9)
    model = Small().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 4, device="cuda")).sum().backward()
    optimizer.step()
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    fresh = Small().cuda()
    again = torch.optim.Adam(fresh.parameters(), lr=0.01)
    mzt.load_checkpoint(archive_path, fresh, again)
    for state in again.state_dict()["state"].values():
        assert state["exp_avg"].is_cuda and state["exp_avg_sq"].is_cuda
    for a, b in zip(optimizer.state_dict()["state"].values(),
                    again.state_dict()["state"].values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"])


def test_a_device_that_is_not_there_is_refused_before_anything_is_read(archive_path,
                                                                       monkeypatch):
    # torch.load(map_location=...) says what is wrong with a device and what to do; modelzip's
    # loads raised torch's AssertionError 'Torch not compiled with CUDA enabled' (or CUDA's
    # 'invalid device ordinal' from the first allocation), naming neither the argument nor a
    # way out, and torch.device's TypeError for device=None.
    import modelzip.distributed as mzd
    mzt.save({"w": torch.ones(2)}, archive_path, "t", durable=False)
    loads = {"modelzip.torch.load": lambda device: mzt.load(archive_path, device=device),
             "modelzip.distributed.load": lambda device: mzd.load(archive_path, device=device)}
    for function, load in loads.items():
        with pytest.raises(RuntimeError, match=re.escape(f"{function}() argument 'device': ")
                           + "Expected one of cpu, cuda.* device string: gpu"):
            load("gpu")
        with pytest.raises(TypeError, match=re.escape(
                f"{function}() argument 'device' must be a str, int or torch.device "
                '("cpu", "cuda", "cuda:1"), not list')):
            load(["cuda"])
        if not torch.cuda.is_available():
            with pytest.raises(RuntimeError, match=re.escape(
                    f"{function}(): device 'cuda' is not available: "
                    "torch.cuda.is_available() is False (") + ".*" + re.escape(
                    "load onto the CPU with device='cpu'")):
                load("cuda")
    assert torch.equal(mzt.load(archive_path, device=None)["w"], torch.ones(2))  # the CPU
    count = max(torch.cuda.device_count(), 1) if torch.cuda.is_available() else 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    for function, load in loads.items():
        for device in (f"cuda:{count}", torch.device("cuda", count + 2), count):
            name = str(torch.device(device) if not isinstance(device, int)
                       else torch.device("cuda", device))
            with pytest.raises(RuntimeError, match=re.escape(
                    f"{function}(): device {name!r} is not available: "
                    f"torch.cuda.device_count() is {count}")):
                load(device)


def test_wrong_arguments_of_load_and_load_into_name_the_function(archive_path):
    # modelzip.torch.load(path, 3) said "modelzip.Archive.params() argument 'tag' ..." (a
    # function the caller never called); load_into(path, model) "module must be a
    # torch.nn.Module, not str".
    mzt.save(Small().state_dict(), archive_path, "t", durable=False)
    with pytest.raises(TypeError, match=re.escape(
            "modelzip.torch.load() argument 'tag' must be str or None, not int")):
        mzt.load(archive_path, 3)
    with pytest.raises(TypeError, match=re.escape(
            "modelzip.torch.load_into() argument 'tag' must be str or None, not int")):
        mzt.load_into(Small(), archive_path, 3)
    with pytest.raises(TypeError, match=re.escape(
            "modelzip.torch.load_into() argument 'module' must be a torch.nn.Module, not "
            "PosixPath (the module comes first: load_into(module, path, tag))")):
        mzt.load_into(archive_path, Small())


class WithExtraState(nn.Module):
    """A module whose get_extra_state() is text (a version, a vocabulary), as state dicts of
    tokenizer-carrying or versioned modules hold it."""

    def __init__(self, extra):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.extra, self.loaded = extra, None

    def get_extra_state(self):
        return self.extra

    def set_extra_state(self, state):
        self.loaded = state


@pytest.mark.parametrize("extra", ["format-v2", ["<pad>", "<unk>", "the"]])
def test_text_in_a_state_dict_loads_back_as_text(archive_path, extra):
    # modelzip.save stores str and lists of str, but every torch load refused them ("torch has
    # no string tensors; use Archive.load()"): a module with text extra state saved, and then
    # neither load_into nor load_checkpoint could restore it.
    torch.manual_seed(0)
    model = WithExtraState(extra)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mzt.save(model.state_dict(), archive_path, "t", durable=False)
    mzt.save_checkpoint(archive_path, "c", model, optimizer, durable=False)
    assert mzt.load(archive_path, "t")["_extra_state"] == extra
    assert modelzip.open(archive_path).load_torch("t")["_extra_state"] == extra
    # The device path (copies through _device_copy, CRC-checked) keeps it too.
    copied = load_copied(archive_path, "t", torch.device("cpu"), verify=True)
    assert copied["_extra_state"] == extra and torch.equal(copied["fc.bias"], model.fc.bias)
    fresh = WithExtraState(None)
    mzt.load_into(fresh, archive_path, "t")
    assert fresh.loaded == extra and torch.equal(fresh.fc.weight, model.fc.weight)
    fresh = WithExtraState(None)
    mzt.load_checkpoint(archive_path, "c", fresh, torch.optim.SGD(fresh.parameters(), lr=0.1))
    assert fresh.loaded == extra


PYTHON_VALUES = {"epoch": 5, "lr": 0.1, "flag": True, "off": False, "best": None, "step": -3,
                 "seed": 2**64 - 1, "loss": float("inf"), "name": "abc"}


def assert_python_values(state, expected=PYTHON_VALUES):
    """Each value of ``expected`` in ``state`` is the same Python value of the same type."""
    for name, value in expected.items():
        assert type(state[name]) is type(value) and state[name] == value, name


def test_python_scalars_in_a_state_dict_load_as_python_values(archive_path):
    # torch.save/torch.load give an int, float, bool or None of a state dict (or checkpoint
    # metadata) back as it was; modelzip's torch loads gave 0-d tensors (tensor(5),
    # tensor(True), a float64 tensor) and refused None.
    weight = torch.arange(4, dtype=torch.float32)
    mzt.save({"w": weight, **PYTHON_VALUES}, archive_path, "t", durable=False)
    state = mzt.load(archive_path)
    assert list(state) == ["w", *PYTHON_VALUES] and torch.equal(state["w"], weight)
    assert_python_values(state)
    assert_python_values(modelzip.open(archive_path).load_torch("t"))
    assert_python_values(mzt.load(archive_path, names=["lr", "best"]), {"lr": 0.1, "best": None})
    copied = load_copied(archive_path, "t", torch.device("cpu"), verify=True)  # the device path
    assert_python_values(copied)
    # Readers that know no Python (numpy, the CLI, C++) see 0-d arrays, and the record.
    arrays = modelzip.load(archive_path)
    assert (arrays["epoch"].dtype, arrays["epoch"].shape, arrays["epoch"][()]) == (np.int64, (), 5)
    assert (arrays["lr"].dtype, arrays["flag"].dtype, arrays["seed"].dtype) == (
        np.float64, np.bool_, np.uint64)
    assert arrays["best"][()] == "None"
    assert json.loads(arrays["_python_types"][()].removeprefix("torch.python_types:")) == {
        "epoch": "int", "lr": "float", "flag": "bool", "off": "bool", "best": "None",
        "step": "int", "seed": "int", "loss": "float"}


class WithCounter(nn.Module):
    """A module whose extra state is a Python int (a version, a step counter)."""

    def __init__(self, count):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.count = count

    def get_extra_state(self):
        return self.count

    def set_extra_state(self, state):
        self.count = state


def test_python_extra_state_is_restored_as_it_was(archive_path):
    model = WithCounter(7)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mzt.save_checkpoint(archive_path, "c", model, optimizer, durable=False)
    for restore in (lambda m: mzt.load_into(m, archive_path, "c"),
                    lambda m: mzt.load_checkpoint(archive_path, "c", m,
                                                  torch.optim.SGD(m.parameters(), lr=0.1))):
        fresh = WithCounter(0)
        restore(fresh)
        assert type(fresh.count) is int and fresh.count == 7


def test_python_values_that_cannot_be_kept_are_refused(archive_path):
    with pytest.raises(ValueError, match=r"parameter 'n': the int 18446744073709551616 does not "
                                         r"fit in 64 bits .*store it as str"):
        mzt.save({"n": 2**64}, archive_path, "t", durable=False)
    with pytest.raises(ValueError, match=r"parameter '_python_types': the name is reserved .*"
                                         r"'epoch'"):
        mzt.save({"epoch": 1, "_python_types": torch.zeros(1)}, archive_path, "t", durable=False)
    assert not archive_path.exists()


def same_value(a, b):
    """``a`` and ``b`` are equal and of the same types, down to the elements of lists and
    tuples (tensors: equal tensors)."""
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def torch_loads(path):
    """What every torch load of tag "t" gives: modelzip.torch.load, Archive.load_torch, the
    device path and modelzip.distributed.load(torch=True)."""
    import modelzip.distributed as mzd
    with modelzip.open(path) as archive:
        opened = archive.load_torch("t")
    return [mzt.load(path), opened, load_copied(path, "t", torch.device("cpu"), verify=True),
            mzd.load(path, tag="t", torch=True)]


def test_text_that_looks_like_a_marker_loads_as_the_text_saved(archive_path):
    # torch.load gives a str back as it was; modelzip's torch loads read a str that starts
    # with a marker's prefix as the marker: 'torch.dtype:float32' came back as torch.float32,
    # 'torch.tuple:0' as (), and a '_metadata' text vanished into the state dict's _metadata.
    texts = {"s": "torch.dtype:float32", "u": "torch.tuple:0", "_metadata": "torch.metadata:{}",
             "plain": "torch.nn.Linear", "dt": torch.float16}
    mzt.save({"w": torch.ones(2), **texts}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        assert list(state) == ["w", *texts] and not hasattr(state, "_metadata")
        assert all(same_value(state[k], v) for k, v in texts.items())
    # Other readers see the text saved; the record says which texts are not markers.
    arrays = modelzip.load(archive_path)
    assert [arrays[k][()] for k in ("s", "u", "_metadata")] == [
        "torch.dtype:float32", "torch.tuple:0", "torch.metadata:{}"]
    assert json.loads(arrays["_python_types"][()].removeprefix("torch.python_types:")) == {
        "s": "str", "u": "str", "_metadata": "str"}
    # Text that would read as the record itself is refused under the record's name.
    with pytest.raises(ValueError, match="parameter '_python_types': the name is reserved for "
                                         "the record .* this text would read as such a record"):
        mzt.save({"_python_types": 'torch.python_types:{"w": "int"}'}, archive_path, "u",
                 durable=False)


PYTHON_SEQUENCES = {
    "milestones": [30, 60], "betas": (0.9, 0.999), "flags": [True, False],
    "grid": [[1, 2], [3, 4]], "pairs": [(1, 2), (3, 4)], "none": [], "nothing": (),
    "empty_rows": [[], []], "names": ("a", "b"), "rows": [("a",), ("b",)], "words": ["x", "y"],
    "seeds": [2**64 - 1, 0], "scale": np.float32(1.5), "count": np.int64(3),
    "on": np.bool_(True), "phase": np.complex64(1 - 2j), "halves": [np.float16(0.5)] * 3}


def test_python_sequences_and_numpy_scalars_load_as_saved(archive_path):
    # torch.load gives a list back as a list, a tuple as a tuple, a numpy scalar as a numpy
    # scalar; modelzip's torch loads gave tensors (tensor([30, 60]), a float64 tensor of the
    # betas, tensor(1.5)...).
    weight = torch.arange(3, dtype=torch.float32)
    mzt.save({"w": weight, **PYTHON_SEQUENCES}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        assert list(state) == ["w", *PYTHON_SEQUENCES] and torch.equal(state["w"], weight)
        for name, value in PYTHON_SEQUENCES.items():
            assert same_value(state[name], value), name
    part = mzt.load(archive_path, names=["betas", "scale"])
    assert same_value(part["betas"], (0.9, 0.999)) and same_value(part["scale"], np.float32(1.5))
    # Other readers see arrays: one dimension per level of nesting, the scalars' types.
    arrays = modelzip.load(archive_path)
    assert [(arrays[k].dtype.name, arrays[k].shape) for k in (
        "milestones", "betas", "flags", "grid", "none", "empty_rows", "seeds", "scale",
        "halves")] == [("int64", (2,)), ("float64", (2,)), ("bool", (2,)), ("int64", (2, 2)),
                       ("float64", (0,)), ("float64", (2, 0)), ("uint64", (2,)),
                       ("float32", ()), ("float16", (3,))]
    assert json.loads(arrays["_python_types"][()].removeprefix("torch.python_types:")) == {
        "milestones": "list[int]", "betas": "tuple[float]", "flags": "list[bool]",
        "grid": "list[list[int]]", "pairs": "list[tuple[int]]", "none": "list[]",
        "nothing": "tuple[]", "empty_rows": "list[list[]]", "names": "tuple[str]",
        "rows": "list[tuple[str]]", "seeds": "list[int]", "scale": "numpy.float32",
        "count": "numpy.int64", "on": "numpy.bool", "phase": "numpy.complex64",
        "halves": "list[numpy.float16]"}  # lists of str load as lists without a record
    assert CLI, "MODELZIP_CLI must name the built CLI (set by meson)"
    for name in ("milestones", "grid", "betas"):  # the CLI's bytes are the arrays' own
        raw = subprocess.run([CLI, "cat", str(archive_path), name], check=True,
                             capture_output=True).stdout
        assert raw == np.array(PYTHON_SEQUENCES[name]).astype(arrays[name].dtype).tobytes()


def test_sequences_one_array_cannot_hold_load_as_saved(archive_path):
    # torch.load gives them back; modelzip.save refused them ("a list holding None cannot be
    # stored", "not rectangular"...), random.getstate() among them: they are stored element by
    # element, as lists of tensors are.
    values = {"mixed": [1, "a"], "flags": (True, "a"), "gaps": [1, None, 0.5],
              "ragged": [[1], [2, 3]], "depths": [[1], 2, ("x", [None])],
              "rng": random.getstate()}
    mzt.save({"w": torch.ones(1), **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        assert list(state) == ["w", *values]
        for name, value in values.items():
            assert same_value(state[name], value), name
    random.setstate(mzt.load(archive_path)["rng"])
    record = json.loads(modelzip.load(archive_path)["_python_types"][()].removeprefix(
        "torch.python_types:"))
    assert {name: record[name] for name in ("ragged", "ragged.0", "gaps.1", "rng.1")} == {
        "ragged": "list", "ragged.0": "list[int]", "gaps.1": "None", "rng.1": "tuple[int]"}


@pytest.mark.parametrize("value, message", [
    ([-1, 2**63], "ints beyond int64 .* store them as str"),
    ([[]] * 40, None)])
def test_sequences_that_would_not_load_as_saved_are_refused(archive_path, value, message):
    if message is None:  # deeper than numpy's dimensions
        value, message = [], "nested deeper than 32 levels"
        for _ in range(40):
            value = [value]
    with pytest.raises(ValueError, match=f"parameter 'x': .*{message}"):
        mzt.save({"w": torch.ones(1), "x": value}, archive_path, "t", durable=False)
    assert not archive_path.exists()


def test_python_complex_numbers_load_as_complex_numbers(archive_path):
    # torch.load gives 1+2j back; the torch loads gave a 0-d complex128 tensor (a 1-d one for a
    # list of them).
    values = {"phase": 1 + 2j, "poles": [0.5j, -1 + 0j], "pairs": ((1j, 2j),)}
    mzt.save({"w": torch.ones(1), **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        for name, value in values.items():
            assert same_value(state[name], value), name
    arrays = modelzip.load(archive_path)
    assert (arrays["phase"].dtype, arrays["poles"].dtype) == (np.complex128, np.complex128)
    assert json.loads(arrays["_python_types"][()].removeprefix("torch.python_types:")) == {
        "phase": "complex", "poles": "list[complex]", "pairs": "tuple[tuple[complex]]"}


def test_a_torch_size_loads_as_a_torch_size(archive_path, monkeypatch):
    # torch.load gives torch.Size([2, 3]) back; the torch loads gave tensor([2, 3]).
    values = {"shape": torch.Size([2, 3]), "scalar_shape": torch.Size([]),
              "shapes": [torch.Size([4]), torch.ones(1)]}
    mzt.save({"w": torch.ones(1), **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        for name, value in values.items():
            assert same_value(state[name], value), name
    arrays = modelzip.load(archive_path)
    assert (arrays["shape"].dtype, arrays["shape"].tolist()) == (np.int64, [2, 3])
    assert json.loads(arrays["_python_types"][()].removeprefix("torch.python_types:")) == {
        "shape": "torch.Size", "scalar_shape": "torch.Size", "shapes": "list",
        "shapes.0": "torch.Size"}
    save_as_another_tool(archive_path, "u", {
        "s": np.zeros((2, 2), np.int64), "_python_types": 'torch.python_types:{"s": "torch.Size"}'},
        monkeypatch)
    with pytest.raises(ValueError, match=r"parameter 's': '_python_types' records a torch.Size, "
                                         r"but it is stored as int64 of shape \(2, 2\)"):
        mzt.load(archive_path, "u")


def test_bytes_load_as_bytes(archive_path, monkeypatch):
    # torch.load gives b"..." back; modelzip.save refused bytes ("decode them to str, or wrap
    # them in np.frombuffer").
    values = {"blob": b"\x00\xffab", "empty": b"", "buffer": bytearray(b"xy"),
              "parts": [b"a", b"bc", None]}
    mzt.save({"w": torch.ones(1), **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        for name, value in values.items():
            assert same_value(state[name], value), name
    arrays = modelzip.load(archive_path)
    assert (arrays["blob"].dtype, arrays["blob"].tolist()) == (np.uint8, [0, 255, 97, 98])
    assert json.loads(arrays["_python_types"][()].removeprefix("torch.python_types:")) == {
        "blob": "bytes", "empty": "bytes", "buffer": "bytearray", "parts": "list",
        "parts.0": "bytes", "parts.1": "bytes", "parts.2": "None"}
    save_as_another_tool(archive_path, "u", {
        "b": np.zeros(2, np.int8), "_python_types": 'torch.python_types:{"b": "bytes"}'},
        monkeypatch)
    with pytest.raises(ValueError, match=r"parameter 'b': '_python_types' records bytes, but it "
                                         r"is stored as int8 of shape \(2,\)"):
        mzt.load(archive_path, "u")


def test_sequences_of_numbers_of_several_kinds_are_stored_as_numpy_stores_them(archive_path):
    # No record can give [1, 0.5] back as it was; refusing it would break saves that worked
    # before sequences were recorded, so it is stored as np.array stores it and loads as an array
    # (a tensor from the torch loads), numpy's promotion worked out by hand: int and float give
    # float64, bool and int give int64, lists beside tuples an array of their rows.
    values = {"scale": [1, 0.5], "mask": (True, 2), "rows": [(1, 2), [3, 4]]}
    mzt.save({"w": torch.ones(1), **values}, archive_path, "t", durable=False)
    loaded = mzt.load(archive_path)
    assert torch.equal(loaded["scale"], torch.tensor([1.0, 0.5], dtype=torch.float64))
    assert torch.equal(loaded["mask"], torch.tensor([1, 2], dtype=torch.int64))
    assert torch.equal(loaded["rows"], torch.tensor([[1, 2], [3, 4]], dtype=torch.int64))
    arrays = modelzip.load(archive_path)
    assert "_python_types" not in arrays  # nothing recorded for them
    assert arrays["scale"].dtype == np.float64 and arrays["mask"].dtype == np.int64


class _ExtraState(nn.Module):
    """A module whose get_extra_state() is a dict (as transformer engine's FP8 modules and
    torchao's have): torch.save pickles it; modelzip stores it as a "dict" (GRAPH.md 4.2)."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))
        self.extra = {}

    def get_extra_state(self):
        return self.extra

    def set_extra_state(self, state):
        self.extra = state


def test_a_dict_of_get_extra_state_round_trips(archive_path):
    # It was refused: "parameter '_extra_state': a mapping is not an array".
    module = _ExtraState()
    module.extra = {"recipe": "delayed", "amax": torch.tensor([1.5, 2.0]), "step": 3,
                    "scales": [torch.ones(1), 0.5], "nested": {"on": True, "none": None},
                    "empty": {}}
    mzt.save(module.state_dict(), archive_path, "t", durable=False)
    state = mzt.load(archive_path)
    assert list(state) == ["weight", "_extra_state"]
    extra = state["_extra_state"]
    assert type(extra) is dict and list(extra) == list(module.extra)
    assert extra["recipe"] == "delayed" and extra["step"] == 3 and type(extra["step"]) is int
    assert torch.equal(extra["amax"], module.extra["amax"])
    assert type(extra["scales"]) is list and extra["scales"][1] == 0.5
    assert torch.equal(extra["scales"][0], torch.ones(1))
    assert extra["nested"] == {"on": True, "none": None} and extra["empty"] == {}
    fresh = _ExtraState()
    fresh.load_state_dict(state)
    assert fresh.extra["recipe"] == "delayed"
    again = _ExtraState()
    mzt.load_into(again, archive_path)  # the non-tensor value goes through load_state_dict
    assert again.extra["step"] == 3
    arrays = modelzip.load(archive_path)  # every other reader: the keys, then the values
    assert arrays["_extra_state"].tolist() == list(module.extra)
    assert arrays["_extra_state.0"][()] == "delayed"
    assert json.loads(str(arrays["_python_types"][()]).removeprefix("torch.python_types:"))[
        "_extra_state"] == "dict"


def test_a_dict_with_keys_that_are_not_str_is_refused(archive_path):
    with pytest.raises(TypeError, match=r"parameter 'x': a dict is stored with its keys as text, "
                                        r"and this one has the key 1 \(int\)"):
        mzt.save({"x": {1: "a"}}, archive_path, "t", durable=False)
    with pytest.raises(TypeError, match="parameter 'state': an optimizer's state_dict"):
        mzt.save({"state": {0: {}}, "param_groups": []}, archive_path, "t", durable=False)
    assert not archive_path.exists()


def test_a_dict_record_whose_keys_are_not_strings_is_refused(archive_path):
    record = np.array("torch.python_types:" + json.dumps({"d": "dict"}))
    modelzip.save(archive_path, "t", {"d": np.array(0), "_python_types": record}, durable=False)
    with pytest.raises(ValueError, match=r"parameter 'd': '_python_types' records a dict stored "
                                         r"element by element, but it holds int64"):
        mzt.load(archive_path)


def test_module_versions_of_a_plain_state_dict_come_back(archive_path, tmp_path):
    # state_dict()._metadata tells _load_from_state_dict which version of a module saved the
    # tensors (BatchNorm before version 2 had no num_batches_tracked); it was dropped.
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    saved = model.state_dict()
    mzt.save(saved, archive_path, "t", durable=False)
    torch.save(saved, tmp_path / "model.pt")
    expected = torch.load(tmp_path / "model.pt")._metadata
    loaded = mzt.load(archive_path)
    assert loaded._metadata == expected == saved._metadata
    assert loaded._metadata["1"] == {"version": 2}
    with modelzip.open(archive_path) as archive:
        assert archive.load_torch()._metadata == expected
        assert archive.tag_metadata() == {}  # not among the free-form pairs
    # The version reaches _load_from_state_dict: version 1 BatchNorms get num_batches_tracked.
    old = model.state_dict()
    del old["1.num_batches_tracked"]
    old._metadata["1"] = {"version": 1}
    mzt.save(old, archive_path, "v1", durable=False)
    fresh = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    fresh.load_state_dict(mzt.load(archive_path, "v1"))  # strict: the key is added by version


def test_empty_tensors_have_the_strides_torch_load_gives(archive_path, tmp_path):
    state = {"rows": torch.empty(0, 3), "cols": torch.empty(3, 0), "mid": torch.empty(2, 0, 4),
             "bf16": torch.empty(0, 5, dtype=torch.bfloat16)}
    mzt.save(state, archive_path, "t", durable=False)
    torch.save(state, tmp_path / "s.pt")
    expected = torch.load(tmp_path / "s.pt")
    loaded = mzt.load(archive_path)
    for name in state:
        assert loaded[name].shape == expected[name].shape
        assert loaded[name].stride() == expected[name].stride(), name
        assert loaded[name].dtype == expected[name].dtype


def test_reserved_names_are_not_found_like_missing_ones(archive_path):
    # load(names=["_python_types"]) returned {}; the record is not a key of the state dict.
    mzt.save({"w": torch.ones(1), "epoch": 5}, archive_path, "t", durable=False)
    with pytest.raises(modelzip.NotFoundError, match="'_python_types'.*reserved for the record"):
        mzt.load(archive_path, names=["_python_types"])
    with pytest.raises(KeyError):
        mzt.load(archive_path, names=["w", "_python_types"])
    assert list(mzt.load(archive_path, names=["epoch"])) == ["epoch"]


def test_an_empty_name_is_refused_naming_why(archive_path):
    # torch.save keeps {"": t}, but no module's state_dict() has such a key (register_buffer
    # and register_parameter refuse empty names) and the format has no empty names.
    with pytest.raises(ValueError, match="parameter '': a name cannot be empty .*no module's "
                                         "state_dict"):
        mzt.save({"": torch.ones(1)}, archive_path, "t", durable=False)
    assert not archive_path.exists()


def test_int_enums_load_as_their_int_values(archive_path):
    # torch.load unpickles the enum class; modelzip imports no class named in a file: an
    # IntEnum (a subclass of int) is stored and loaded as the int (docs/torch.md).
    import enum

    class Mode(enum.IntEnum):
        TRAIN = 1

    mzt.save({"mode": Mode.TRAIN}, archive_path, "t", durable=False)
    value = mzt.load(archive_path)["mode"]
    assert value == 1 and type(value) is int
    assert Mode(value) is Mode.TRAIN


def test_a_tuple_of_tensors_whose_element_names_are_taken_is_refused(archive_path):
    # It failed with "parameter 'p.0' is added twice", which did not say why.
    with pytest.raises(ValueError, match="parameter 'p': element 0 of its tuple of tensors is "
                                         "stored as p.0, a name the dict holds too"):
        mzt.save({"p": (torch.ones(1), None), "p.0": torch.zeros(1)}, archive_path, "t",
                 durable=False)


def test_a_tuple_of_tensors_loaded_by_name_brings_its_elements(archive_path):
    # names=["p"] gave (None, None): the elements p.0, p.1 of a tuple-of-tensors marker were not
    # loaded with it (lists recorded in _python_types already were).
    first, second = torch.arange(3, dtype=torch.float32), torch.ones(2, dtype=torch.int64)
    mzt.save({"w": torch.zeros(1), "p": (first, None, second)}, archive_path, "t", durable=False)
    for state in (mzt.load(archive_path, names=["p"]),
                  load_copied(archive_path, "t", torch.device("cpu"), names=["p"])):
        assert list(state) == ["p"]
        assert len(state["p"]) == 3 and state["p"][1] is None
        assert torch.equal(state["p"][0], first) and torch.equal(state["p"][2], second)


def test_a_forged_tuple_marker_cannot_make_a_load_build_a_huge_tuple(archive_path):
    # A 0-d string "torch.tuple:N" with N in the billions made the load build a tuple of N
    # Nones (hours and gigabytes); it is refused naming the parameter.
    modelzip.save(archive_path, "t", {"w": np.zeros(1, np.float32),
                                      "p": np.array("torch.tuple:999999999999")}, durable=False)
    for names in (None, ["p"]):
        with pytest.raises(ValueError, match=r"parameter 'p': the tuple marker records "
                                             r"999999999999 elements, more than the 16777216"):
            mzt.load(archive_path, names=names)
    modelzip.save(archive_path, "u", {"p": np.array("torch.tuple:" + "9" * 5000)}, durable=False)
    with pytest.raises(ValueError, match=r"parameter 'p': malformed tuple marker"):
        mzt.load(archive_path, "u")


def test_numpy_rng_state_loads_as_numpy_set_state_takes_it(archive_path):
    # np.random.get_state() saved, but its uint32 key array was loaded as a torch tensor, which
    # torch 1.13 cannot hold: every torch load raised TypeError "torch cannot hold uint32".
    np.random.seed(12)
    state = np.random.get_state()
    expected = np.random.standard_normal(5)
    mzt.save({"w": torch.ones(2), "numpy_rng": state}, archive_path, "t", durable=False)
    for loaded in torch_loads(archive_path):
        rng = loaded["numpy_rng"]
        assert type(rng) is tuple and rng[0] == "MT19937" and rng[2:] == state[2:]
        assert type(rng[1]) is np.ndarray and rng[1].dtype == np.uint32
        np.testing.assert_array_equal(rng[1], state[1])
        np.random.seed(0)
        np.random.set_state(rng)
        np.testing.assert_array_equal(np.random.standard_normal(5), expected)
    assert modelzip.load(archive_path)["numpy_rng.1"].dtype == np.uint32  # other readers: the array


def test_sets_slices_and_devices_load_as_saved(archive_path):
    # torch.save pickles them; modelzip.save refused each ("a set is not an array").
    values = {"ids": {3, 1, 2}, "names": frozenset({"b", "a"}), "mixed": {1, "a", None},
              "pairs": {(1, 2), (3, 4)}, "empty": set(), "window": slice(2, None, 3),
              "device": torch.device("cuda", 1), "cpu": torch.device("cpu"),
              "nested": [slice(0, 4), {5}, torch.device("cpu"), torch.ones(1)]}
    mzt.save({"w": torch.ones(2), **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        for name, value in values.items():
            assert same_value(state[name], value), name
    with modelzip.open(archive_path) as archive:
        record = json.loads(archive.tensor("_python_types")[()].removeprefix(
            "torch.python_types:"))
    assert {name: record[name] for name in values} == {
        "ids": "set[int]", "names": "frozenset[str]", "mixed": "set", "pairs": "set[tuple[int]]",
        "empty": "set[]", "window": "slice", "device": "torch.device", "cpu": "torch.device",
        "nested": "list"}
    arrays = modelzip.load(archive_path)
    np.testing.assert_array_equal(arrays["ids"], [1, 2, 3])  # sorted
    assert arrays["device"][()] == "cuda:1" and arrays["window"][()] == 3


def test_numpy_str_values_load_as_numpy_str(archive_path):
    # torch.load gives a np.str_ back as a np.str_ (labels from np.unique(...), list(array));
    # modelzip's torch loads gave a str, and lists of them lists of str.
    values = {"label": np.str_("cat"), "classes": list(np.array(["cat", "dog"])),
              "grid": (tuple(np.array(["a", "b"])), tuple(np.array(["c", "d"]))),
              "mixed": [np.str_("x"), "y"], "ids": {np.str_("b"), np.str_("a")},
              "marker": np.str_("torch.dtype:float32"), "empty": np.str_(""),
              "plain": ["x", "y"], "text": "z"}
    mzt.save({"w": torch.ones(2), **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        for name, value in values.items():
            assert same_value(state[name], value), name
        assert type(state["classes"][0]) is np.str_ and type(state["mixed"][1]) is str
        assert all(type(v) is np.str_ for v in state["ids"]) and state["ids"] == values["ids"]
    with modelzip.open(archive_path) as archive:
        record = json.loads(archive.tensor("_python_types")[()].removeprefix(
            "torch.python_types:"))
    assert {name: record.get(name) for name in values} == {
        "label": "numpy.str_", "classes": "list[numpy.str_]",
        "grid": "tuple[tuple[numpy.str_]]", "mixed": "list", "ids": "set[numpy.str_]",
        "marker": "numpy.str_", "empty": "numpy.str_", "plain": None, "text": None}
    arrays = modelzip.load(archive_path)  # other readers: the strings
    assert arrays["label"][()] == "cat" and arrays["classes"].tolist() == ["cat", "dog"]
    assert arrays["grid"].shape == (2, 2) and arrays["ids"].tolist() == ["a", "b"]


def test_numpy_bytes_values_load_as_numpy_bytes(archive_path):
    # bytes and bytearray load as saved; a np.bytes_ (a bytes subclass, what indexing an 'S'
    # array gives) was refused with "bytes cannot be stored: decode them to str...".
    values = {"raw": np.bytes_(b"\x00ab"), "empty": np.bytes_(b""),
              "rows": [np.bytes_(b"x"), b"y", torch.ones(1)], "plain": b"z"}
    mzt.save({"w": torch.ones(2), **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        for name, value in values.items():
            assert same_value(state[name], value), name
    with modelzip.open(archive_path) as archive:
        record = json.loads(archive.tensor("_python_types")[()].removeprefix(
            "torch.python_types:"))
    assert {name: record.get(name) for name in ("raw", "empty", "rows", "rows.0", "plain")} == {
        "raw": "numpy.bytes_", "empty": "numpy.bytes_", "rows": "list", "rows.0": "numpy.bytes_",
        "plain": "bytes"}
    assert modelzip.load(archive_path)["raw"].tolist() == [0, 97, 98]  # other readers: uint8


@pytest.mark.parametrize("record,arrays,message", [
    ({"s": "slice", "s.0": "int"}, {"s": np.array(1), "s.0": np.array(1)},
     "records a slice stored element by element, but its 1 elements do not make one"),
    ({"s": "set", "s.0": "list[int]"}, {"s": np.array(1), "s.0": np.arange(2)},
     "records a set stored element by element, but its 1 elements do not make one"),
    ({"d": "torch.device"}, {"d": np.array("nowhere:x")}, "records a torch.device, but"),
    ({"d": "torch.device"}, {"d": np.arange(2)}, "records a torch.device, but"),
    ({"a": "numpy.ndarray"}, {"a": None}, "records a numpy array, but"),
    ({"s": "set[list[int]]"}, {"s": np.zeros((1, 1), np.int64)}, "malformed record"),
])
def test_damaged_records_of_sets_slices_and_devices_name_the_parameter(archive_path, record,
                                                                         arrays, message):
    arrays = {name: value for name, value in arrays.items() if value is not None}
    if "a" in record:
        arrays["a"] = modelzip.SparseCOO(np.zeros((1, 1), np.int64), np.ones(1, np.float32), (2,))
    modelzip.save(archive_path, "t", {**arrays, "_python_types": np.array(
        "torch.python_types:" + json.dumps(record))}, durable=False)
    with pytest.raises(ValueError, match=re.escape(message)):
        mzt.load(archive_path)


def test_lists_of_tensors_load_as_lists_of_separate_tensors(archive_path):
    # torch.load gives [t1, t2] back as a list of the two tensors; modelzip.save tried to stack
    # the list into one array: "setting an array element with a sequence" for any list of
    # tensors (ragged or not), a stacked array for a list of numpy arrays (which comes back as
    # a numpy array, as torch.load gives it).
    first, second = torch.arange(3, dtype=torch.float32), torch.tensor([[7, 8]], dtype=torch.int64)
    values = {"buffers": [first, second], "ragged": [torch.ones(2), torch.zeros(3)],
              "nested": [[first, None, 3], (second, "text"), []], "tail": (torch.ones(1), 0.5),
              "window": [np.arange(2, dtype=np.uint8)], "after": torch.full((2,), 5.0)}
    expected = values
    mzt.save({"w": first, **values}, archive_path, "t", durable=False)
    for state in torch_loads(archive_path):
        assert list(state) == ["w", *values]
        for name, value in expected.items():
            assert same_value(state[name], value), name
    state = mzt.load(archive_path)
    assert state["buffers"][0].data_ptr() == state["w"].data_ptr()  # one tensor, as saved
    part = mzt.load(archive_path, names=["nested"])  # with the elements' parameters
    assert list(part) == ["nested"] and same_value(part["nested"], values["nested"])
    part = load_copied(archive_path, "t", torch.device("cpu"), names=["buffers"])
    assert list(part) == ["buffers"] and same_value(part["buffers"], values["buffers"])
    # Other readers see the length under the name and each element under NAME.i.
    arrays = modelzip.load(archive_path)
    assert (arrays["buffers"].dtype, arrays["buffers"].shape, arrays["buffers"][()]) == (
        np.int64, (), 2)
    assert np.array_equal(arrays["buffers.1"], second.numpy())
    assert arrays["nested.0.2"][()] == 3 and arrays["nested.1.1"][()] == "text"
    assert "nested.0.1" in arrays and "nested.2" in arrays  # None, and the empty list
    assert json.loads(arrays["_python_types"][()].removeprefix("torch.python_types:")) == {
        "buffers": "list", "ragged": "list", "nested": "list", "nested.0": "list",
        "nested.0.1": "None", "nested.0.2": "int", "nested.1": "tuple", "nested.2": "list[]",
        "tail": "tuple", "tail.1": "float", "window": "list",
        "window.0": "numpy.ndarray"}
    # modelzip.save of numpy arrays alone stores them alike; elements that were numpy arrays
    # load as numpy arrays (a state dict's own values, at the top, as tensors).
    modelzip.save(archive_path, "n", {"rows": [np.ones(2), np.zeros(3, np.int8)]}, durable=False)
    assert same_value(mzt.load(archive_path, "n")["rows"], [np.ones(2), np.zeros(3, np.int8)])


def test_a_list_of_tensors_whose_element_names_are_taken_is_refused(archive_path):
    with pytest.raises(ValueError, match="parameter 'b': element 1 of its list is stored as b.1, "
                                         "a name the dict holds too"):
        mzt.save({"b": [torch.ones(1), torch.ones(2)], "b.1": torch.zeros(1)}, archive_path, "t",
                 durable=False)
    assert not archive_path.exists()


def test_a_damaged_list_stored_element_by_element_is_an_error_naming_the_parameter(
        archive_path, monkeypatch):
    # Written as by another tool: a length far beyond the tag's parameters must not be counted
    # out, and a missing element is named.
    monkeypatch.setattr(modelzip._values, "expand_torch_objects",
                        lambda arrays, raw_bits=None: list(arrays.items()))
    record = 'torch.python_types:{"n": "list", "m": "tuple"}'
    modelzip.save(archive_path, "t", {"n": np.array(2**62), "m": np.array(2), "m.0": np.ones(1),
                                      "_python_types": record}, durable=False)
    modelzip.save(archive_path, "u", {"m": np.array(2), "m.0": np.ones(1),
                                      "_python_types": 'torch.python_types:{"m": "tuple"}'},
                  durable=False)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"parameter 'n': '_python_types' records a list stored "
                                         r"element by element, but it holds int64 of shape \(\), "
                                         r"not its length \(a 0-d int64 of at most the tag's 4 "):
        mzt.load(archive_path, "t")
    with pytest.raises(ValueError, match=r"parameter 'm': '_python_types' records a tuple of 2 "
                                         r"elements stored as m.0...m.1, but the tag has no "
                                         r"parameter 'm.1'"):
        mzt.load(archive_path, "u", names=["m"])


@pytest.mark.parametrize("record, message", [
    ("torch.python_types:[1]", "malformed record"),
    ('torch.python_types:{"w": "decimal"}', "malformed record"),
    ('torch.python_types:{"w": "complex"}', r"records a Python complex, but it is stored as "
                                            r"float32 of shape \(2,\)"),
    ('torch.python_types:{"w": "int"}', "records a Python int, but it is stored as float32 of "
                                        r"shape \(2,\)"),
    ('torch.python_types:{"w": "list[int]"}', r"records a Python list\[int\], but it is stored "
                                              r"as float32 of shape \(2,\)"),
    ('torch.python_types:{"w": "tuple[tuple[float]]"}', r"stored as float32 of shape \(2,\) "
                                                        r"\(a tuple\[tuple\[float\]\] is stored "
                                                        r"2-d as float64\)"),
    ('torch.python_types:{"w": "list[]"}', "is stored 1-d and empty"),
    ('torch.python_types:{"w": "list[None]"}', "malformed record"),
    ('torch.python_types:{"w": "list"}', r"records a list stored element by element, but it "
                                         r"holds float32 of shape \(2,\)"),
    ('torch.python_types:{"w": "numpy.bfloat16"}', "malformed record"),
    pytest.param('torch.python_types:{"w": "' + "list[" * 5000 + "int" + "]" * 5000 + '"}',
                 "malformed record", id="deep-kind"),
    pytest.param("torch.python_types:" + "[" * 100000, "malformed record",  # a RecursionError
                 id="deep-json")])
def test_a_damaged_python_types_record_is_an_error_naming_the_parameter(archive_path, record,
                                                                        message, monkeypatch):
    # modelzip.save refuses such text under the record's name: written as by another tool.
    monkeypatch.setattr(modelzip._values, "expand_torch_objects",
                        lambda arrays, raw_bits=None: list(arrays.items()))
    modelzip.save(archive_path, "t", {"w": np.zeros(2, np.float32), "_python_types": record},
                  durable=False)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=message):
        mzt.load(archive_path)


def save_as_another_tool(path, tag, arrays, monkeypatch):
    """modelzip.save of ``arrays`` as they are: text under "_python_types" stored as given."""
    with monkeypatch.context() as patched:
        patched.setattr(modelzip._values, "expand_torch_objects",
                        lambda arrays, raw_bits=None: list(arrays.items()))
        modelzip.save(path, tag, arrays, durable=False)


def test_a_record_cannot_expand_a_blob_into_a_much_larger_python_list(archive_path, monkeypatch):
    # A damaged or forged record made any integer array a list of Python ints (an int8 array
    # marked "list[int]"), or of numpy scalars ("list[numpy.int8]": some 40 bytes of memory for
    # each byte of the file, 40 GiB for a 1 GiB blob).
    count = modelzip._values.MAX_PYTHON_ELEMENTS + 1
    save_as_another_tool(archive_path, "t", {
        "small": np.zeros(4, np.int8), "big": np.zeros(count, np.int8),
        "_python_types": 'torch.python_types:{"small": "list[int]", "big": "list[numpy.int8]"}'},
        monkeypatch)
    with pytest.raises(ValueError, match=r"parameter 'small': '_python_types' records a Python "
                                         r"list\[int\], but it is stored as int8 of shape \(4,\) "
                                         r"\(a list\[int\] is stored 1-d as int64 or uint64\)"):
        mzt.load(archive_path, names=["small"])
    with pytest.raises(ValueError, match=rf"parameter 'big': '_python_types' records a Python "
                                         rf"list\[numpy.int8\] of {count} elements, .* more than "
                                         rf"the {count - 1} the torch loads rebuild"):
        mzt.load(archive_path, names=["big"])
    with modelzip.open(archive_path) as archive:
        assert archive.load("t", names=["big"])["big"].size == count  # the array


def test_a_dict_of_longer_python_lists_than_the_torch_loads_rebuild_is_refused(archive_path,
                                                                                monkeypatch):
    monkeypatch.setattr(modelzip._values, "MAX_PYTHON_ELEMENTS", 5)
    mzt.save({"a": [1, 2, 3], "b": ("x", "y")}, archive_path, "t", durable=False)  # 5 in all
    with pytest.raises(ValueError, match=r"parameter 'b': the lists and tuples of Python values "
                                         r"of this dict hold 6 elements with this one, more than "
                                         r"the 5 .* store long ones as np.array"):
        mzt.save({"a": [[1, 2], [3, 4]], "b": (0.5, 1.5)}, archive_path, "u", durable=False)


@pytest.mark.parametrize("text", ["torch.metadata:{", "torch.metadata:" + "[" * 100000],
                         ids=["bad-json", "deep-json"])
def test_damaged_module_versions_are_an_error_naming_the_parameter(archive_path, text,
                                                                   monkeypatch):
    # A JSONDecodeError that named nothing, or a RecursionError.
    monkeypatch.setattr(modelzip._values, "expand_torch_objects",
                        lambda arrays, raw_bits=None: list(arrays.items()))
    modelzip.save(archive_path, "t", {"w": np.zeros(2, np.float32), "_metadata": text},
                  durable=False)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="parameter '_metadata': malformed module versions"):
        mzt.load(archive_path)
