"""torch state_dict round trips through numpy, without copies on the way in."""
import numpy as np
import pytest
# A missing torch fails this module (no skipped checks): .ci/install-deps installs python3-torch.
import torch
from torch import nn

import modelzip
from conftest import save


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.lstm = nn.LSTM(8, 6, batch_first=True)
        self.norm = nn.BatchNorm1d(6)
        self.out = nn.Linear(6, 3)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        return self.out(self.norm(h[:, -1]))


def assert_state_dicts_equal(loaded, expected):
    assert list(loaded) == list(expected)
    for name, tensor in expected.items():
        assert loaded[name].dtype == tensor.dtype, name
        assert loaded[name].shape == tensor.shape, name
        assert torch.equal(loaded[name], tensor), name


def test_state_dict_round_trip_into_a_fresh_module(archive_path):
    torch.manual_seed(1)
    model = Net()
    model.train()
    model(torch.randint(0, 50, (4, 7)))  # batch norm statistics, num_batches_tracked = 1
    model.eval()
    save(archive_path, "t", model.state_dict())
    with modelzip.open(archive_path) as ar:
        assert ar.param("norm.num_batches_tracked").dtype == "int64"
        assert ar.param("norm.num_batches_tracked").shape == ()
        state = ar.load_torch()
    assert_state_dicts_equal(state, model.state_dict())
    fresh = Net()
    fresh.load_state_dict(state)
    fresh.eval()
    tokens = torch.randint(0, 50, (3, 5))
    with torch.no_grad():
        assert torch.equal(fresh(tokens), model(tokens))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_module_in_other_float_types(archive_path, dtype):
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)).to(dtype)
    save(archive_path, "t", model.state_dict())
    with modelzip.open(archive_path) as ar:
        assert {p.dtype for p in ar.params()} == {str(dtype).removeprefix("torch.")}
        if dtype == torch.bfloat16:
            assert ar.tensor("0.weight").dtype == np.uint16  # numpy has no bfloat16
        state = ar.load_torch()
    assert_state_dicts_equal(state, model.state_dict())


def test_tensors_needing_care(archive_path):
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    tensors = {
        "requires_grad": torch.ones(3, requires_grad=True),
        "transposed": base.T,
        "sliced": base[:, 1::2],
        "bool": torch.tensor([True, False]),
        "int8": torch.tensor([-128, 127], dtype=torch.int8),
        "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 4),
        "sparse": torch.sparse_coo_tensor([[0, 2], [1, 0]], [5.0, 6.0], (3, 2)),
        # numpy() refuses these views: stored as the values they show
        "conjugate bit": torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64).conj(),
        "negative bit": torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64).conj().imag,
        "parameter": nn.Parameter(torch.tensor([0.5, -0.5])),
    }
    assert tensors["conjugate bit"].is_conj() and tensors["negative bit"].is_neg()
    save(archive_path, "t", tensors)
    with modelzip.open(archive_path) as ar:
        assert ar.param("sparse").layout == "sparse_coo"
        state = ar.load_torch()
    for name, expected in tensors.items():
        got = state[name]
        if expected.is_sparse:
            assert got.is_sparse and torch.equal(got.to_dense(), expected.to_dense())
        else:
            assert got.dtype == expected.dtype and torch.equal(got, expected.detach()), name
    assert not state["requires_grad"].requires_grad


def test_meta_tensors_are_refused_by_name(archive_path):
    """A model built on the meta device has no data: the error names the parameter."""
    with pytest.raises(TypeError, match="parameter 'fc.weight': .*meta device has no data"):
        save(archive_path, "t", {"fc.weight": torch.empty(2, 3, device="meta")})
    assert not archive_path.exists()


def test_load_state_dict_of_numpy_arrays_names_the_torch_loader(archive_path):
    """model.load_state_dict(modelzip.load(p)): one TypeError that says what to call instead of
    one torch error per parameter; what load() returns is otherwise a plain dict."""
    model = nn.Linear(3, 2)
    save(archive_path, "t", model.state_dict())
    for loaded in (modelzip.load(archive_path), modelzip.open(archive_path).load()):
        with pytest.raises(TypeError) as info:
            model.load_state_dict(loaded)
        message = str(info.value)
        assert "numpy arrays" in message and ".load_torch(tag)" in message, message
        assert "\n" not in message
        with pytest.raises(TypeError):
            model.load_state_dict(loaded, strict=False)
        assert isinstance(loaded, dict) and list(loaded) == ["weight", "bias"]
        assert loaded == dict(loaded) and type(dict(loaded)) is dict
        assert np.array_equal(loaded["weight"], model.weight.detach().numpy())
        assert not hasattr(loaded, "__dict__")  # no other attributes than a dict's
    model.load_state_dict(modelzip.open(archive_path).load_torch())  # the loader it names


def test_saving_borrows_the_tensor_memory(archive_path):
    """The archive holds what the tensor contains at commit time: it was not copied at add_tag."""
    weight = torch.zeros(4)
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("t", {"w": weight})
        weight += 7  # in place, after staging
    assert modelzip.load(archive_path)["w"].tolist() == [7.0] * 4


def test_load_torch_gives_writable_owned_tensors(archive_path):
    save(archive_path, "t", {"w": torch.ones(3)})
    with modelzip.open(archive_path) as ar:
        w = ar.load_torch()["w"]
    w += 1  # owned memory: writing is fine
    assert w.tolist() == [2.0] * 3 and modelzip.load(archive_path)["w"].tolist() == [1.0] * 3


def test_load_torch_rejects_what_torch_cannot_hold(archive_path):
    save(archive_path, "t", {"big": np.array([1, 2], np.uint32)})
    with modelzip.open(archive_path) as ar:
        if hasattr(torch, "uint32"):
            pytest.skip(f"torch {torch.__version__} has uint32 tensors")
        with pytest.raises(TypeError, match="'big': torch cannot hold uint32"):
            ar.load_torch()


def test_load_torch_gives_text_back_as_text(archive_path):
    # torch has no string tensors: str and lists of str (which modelzip.save takes from a state
    # dict, e.g. a module's extra state) load as the text they were (test_torch_load.py).
    save(archive_path, "t", {"names": ["a", "b"], "version": "v2", "w": np.ones(2)})
    with modelzip.open(archive_path) as ar:
        state = ar.load_torch()
    assert state["names"] == ["a", "b"] and state["version"] == "v2"
    assert torch.equal(state["w"], torch.ones(2, dtype=torch.float64))
