"""Quantized tensors in Python (issue 18): QuantizedTensor, dequantize=, torch's quantized tensors
round-tripping exactly, a quantize_dynamic model's state dict, and modelzip.quantize()."""
import json
import subprocess

import numpy as np
import pytest
import torch
from torch import nn

import modelzip
from conftest import CLI, save


def assert_same_quantized(got, expected):
    """Bit-exact equality of two torch quantized tensors: integers, scheme and parameters."""
    assert got.is_quantized and got.dtype == expected.dtype and got.shape == expected.shape
    assert got.qscheme() == expected.qscheme()
    assert torch.equal(got.int_repr(), expected.int_repr())
    if expected.qscheme() == torch.per_tensor_affine:
        assert got.q_scale() == expected.q_scale()  # float == float: exact
        assert got.q_zero_point() == expected.q_zero_point()
    else:
        assert got.q_per_channel_axis() == expected.q_per_channel_axis()
        assert torch.equal(got.q_per_channel_scales(), expected.q_per_channel_scales())
        assert torch.equal(got.q_per_channel_zero_points(), expected.q_per_channel_zero_points())


def torch_quantized_tensors():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(6, 5, generator=g)
    conv = torch.randn(4, 3, 2, 2, generator=g)
    scales = torch.tensor([0.013, 0.02, 1 / 3, 0.0071], dtype=torch.float64)
    return {
        # an awkward scale (not a float32 number) must survive as the double torch keeps
        "per_tensor_qint8": torch.quantize_per_tensor(x, 0.1 / 3, -5, torch.qint8),
        "per_tensor_quint8": torch.quantize_per_tensor(x, 0.05, 128, torch.quint8),
        "per_channel_qint8": torch.quantize_per_channel(conv, scales, torch.tensor([0, 1, -2, 3]),
                                                        0, torch.qint8),
        "per_channel_quint8_axis1": torch.quantize_per_channel(
            x, torch.linspace(0.01, 0.05, 5, dtype=torch.float64),
            torch.tensor([0, 10, 128, 200, 255]), 1, torch.quint8),
        "extremes": torch.quantize_per_tensor(torch.tensor([-1e6, 0.0, 1e6]), 1.0, 0, torch.qint8),
    }


def test_torch_quantized_tensors_round_trip_exactly(archive_path):
    tensors = torch_quantized_tensors()
    save(archive_path, "q", tensors)
    with modelzip.open(archive_path) as ar:
        infos = {p.name: p for p in ar.params()}
        state = ar.load_torch()
        loaded = ar.load()
    for name, expected in tensors.items():
        assert infos[name].layout == "quantized" and infos[name].dtype == "float32", name
        assert_same_quantized(state[name], expected)
        # The library dequantizes as torch does for these (float32 results of (q - zp) * scale).
        q = loaded[name]
        assert isinstance(q, modelzip.QuantizedTensor) and q.shape == tuple(expected.shape)
        np.testing.assert_array_equal(q.int_values(), expected.int_repr().numpy())
    qt = loaded["per_tensor_qint8"]
    assert (qt.scheme, qt.storage, qt.scale, qt.zero_point) == (
        "affine-per-tensor", "int8", 0.1 / 3, -5)
    assert not qt.values.flags.writeable  # a zero-copy view into the archive
    pc = loaded["per_channel_qint8"]
    assert (pc.scheme, pc.axis, pc.scales.dtype, pc.zero_points.dtype) == (
        "affine-per-axis", 0, np.float64, np.int64)
    np.testing.assert_array_equal(pc.zero_points, [0, 1, -2, 3])


def test_dequantize_follows_the_formula(archive_path):
    tensors = torch_quantized_tensors()
    save(archive_path, "q", tensors)
    with modelzip.open(archive_path) as ar:
        for name, expected in tensors.items():
            q = ar.tensor(name)
            ints = q.int_values().astype(np.float64)
            if q.scheme == "affine-per-tensor":
                want = (ints - q.zero_point) * q.scale
            else:
                view = [1] * len(q.shape)
                view[q.axis] = -1
                want = (ints - q.zero_points.reshape(view)) * q.scales.reshape(view)
            want = want.astype(np.float32)  # float64 arithmetic, rounded once (FORMAT.md 6.1)
            got = ar.tensor(name, dequantize=True)
            assert got.dtype == np.float32 and got.flags.writeable, name
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(q.dequantize(), want)
            np.testing.assert_array_equal(ar.load(dequantize=True)[name], want)
            assert ar.load_torch(dequantize=True)[name].dtype == torch.float32
            # torch computes in float32; it agrees to within one rounding step.
            np.testing.assert_allclose(expected.dequantize().numpy(), want, rtol=1e-6, atol=1e-30)
        assert q.dequantize("float64").dtype == np.float64


def test_quantized_tensors_built_in_python(archive_path):
    values = np.array([[-8, 7, 3], [0, -1, 5]], dtype=np.int8)
    packed = np.array([(values.flat[2 * i] & 0xF) | ((values.flat[2 * i + 1] & 0xF) << 4)
                       for i in range(3)], dtype=np.uint8)  # low nibble first
    int4 = modelzip.QuantizedTensor(packed, (2, 3), "float16", "block-symmetric", "int4", axis=1,
                                    block_size=2, scales=np.array([0.5, 1, 2, 0.25], np.float16))
    np.testing.assert_array_equal(int4.int_values(), values)
    per_axis = modelzip.QuantizedTensor(
        np.array([[1, 255], [0, 128]], np.uint8), (2, 2), "float64", "affine-per-axis", "uint8",
        axis=0, scales=np.array([0.5, 0.25]), zero_points=np.array([1, 128]))
    # Flat scales take the shape FORMAT.md 6.1 gives them: shape[:axis] + [blocks per row].
    assert int4.scales.shape == (2, 2) and per_axis.scales.shape == (2,)
    save(archive_path, "t", {"int4": int4, "per_axis": per_axis})
    with modelzip.open(archive_path) as ar:
        assert ar.tensor("int4") == int4 and ar.tensor("per_axis") == per_axis
        assert ar.tensor("int4").scales.shape == (2, 2)
        np.testing.assert_array_equal(ar.tensor("int4").scales, [[0.5, 1], [2, 0.25]])
        assert ar.param("int4").layout == "quantized" and ar.param("int4").dtype == "float16"
        # block of 2 along rows of 3: scales [row0: b0, b1 | row1: b0, b1]
        np.testing.assert_array_equal(
            ar.tensor("int4", dequantize=True),
            np.array([[-4, 3.5, 3], [0, -2, 1.25]], np.float16))
        np.testing.assert_array_equal(ar.tensor("per_axis", dequantize=True),
                                      [[0.0, 127.0], [-32.0, 0.0]])
        with pytest.raises(TypeError, match="'int4'.*dequantize=True"):
            ar.load_torch()
    assert CLI, "MODELZIP_CLI is not set"
    # The CLI checks what Python wrote, quantization headers included.
    subprocess.run([CLI, "verify", str(archive_path)], check=True, capture_output=True)


def test_bad_quantization_parameters_are_refused_with_a_sentence(archive_path):
    ok = dict(values=np.zeros(4, np.int8), shape=(4,), scheme="affine-per-tensor",
              storage="int8", scale=0.5, zero_point=0)
    for change, pattern in [({"scale": 0.0}, "scale"), ({"scale": float("nan")}, "scale"),
                            ({"zero_point": 200}, "zero.point"),
                            ({"values": np.zeros(3, np.int8)}, "values"),
                            ({"values": np.zeros(4, np.uint8)},
                             "int8 values must be an int8 array, not uint8$"),
                            ({"scheme": "affine-per-axis", "axis": 1,
                              "scales": np.ones(4), "zero_points": np.zeros(4, np.int64)}, "axis"),
                            ({"storage": "int2"}, "storage")]:
        bad = modelzip.QuantizedTensor(**{**ok, **change})
        with pytest.raises((ValueError, TypeError), match=pattern):
            save(archive_path, "t", {"w": bad})
    assert not archive_path.exists()
    with pytest.raises(TypeError, match="qint32"):
        save(archive_path, "t", {"w": torch.quantize_per_tensor(torch.ones(2), 1.0, 0, torch.qint32)})


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8, bias=False)
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.fc2(torch.relu(self.fc1(x))))


def quantized_net(seed):
    torch.manual_seed(seed)
    return torch.ao.quantization.quantize_dynamic(Net().eval(), {nn.Linear}, dtype=torch.qint8)


def test_quantize_dynamic_state_dict_loads_back_with_identical_outputs(archive_path):
    model = quantized_net(0)
    state = model.state_dict()
    assert isinstance(state["fc1._packed_params._packed_params"], tuple)
    save(archive_path, "int8", state)
    with modelzip.open(archive_path) as ar:
        names = [p.name for p in ar.params()]
        assert "fc1._packed_params._packed_params.0" in names  # the quantized weight
        assert "fc2._packed_params._packed_params.1" not in names  # bias None: nothing stored
        loaded = ar.load_torch()
    assert list(loaded) == list(state)
    assert loaded["fc1._packed_params.dtype"] is torch.qint8
    weight, bias = loaded["fc1._packed_params._packed_params"]
    assert_same_quantized(weight, state["fc1._packed_params._packed_params"][0])
    assert torch.equal(bias, state["fc1._packed_params._packed_params"][1])
    assert loaded["fc2._packed_params._packed_params"][1] is None
    other = quantized_net(1)  # different weights until loaded
    x = torch.randn(5, 16)
    assert not torch.equal(other(x), model(x))
    other.load_state_dict(loaded)
    assert torch.equal(other(x), model(x))


def test_values_that_are_no_arrays_are_named_by_type(archive_path):
    # A quantize_dynamic LSTM's state dict holds TorchScript objects (its packed weights); an
    # object of any class became a 0-d object array, refused as "object arrays can only be
    # stored when every element is a str", which named neither the type nor what to do.
    torch.manual_seed(0)
    lstm = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.LSTM(4, 4)), {nn.LSTM},
                                                  dtype=torch.qint8)
    state = lstm.state_dict()
    with pytest.raises(TypeError) as e:
        save(archive_path, "t", state)
    assert str(e.value) == (
        "parameter '0._all_weight_values.0.param': a torch.ScriptObject is not an array "
        "(TorchScript objects, such as the packed weights of quantize_dynamic's LSTM and GRU "
        "modules, cannot be stored; quantize_dynamic's nn.Linear modules can)")

    class Opaque:
        pass

    with pytest.raises(TypeError) as e:
        save(archive_path, "t", {"w": np.ones(2), "x": Opaque()})
    assert str(e.value) == (
        "parameter 'x': a test_quantized.Opaque is not an array (save numpy arrays, torch "
        "tensors, objects with __array__ or .numpy(), str or lists of str, SparseCOO, "
        "QuantizedTensor or Embeddings)")
    assert not archive_path.exists()
    # Object arrays of other things keep their message; 0-d numbers are arrays.
    with pytest.raises(TypeError, match="object arrays can only be stored when every element"):
        save(archive_path, "t", {"x": np.array([Opaque()], dtype=object)})
    save(archive_path, "t", {"n": 3, "f": 1.5, "s": "text"})
    assert modelzip.open(archive_path).load()["n"].item() == 3


def test_quantize_a_tag_and_load_it_dequantized(archive_path):
    torch.manual_seed(0)
    model = Net()
    save(archive_path, "float", model.state_dict())
    result = modelzip.quantize(archive_path, "float", "int8", scheme="int8-per-channel",
                               params=["fc*.weight"], durable=False)
    assert result.quantized == ["fc1.weight", "fc2.weight"]
    assert set(result.referenced) == {"fc1.bias", "norm.weight", "norm.bias"}
    with modelzip.open(archive_path) as ar:
        assert ar.param("fc1.bias", "int8").shared  # a reference, not a copy
        q = ar.tensor("fc1.weight", "int8")
        assert (q.scheme, q.storage, q.axis) == ("affine-per-axis", "int8", 0)
        weights = ar.load_torch("int8", dequantize=True)
    float_weight = model.fc1.weight.detach().numpy()
    error = np.abs(weights["fc1.weight"].numpy() - float_weight)
    assert np.all(error <= q.scales[:, None] / 2 * (1 + 1e-6))  # half a step
    with pytest.raises(modelzip.InvalidArgumentError, match="scheme"):
        modelzip.quantize(archive_path, "float", "x", scheme="int3", durable=False)
    with pytest.raises(modelzip.NotFoundError):
        modelzip.quantize(archive_path, "nope", "x", durable=False)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_tensor_files_hold_quantized_tensors_as_integers_and_scales(archive_path, tmp_path,
                                                                   suffix):
    """export_tensor_file writes torch's quantized tensors as NAME, NAME.scales,
    NAME.zero_points and a NAME.quantization description (docs/cli.md, "Export and
    import of quantized tensors"); numpy alone gives torch's values from them;
    read_tensor_file and import_tensor_files join them back exactly."""
    tensors = torch_quantized_tensors()
    save(archive_path, "q", tensors)
    out = tmp_path / ("q" + suffix)
    modelzip.export_tensor_file(archive_path, out, "q")
    if suffix == ".npz":
        with np.load(out, allow_pickle=False) as z:
            plain = {k: z[k] for k in z.files}
        d = json.loads(str(plain["per_channel_quint8_axis1.quantization"]))
        assert d == {"version": 1, "scheme": "affine-per-axis", "storage": "uint8", "bits": 8,
                     "axis": 1, "dtype": "float32"}
        # torch's per-channel uint8 along axis 1, rebuilt by broadcasting along axis 1.
        q = plain["per_channel_quint8_axis1"]
        assert q.dtype == np.uint8 and q.shape == (6, 5)
        x = ((q - plain["per_channel_quint8_axis1.zero_points"].reshape(1, 5))
             * plain["per_channel_quint8_axis1.scales"].reshape(1, 5)).astype(np.float32)
        np.testing.assert_array_equal(x, tensors["per_channel_quint8_axis1"].dequantize().numpy())
        assert float(plain["per_tensor_qint8.scales"]) == 0.1 / 3  # the exact double
        assert int(plain["per_tensor_qint8.zero_points"]) == -5
    back, meta = modelzip.read_tensor_file(out)
    assert meta == {} and sorted(back) == sorted(tensors)
    with modelzip.open(archive_path) as ar:
        for name, q in ar.load().items():
            assert isinstance(back[name], modelzip.QuantizedTensor) and back[name] == q, name
    modelzip.import_tensor_files(archive_path, "back", [out], durable=False)
    with modelzip.open(archive_path) as ar:
        state = ar.load_torch(tag="back")
    for name, expected in tensors.items():
        assert_same_quantized(state[name], expected)
