"""modelzip.torch: whole training checkpoints (model, optimizer by parameter name, counters)."""
import copy
import io
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import modelzip
import modelzip.torch as mzt
from conftest import CLI, save

HERE = pathlib.Path(__file__).parent


def run_training(*args):
    subprocess.run([sys.executable, str(HERE / "torch_training.py"), *map(str, args)], check=True,
                   env=os.environ, timeout=300)


def assert_same(a, b, where="state"):
    """Bitwise equality of nested torch states (tensors and numpy arrays compared by dtype, shape
    and bits)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a.view(-1).view(torch.uint8) if a.numel() else a,
                           b.view(-1).view(torch.uint8) if b.numel() else b), where
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(map(str, a)) == sorted(map(str, b)), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("kind", ["adam", "sgd", "custom", "block"])
def test_resume_in_a_fresh_process_is_bit_exact(tmp_path, kind):
    """Train 12 steps without a break; separately resume from step 4 in a new process (after the
    archive gained the newer tag step-8) and train to 12: every bit must agree. block: dropout and
    batches from the global RNGs, whose states extra= carries, background saves with keep_last
    (the losses of every step and the final RNG states must agree too)."""
    archive = tmp_path / "run.zip"
    run_training("train", archive, kind, tmp_path / "uninterrupted.pt")
    with modelzip.open(archive) as ar:
        assert ar.tags == (["step-4", "step-6", "step-8"] if kind == "block"
                           else ["step-4", "step-8"])
    run_training("resume", archive, kind, tmp_path / "resumed.pt", "step-4")
    expected = torch.load(tmp_path / "uninterrupted.pt")
    resumed = torch.load(tmp_path / "resumed.pt")
    assert_same(resumed, expected)
    assert expected["optimizer"]["state"], "the optimizer kept state"
    # Resuming from the newest tag continues just as well.
    run_training("resume", archive, kind, tmp_path / "resumed8.pt", "step-8")
    assert_same(torch.load(tmp_path / "resumed8.pt"), expected)


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def train(model, optimizer, steps):
    for i in range(steps):
        optimizer.zero_grad()
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3) / (i + 1)
        model(x).pow(2).sum().backward()
        optimizer.step()


def test_info_says_when_the_updater_only_stands_in_for_the_optimizer(archive_path):
    # AdamW with two param groups (weight decay on matrices only) has no exact schema
    # equivalent: the config's updater is Sgd with the first group's learning rate, which
    # `modelzip info` printed as "updater: Sgd (learning_rate 0.01)" for an AdamW run.
    model = Small()
    matrices = [p for p in model.parameters() if p.ndim > 1]
    vectors = [p for p in model.parameters() if p.ndim <= 1]
    optimizer = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                   {"params": vectors, "weight_decay": 0.0}], lr=0.01)
    train(model, optimizer, 1)
    mzt.save_checkpoint(archive_path, "s1", model, optimizer, durable=False)
    exact = torch.optim.Adam(model.parameters(), lr=0.01)
    train(model, exact, 1)
    mzt.save_checkpoint(archive_path, "s2", model, exact, durable=False)
    lines = subprocess.run([CLI, "info", archive_path, "--tag", "s1"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert "training  updater: Sgd (learning_rate 0.01): not the optimizer, which is "\
           "torch.optim.adamw.AdamW (no exact equivalent: property torch.param_groups holds "\
           "its settings)" in lines
    # Several optimizers (a mapping): the updater stands in for all of them.
    several = {"matrices": torch.optim.AdamW(matrices, lr=0.01),
               "vectors": torch.optim.SGD(vectors, lr=0.1)}
    mzt.save_checkpoint(archive_path, "s3", model, several, durable=False)
    lines = subprocess.run([CLI, "info", archive_path, "--tag", "s3"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert "training  updater: Sgd (learning_rate 0.01): not the optimizers (no exact "\
           "equivalent: property torch.optimizers holds each one's class and settings)" in lines
    lines = subprocess.run([CLI, "info", archive_path, "--tag", "s2"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert "training  updater: Adam (learning_rate 0.01, beta1 0.9, beta2 0.999, epsilon 1e-08)"\
        in lines


def test_adam_state_is_stored_by_parameter_name(archive_path):
    torch.manual_seed(0)
    model = Small()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003, betas=(0.8, 0.99), eps=1e-7,
                                 weight_decay=0.02)
    train(model, optimizer, 3)
    mzt.save_checkpoint(archive_path, "s3", model, optimizer, epoch=1, durable=False)
    with modelzip.open(archive_path) as ar:
        states = {(s.name, s.state): s for s in ar.updater_states()}
        names = [n for n, _ in model.named_parameters()]
        assert set(states) == {(n, k) for n in names for k in ("exp_avg", "exp_avg_sq", "step")}
        for name, p in model.named_parameters():
            st = optimizer.state[p]
            assert np.array_equal(ar.updater_state(name, "exp_avg"), st["exp_avg"].numpy())
            assert np.array_equal(ar.updater_state(name, "exp_avg_sq"), st["exp_avg_sq"].numpy())
            assert ar.updater_state(name, "step").tolist() == 3.0
        config = ar.training_config()
    assert config["updater"] == {"type": "Adam", "learning_rate": 0.003, "beta1": 0.8,
                                 "beta2": 0.99, "epsilon": 1e-7}
    assert config["regularization"] == [
        {"type": "l2", "coefficient": {"schedule": "FixedSchedule", "value": 0.02},
         "apply_learning_rate": True}]
    assert config["iteration_count"] == 3  # the optimizer's own step count
    assert config["epoch_count"] == 1 and config["minimize"] is True
    props = config["properties"]
    assert props["torch.optimizer"] == "torch.optim.adam.Adam"
    assert props["torch.updater_exact"] == "true"
    groups = json.loads(props["torch.param_groups"])
    assert groups[0]["params"] == names and groups[0]["lr"] == 0.003
    assert groups[0]["betas"] == {"$tuple": [0.8, 0.99]}
    # The command line reads the same config.
    info = json.loads(subprocess.run([CLI, "info", str(archive_path), "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    assert info["training"]["updater"]["type"] == "Adam"
    assert info["training"]["iteration_count"] == 3


@pytest.mark.parametrize("make, updater, exact", [
    (lambda p: torch.optim.SGD(p, lr=0.1), {"type": "Sgd", "learning_rate": 0.1}, True),
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
     {"type": "Nesterovs", "learning_rate": 0.1, "momentum": 0.9}, True),
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), {"type": "Sgd", "learning_rate": 0.1},
     False),
    (lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
     {"type": "AdamW", "learning_rate": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
      "weight_decay": 0.1}, True),
    (lambda p: torch.optim.Adagrad(p, lr=0.1), {"type": "AdaGrad", "learning_rate": 0.1,
                                                "epsilon": 1e-10}, True),
    (lambda p: torch.optim.RMSprop(p, lr=0.01), {"type": "Sgd", "learning_rate": 0.01}, False),
])
def test_optimizers_map_to_the_schema_updater_only_when_exact(archive_path, make, updater, exact):
    torch.manual_seed(0)
    model = Small()
    optimizer = make(model.parameters())
    train(model, optimizer, 2)
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    with modelzip.open(archive_path) as ar:
        config = ar.training_config()
    assert config["properties"]["torch.updater_exact"] == ("true" if exact else "false")
    assert config["updater"] == updater
    fresh_model = Small()
    fresh = make(fresh_model.parameters())
    mzt.load_checkpoint(archive_path, None, fresh_model, fresh)
    assert_same(fresh.state_dict(), optimizer.state_dict())


def test_unknown_optimizer_keeps_tensors_and_scalars_losslessly(archive_path):
    sys.path.insert(0, str(HERE))
    try:
        from torch_training import Lookahead, Net
    finally:
        sys.path.remove(str(HERE))
    torch.manual_seed(0)
    model = Net()
    optimizer = Lookahead([{"params": list(model.embed.parameters()), "mix": (0.5, float("inf"))},
                           {"params": list(model.hidden.parameters()), "tag": "h", "lr": 1e-3},
                           {"params": list(model.norm.parameters()) + [model.out.bias]}])
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    optimizer.param_groups[0]["mix"] = (0.5, 0.25)
    optimizer.step()
    optimizer.param_groups[0]["mix"] = (0.5, float("inf"))
    # (No str in the state: torch 1.13's load_state_dict turns str values into generators.)
    optimizer.state[model.hidden.bias]["note"] = {"k": [1, None, 2.5, True], 3: float("nan")}
    mzt.save_checkpoint(archive_path, "t", model, optimizer, iteration=1, durable=False)
    with modelzip.open(archive_path) as ar:
        states = {(s.name, s.state) for s in ar.updater_states()}
        config = ar.training_config()
    assert ("hidden.weight", "slow.0") in states and ("hidden.weight", "slow.1") in states
    assert config["properties"]["torch.updater_exact"] == "false"
    assert config["properties"]["torch.optimizer"].endswith("torch_training.Lookahead")
    torch.manual_seed(5)
    fresh_model = Net()
    fresh = Lookahead([{"params": list(fresh_model.embed.parameters())},
                       {"params": list(fresh_model.hidden.parameters())},
                       {"params": [fresh_model.out.bias] + list(fresh_model.norm.parameters())}])
    mzt.load_checkpoint(archive_path, None, fresh_model, fresh)
    # Same state and hyperparameters; the third group's parameters come back in this
    # optimizer's order, so compare by parameter.
    saved, loaded = optimizer.state_dict(), fresh.state_dict()
    assert_same([{k: v for k, v in g.items() if k != "params"} for g in loaded["param_groups"]],
                [{k: v for k, v in g.items() if k != "params"} for g in saved["param_groups"]])
    old_params = dict(model.named_parameters())
    for name, p in fresh_model.named_parameters():
        assert_same(fresh.state[p], optimizer.state[old_params[name]], name)
        assert torch.equal(p, old_params[name])


def test_load_checkpoint_takes_the_tag_second_and_the_old_order_with_a_warning(archive_path):
    """load_checkpoint(path, tag, model, optimizer), as save_checkpoint(path, tag, model,
    optimizer); the order of earlier releases (tag last) still works with a DeprecationWarning."""
    torch.manual_seed(0)
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, optimizer, 1)
    mzt.save_checkpoint(archive_path, "t1", model, optimizer, iteration=1, durable=False)
    first = {k: v.clone() for k, v in model.state_dict().items()}
    train(model, optimizer, 1)
    mzt.save_checkpoint(archive_path, "t2", model, optimizer, iteration=2, durable=False)

    def fresh():
        m = Small()
        return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    m, o = fresh()
    assert mzt.load_checkpoint(archive_path, "t1", m, o).iteration == 1
    assert_same(m.state_dict(), first)
    assert mzt.load_checkpoint(archive_path, None, *fresh()).iteration == 2
    assert mzt.load_checkpoint(archive_path, tag="t1", model=Small()).iteration == 1
    with pytest.warns(DeprecationWarning, match=r"load_checkpoint\(path, tag, model, optimizer\)"):
        assert mzt.load_checkpoint(archive_path, *fresh()).iteration == 2
    m, o = fresh()
    with pytest.warns(DeprecationWarning) as warned:
        assert mzt.load_checkpoint(archive_path, m, o, "t1").iteration == 1
    assert [w.filename for w in warned] == [__file__]
    assert_same(m.state_dict(), first)
    with pytest.warns(DeprecationWarning):  # (path, None, optimizer): the old "no model"
        with pytest.raises(ValueError, match="needs the model"):
            mzt.load_checkpoint(archive_path, None, fresh()[1])
    with pytest.raises(TypeError, match="^modelzip.torch.load_checkpoint.. argument 'tag' must "
                                        "be str or None, not int$"):  # not taken for the old order
        mzt.load_checkpoint(archive_path, 2, *fresh())
    # The old order with tag as a keyword, as earlier releases documented it: Python raised
    # its bare "got multiple values for argument 'tag'".
    m, o = fresh()
    with pytest.warns(DeprecationWarning, match=r"load_checkpoint\(path, tag, model, optimizer\)"
                      ) as warned:
        assert mzt.load_checkpoint(archive_path, m, o, tag="t1").iteration == 1
    assert [w.filename for w in warned] == [__file__]  # the caller's line
    assert_same(m.state_dict(), first)
    assert_same(o.state_dict()["param_groups"], optimizer.state_dict()["param_groups"])
    m, o = fresh()
    with pytest.warns(DeprecationWarning):
        assert mzt.load_checkpoint(archive_path, m, optimizer=o, tag="t1").iteration == 1
    assert_same(m.state_dict(), first)
    m = Small()
    with pytest.warns(DeprecationWarning):
        assert mzt.load_checkpoint(archive_path, m, tag="t1").iteration == 1
    assert_same(m.state_dict(), first)
    with pytest.raises(TypeError, match="got multiple values for argument 'tag'"):
        mzt.load_checkpoint(archive_path, "t1", tag="t2")  # no old order: Python's error


def test_load_checkpoint_checks_the_types_of_model_and_optimizer(archive_path):
    # A state dict given as the model raised AttributeError ("'OrderedDict' object has no
    # attribute 'state_dict'"); an optimizer's state dict was "the state of a
    # torch.optim.sgd.SGD, not of a builtins.dict".
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    with pytest.raises(TypeError) as e:
        mzt.load_checkpoint(archive_path, "t", model.state_dict(), optimizer)
    assert str(e.value) == ("modelzip.torch.load_checkpoint() argument 'model' must be a "
                            "torch.nn.Module or None, not OrderedDict")
    with pytest.raises(TypeError) as e:
        mzt.load_checkpoint(archive_path, "t", model, optimizer.state_dict())
    assert str(e.value) == ("modelzip.torch.load_checkpoint() argument 'optimizer' must be a "
                            "torch.optim.Optimizer, None, a mapping of names to them or a list "
                            "of them, not dict")


def test_a_scheduler_without_state_dict_is_a_type_error(archive_path):
    # The state dict of a scheduler, where the scheduler belongs, raised AttributeError:
    # "'dict' object has no attribute 'state_dict'".
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
    with pytest.raises(TypeError) as e:
        mzt.save_checkpoint(archive_path, "t", model, optimizer, scheduler=scheduler.state_dict())
    assert str(e.value) == (
        "modelzip.torch.save_checkpoint() argument 'scheduler' must be a learning-rate scheduler "
        "(an object with state_dict()), None, a mapping of names to them or a list of them, not "
        "dict (more state: extra=)")
    with pytest.raises(TypeError) as e:
        mzt.save_checkpoint(archive_path, "t", model, optimizer, scheduler=[scheduler, 3])
    assert str(e.value) == ("modelzip.torch.save_checkpoint() argument 'scheduler'[1] must be a "
                            "learning-rate scheduler (an object with state_dict()), not int")
    assert not archive_path.exists()
    mzt.save_checkpoint(archive_path, "t", model, optimizer, scheduler=scheduler)
    with pytest.raises(TypeError) as e:
        mzt.load_checkpoint(archive_path, "t", model, optimizer, scheduler="StepLR")
    assert str(e.value) == (
        "modelzip.torch.load_checkpoint() argument 'scheduler' must be a learning-rate scheduler "
        "(an object with load_state_dict()), None, a mapping of names to them or a list of "
        "them, not str")


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, x):
        return self.net(x)


def make_gan(seed):
    """Generator and discriminator (one ModuleDict, as save_checkpoint takes one model), an
    optimizer and a scheduler each."""
    torch.manual_seed(seed)
    gan = nn.ModuleDict({"gen": Generator(), "disc": Discriminator()})
    optimizers = {"gen": torch.optim.Adam(gan["gen"].parameters(), lr=2e-3, betas=(0.5, 0.999)),
                  "disc": torch.optim.SGD(gan["disc"].parameters(), lr=1e-2, momentum=0.9)}
    schedulers = {"gen": torch.optim.lr_scheduler.StepLR(optimizers["gen"], 3, gamma=0.5),
                  "disc": torch.optim.lr_scheduler.ExponentialLR(optimizers["disc"], 0.9)}
    return gan, optimizers, schedulers


def gan_steps(gan, optimizers, schedulers, first, last):
    """GAN training steps first..last-1 (data and noise depend on the step only); the losses."""
    losses = []
    bce = nn.BCEWithLogitsLoss()
    for step in range(first, last):
        data = torch.Generator().manual_seed(step)
        real = torch.randn(8, 3, generator=data) * 0.5 + 1.0
        noise = torch.randn(8, 4, generator=data)
        optimizers["disc"].zero_grad()
        fake = gan["gen"](noise)
        loss_d = (bce(gan["disc"](real), torch.ones(8, 1))
                  + bce(gan["disc"](fake.detach()), torch.zeros(8, 1)))
        loss_d.backward()
        optimizers["disc"].step()
        optimizers["gen"].zero_grad()
        loss_g = bce(gan["disc"](fake), torch.ones(8, 1))
        loss_g.backward()
        optimizers["gen"].step()
        for scheduler in schedulers.values():
            scheduler.step()
        losses.append((loss_d.item(), loss_g.item()))
    return losses


@pytest.mark.parametrize("as_list", [False, True])
def test_gan_with_two_optimizers_resumes_bit_exactly(archive_path, as_list):
    # save_checkpoint took one optimizer and one scheduler ("TypeError: optimizer must be a
    # torch.optim.Optimizer, not list"): GAN training could not be checkpointed.
    gan, optimizers, schedulers = make_gan(0)
    expected = gan_steps(gan, optimizers, schedulers, 0, 10)
    final = {k: v.clone() for k, v in gan.state_dict().items()}

    def arguments(optimizers, schedulers):
        if as_list:  # named by position: "0" the generator's, "1" the discriminator's
            return [optimizers["gen"], optimizers["disc"]], [schedulers["gen"], schedulers["disc"]]
        return optimizers, schedulers

    gan, optimizers, schedulers = make_gan(0)
    before = gan_steps(gan, optimizers, schedulers, 0, 4)
    saved_optimizers, saved_schedulers = arguments(optimizers, schedulers)
    mzt.save_checkpoint(archive_path, "step-4", gan, saved_optimizers,
                        scheduler=saved_schedulers, epoch=1, durable=False)
    gan_steps(gan, optimizers, schedulers, 4, 6)  # the run goes on; the checkpoint stays

    gan, optimizers, schedulers = make_gan(1)  # other weights: everything must come back
    loaded_optimizers, loaded_schedulers = arguments(optimizers, schedulers)
    if not as_list:  # names matter, not the order
        loaded_optimizers = {"disc": optimizers["disc"], "gen": optimizers["gen"]}
    state = mzt.load_checkpoint(archive_path, None, gan, loaded_optimizers,
                                scheduler=loaded_schedulers)
    assert (state.tag, state.iteration, state.epoch) == ("step-4", 4, 1)  # Adam's step
    resumed = before + gan_steps(gan, optimizers, schedulers, 4, 10)
    assert resumed == expected  # every loss bit for bit
    assert_same(gan.state_dict(), final)
    with modelzip.open(archive_path) as ar:
        config = ar.training_config()
        states = {(s.name, s.state) for s in ar.updater_states()}
    assert config["properties"]["torch.updater_exact"] == "false"
    optimizers_json = json.loads(config["properties"]["torch.optimizers"])
    names = ["0", "1"] if as_list else ["gen", "disc"]
    assert [o["name"] for o in optimizers_json] == names
    assert [o["optimizer"] for o in optimizers_json] == ["torch.optim.adam.Adam",
                                                         "torch.optim.sgd.SGD"]
    assert [g["params"] for g in optimizers_json[1]["param_groups"]] == [
        ["disc.net.0.weight", "disc.net.0.bias", "disc.net.2.weight", "disc.net.2.bias"]]
    assert [s["name"] for s in json.loads(config["properties"]["torch.lr_schedulers"])] == names
    assert not {"torch.optimizer", "torch.param_groups", "torch.lr_scheduler"} & set(
        config["properties"])
    assert ("gen.net.0.weight", "exp_avg") in states
    assert ("disc.net.0.weight", "momentum_buffer") in states


def test_several_optimizers_that_do_not_fit_change_nothing(archive_path):
    gan, optimizers, schedulers = make_gan(0)
    gan_steps(gan, optimizers, schedulers, 0, 2)
    mzt.save_checkpoint(archive_path, "t", gan, optimizers, scheduler=schedulers, durable=False)
    mzt.save_checkpoint(archive_path, "one", gan["gen"], optimizers["gen"], durable=False)
    where = f"^{archive_path}: tag 't'"
    gan, optimizers, schedulers = make_gan(1)
    before = (copy.deepcopy(gan.state_dict()),
              {k: copy.deepcopy(o.state_dict()) for k, o in optimizers.items()},
              {k: s.state_dict() for k, s in schedulers.items()})
    swapped = {"gen": optimizers["disc"], "disc": optimizers["gen"]}
    for optimizer, scheduler, error in [
            (optimizers["gen"], None, where + r" holds the states of optimizers named \['gen', "
                                      r"'disc'\] \(saved from a mapping or list\), not of one "
                                      "optimizer: pass optimizer= a mapping"),
            ({"gen": optimizers["gen"]}, None,
             where + r": optimizers: the checkpoint holds 2 \['gen', 'disc'\], given 1 "
                     r"\['gen'\] \(not given: \['disc'\]"),
            (list(optimizers.values()), None, where + r": optimizers: .* \(not given: \['gen', "
                                                      r"'disc'\]; not in the checkpoint: "
                                                      r"\['0', '1'\]\)"),
            (swapped, None, where + ", optimizer 'gen' holds the state of a "
                                    "torch.optim.adam.Adam, not of a torch.optim.sgd.SGD"),
            (optimizers, schedulers["gen"], where + " holds the states of learning-rate "
                                                    "schedulers named"),
            (optimizers, {"gen": schedulers["gen"]},
             where + r": learning-rate schedulers: the checkpoint holds 2")]:
        with pytest.raises(ValueError, match=error):
            mzt.load_checkpoint(archive_path, "t", gan, optimizer, scheduler=scheduler)
    with pytest.raises(ValueError, match=f"^{archive_path}: tag 'one' holds the state of one "
                                         "optimizer \\(a torch.optim.adam.Adam\\), not of a "
                                         "mapping or list"):
        mzt.load_checkpoint(archive_path, "one", gan["gen"], {"gen": optimizers["gen"]})
    assert_same(gan.state_dict(), before[0])
    assert_same({k: o.state_dict() for k, o in optimizers.items()}, before[1])
    assert {k: s.state_dict() for k, s in schedulers.items()} == before[2]
    # One parameter in two optimizers would be two states under one name: refused.
    with pytest.raises(ValueError, match="parameter 'gen.net.0.weight' is held by optimizers "
                                         "'a' and 'b'"):
        mzt.save_checkpoint(archive_path, "u", gan, {
            "a": optimizers["gen"], "b": torch.optim.SGD(gan["gen"].net[0].parameters(), lr=1)})
    with pytest.raises(ValueError, match="argument 'optimizer' is an empty list"):
        mzt.save_checkpoint(archive_path, "u", gan, [])
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["t", "one"]
        config = ar.training_config("t")
    # A damaged torch.optimizers property is an error naming it.
    config["properties"]["torch.optimizers"] = '[{"name": "gen"}]'
    with modelzip.Writer(archive_path, durable=False) as writer:
        writer.add_tag("bad", gan.state_dict(), training=config)
    with pytest.raises(ValueError, match=f"^{archive_path}: tag 'bad': property "
                                         "'torch.optimizers' is malformed"):
        mzt.load_checkpoint(archive_path, "bad", gan, optimizers)


def test_load_checkpoint_refuses_what_does_not_fit(archive_path):
    model = Small()
    optimizer = torch.optim.Adam(model.parameters())
    train(model, optimizer, 1)
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    where = f"^{archive_path}: tag 't'"  # every message names the archive and the tag
    with pytest.raises(ValueError, match=where + " holds the state of a torch.optim.adam.Adam, "
                                                 "not of a torch.optim.sgd.SGD"):
        mzt.load_checkpoint(archive_path, None, Small(),
                            torch.optim.SGD(Small().parameters(), lr=1))
    other = Small()
    with pytest.raises(ValueError, match=where + " holds 1 param groups"):
        mzt.load_checkpoint(archive_path, None, other, torch.optim.Adam(
            [{"params": other.fc1.parameters()}, {"params": other.fc2.parameters()}]))
    with pytest.raises(ValueError, match=where + r", param group 0: .*only in the checkpoint: "
                                                 r"\['fc2.bias', 'fc2.weight'\]"):
        mzt.load_checkpoint(archive_path, None, other, torch.optim.Adam(other.fc1.parameters()))
    with pytest.raises(modelzip.NotFoundError) as e:
        mzt.load_checkpoint(archive_path, "nope", Small())
    assert e.value.tag == "nope"
    save(archive_path, "plain", {"w": np.zeros(2)})
    with pytest.raises(ValueError, match="no torch optimizer state"):
        mzt.load_checkpoint(archive_path, None, None, torch.optim.Adam(Small().parameters()))
    with pytest.raises(ValueError, match="reserved"):
        mzt.save_checkpoint(archive_path, "x", model, optimizer, properties={"torch.a": "b"})


def test_saving_an_optimizer_state_dict_points_at_the_helper(archive_path):
    model = Small()
    optimizer = torch.optim.Adam(model.parameters())
    train(model, optimizer, 1)
    with pytest.raises(TypeError, match=r"modelzip\.torch\.save_checkpoint"):
        modelzip.save(archive_path, "t", optimizer.state_dict())
    assert not archive_path.exists()


@pytest.mark.parametrize("make_scheduler", [
    lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=20),
    lambda o: torch.optim.lr_scheduler.CyclicLR(o, 0.001, 0.1, step_size_up=3,
                                                cycle_momentum=False, mode="triangular2"),
    lambda o: torch.optim.lr_scheduler.SequentialLR(
        o, [torch.optim.lr_scheduler.ConstantLR(o, total_iters=2),
            torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=20)], milestones=[2]),
], ids=["OneCycleLR", "CyclicLR", "SequentialLR"])
def test_schedulers_whose_state_holds_their_own_methods(archive_path, make_scheduler):
    """torch 1.13's OneCycleLR and CyclicLR keep bound methods in state_dict() (the annealing
    and scale functions their arguments chose): not stored, the loading scheduler keeps its own,
    and the learning rates go on as they would have."""
    def make():
        torch.manual_seed(0)
        model = Small()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        return model, optimizer, make_scheduler(optimizer)

    def steps(model, optimizer, scheduler, n):
        rates = []
        for _ in range(n):
            train(model, optimizer, 1)
            scheduler.step()
            rates.append(optimizer.param_groups[0]["lr"])
        return rates

    model, optimizer, scheduler = make()
    steps(model, optimizer, scheduler, 4)
    mzt.save_checkpoint(archive_path, "s4", model, optimizer, scheduler=scheduler, durable=False)
    expected = steps(model, optimizer, scheduler, 5)
    fresh_model, fresh, fresh_scheduler = make()
    mzt.load_checkpoint(archive_path, "s4", fresh_model, fresh, scheduler=fresh_scheduler)
    assert steps(fresh_model, fresh, fresh_scheduler, 5) == expected
    for name, value in fresh_model.state_dict().items():
        assert torch.equal(value, model.state_dict()[name]), name


@pytest.mark.parametrize("several", [False, True])
def test_multistep_milestones_come_back_a_counter(archive_path, several):
    """MultiStepLR keeps its milestones as a collections.Counter, stored as a JSON dict: they
    came back a dict, and step(epoch) (the closed form, which calls milestones.elements())
    raised AttributeError after a resume; torch.load gives the Counter back. In SequentialLR
    too, whose state holds its schedulers' states."""
    import collections
    import warnings

    lr_scheduler = torch.optim.lr_scheduler

    def make():
        torch.manual_seed(0)
        model = Small()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        multistep = lr_scheduler.MultiStepLR(optimizer, [2, 4, 4, 6], gamma=0.5)
        sequential = lr_scheduler.SequentialLR(
            optimizer, [lr_scheduler.ConstantLR(optimizer, total_iters=1),
                        lr_scheduler.MultiStepLR(optimizer, [1, 3], gamma=0.5)], milestones=[1])
        return model, optimizer, {"multistep": multistep, "sequential": sequential}

    def steps(model, optimizer, schedulers, n):
        rates = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # step(epoch) is deprecated
            for _ in range(n):
                train(model, optimizer, 1)
                schedulers["multistep"].step(schedulers["multistep"].last_epoch + 1)
                schedulers["sequential"].step()
                rates.append(optimizer.param_groups[0]["lr"])
        return rates

    model, optimizer, schedulers = make()
    steps(model, optimizer, schedulers, 3)
    mzt.save_checkpoint(archive_path, "s3", model, optimizer,
                        scheduler=schedulers if several else schedulers["multistep"],
                        durable=False)
    expected = steps(model, optimizer, schedulers, 5)
    fresh_model, fresh, fresh_schedulers = make()
    mzt.load_checkpoint(archive_path, "s3", fresh_model, fresh,
                        scheduler=fresh_schedulers if several else fresh_schedulers["multistep"])
    assert type(fresh_schedulers["multistep"].milestones) is collections.Counter
    assert fresh_schedulers["multistep"].milestones == collections.Counter([2, 4, 4, 6])
    if several:
        inner = fresh_schedulers["sequential"]._schedulers[1]
        assert type(inner.milestones) is collections.Counter
        assert steps(fresh_model, fresh, fresh_schedulers, 5) == expected


def test_tied_weights_load_back_tied(archive_path):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.embed.weight

    model = Tied()
    save(archive_path, "t", model.state_dict())
    with modelzip.open(archive_path) as ar:
        assert ar.param("out.weight").blob == ar.param("embed.weight").blob  # stored once
        state = ar.load_torch()
    assert state["out.weight"] is state["embed.weight"]
    state["embed.weight"][0, 0] = 42.0
    assert state["out.weight"][0, 0] == 42.0
    fresh = Tied()
    fresh.load_state_dict(state)
    assert fresh.out.weight is fresh.embed.weight
    assert torch.equal(fresh.out.weight, state["embed.weight"]) and fresh.out.weight[0, 0] == 42.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_and_channels_last_round_trip(archive_path, dtype):
    torch.manual_seed(3)
    conv = torch.randn(4, 3, 5, 5).to(dtype)
    tensors = {
        "conv": conv,
        "channels_last": conv.to(memory_format=torch.channels_last),
        "transposed": conv[0, 0].T,
        "strided": conv[:, ::2, 1:, ::3],
    }
    assert not tensors["channels_last"].is_contiguous()
    save(archive_path, "t", tensors)
    with modelzip.open(archive_path) as ar:
        assert {p.dtype for p in ar.params()} == {str(dtype).removeprefix("torch.")}
        state = ar.load_torch()
    for name, expected in tensors.items():
        assert state[name].dtype == dtype and state[name].shape == expected.shape, name
        assert torch.equal(state[name], expected), name


def test_save_checkpoint_keep_last_and_replace(archive_path):
    torch.manual_seed(0)
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(4):
        train(model, optimizer, 1)
        stats = mzt.save_checkpoint(archive_path, f"step-{step}", model, optimizer,
                                    durable=False, keep_last=2)
        mzt.save_checkpoint(archive_path, "latest", model, optimizer, durable=False,
                            replace=True)
    with modelzip.open(archive_path) as ar:
        # keep_last counts "latest" too: the last save kept step-3 and latest.
        assert ar.tags == ["step-3", "latest"]
        assert ar.verify() == []
    assert stats.appended
    fresh = Small()
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    mzt.load_checkpoint(archive_path, "latest", fresh, fresh_opt)
    for a, b in zip(model.parameters(), fresh.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("blocking", [True, False])
@pytest.mark.parametrize("options, error, sentence", [
    # bool is an int to Python: keep_last=True kept one tag, removing the others.
    ({"keep_last": True}, TypeError, "argument 'keep_last' must be int or None, not bool"),
    # Counters were stored as int(value): epoch=1.5 was saved as 1, silently.
    ({"epoch": 1.5}, TypeError, "argument 'epoch' must be int, not float"),
    ({"epoch": -1}, TypeError, "argument 'epoch' must not be negative, not -1"),
    ({"iteration": "7"}, TypeError, "argument 'iteration' must be int or None, not str"),
    # Was pybind11's "Unable to cast Python instance of type <class 'int'> to C++ type 'long'".
    ({"iteration": 2**70}, ValueError, "argument 'iteration' is out of range (a signed 64-bit "
                                       "count): 1180591620717411303424"),
])
def test_save_checkpoint_checks_its_counts(archive_path, blocking, options, error, sentence):
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mzt.save_checkpoint(archive_path, "a", model, optimizer, durable=False)
    mzt.save_checkpoint(archive_path, "b", model, optimizer, durable=False)
    before = archive_path.read_bytes()
    with pytest.raises(error) as e:
        mzt.save_checkpoint(archive_path, "c", model, optimizer, blocking=blocking, **options)
    assert str(e.value) == "modelzip.torch.save_checkpoint() " + sentence
    assert archive_path.read_bytes() == before
    # Integer types that are not int are counts too.
    saved = mzt.save_checkpoint(archive_path, "d", model, optimizer, epoch=np.int64(3),
                                iteration=torch.tensor(9), keep_last=np.int32(3),
                                blocking=blocking, durable=False)
    if not blocking:
        saved.result(60)
    assert modelzip.open(archive_path).tags == ["a", "b", "d"]
    state = mzt.load_checkpoint(archive_path, "d", model, optimizer)
    assert (state.epoch, state.iteration) == (3, 9)


def test_save_checkpoint_in_the_background_keeps_the_last_and_replaces(archive_path):
    torch.manual_seed(0)
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    expected = {}
    futures = []
    for step in range(5):
        train(model, optimizer, 1)
        expected[step] = ({k: v.clone() for k, v in model.state_dict().items()},
                          optimizer.state[model.fc1.weight]["momentum_buffer"].clone())
        futures.append(mzt.save_checkpoint(archive_path, f"step-{step}", model, optimizer,
                                           durable=False, keep_last=3, blocking=False))
        futures.append(mzt.save_checkpoint(archive_path, "latest", model, optimizer,
                                           durable=False, replace=True, blocking=False))
        # The next training step changes the tensors while these saves are in flight.
    for future in futures:
        future.result(timeout=60)
    with modelzip.open(archive_path) as ar:
        # Each step-N save keeps 3 tags ("latest" among them), then "latest" moves last.
        assert ar.tags == ["step-3", "step-4", "latest"]
        assert ar.verify() == []
    for tag, step in (("step-3", 3), ("step-4", 4), ("latest", 4)):
        fresh = Small()
        fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
        mzt.load_checkpoint(archive_path, tag, fresh, fresh_opt)
        assert_same(fresh.state_dict(), expected[step][0], tag)
        assert_same(fresh_opt.state[fresh.fc1.weight]["momentum_buffer"], expected[step][1], tag)
    with pytest.raises(modelzip.InvalidArgumentError, match="keep_last") as synchronous:
        mzt.save_checkpoint(archive_path, "x", model, optimizer, keep_last=0)
    with pytest.raises(modelzip.InvalidArgumentError, match="keep_last") as background:
        mzt.save_checkpoint(archive_path, "x", model, optimizer, keep_last=0, blocking=False)
    assert str(background.value) == str(synchronous.value)
    with pytest.raises(modelzip.Error, match="replace=True replaces it"):
        mzt.save_checkpoint(archive_path, "step-4", model, optimizer, blocking=False).result(60)


def test_extra_gives_back_rng_states_and_the_callers_values(archive_path):
    """extra= holds what a training loop's torch.save checkpoint holds besides model, optimizer
    and scheduler; load_checkpoint gives it back, every value of its type. (There was no place
    for a tensor, a numpy array or a nested dict: properties= takes str only.)"""
    import random

    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    extra = {
        "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                "python": random.getstate(),
                "generator": np.random.default_rng(7).bit_generator.state},  # 128-bit ints
        "scaler": {"scale": 65536.0, "growth_factor": 2.0, "_growth_tracker": 3},
        "best": float("nan"), "history": [0.5, 0.25], "flags": (True, None), "name": "run",
        "tensors": {"bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
                    "scalar": torch.tensor(7, dtype=torch.int64), "empty": torch.zeros(0, 3),
                    "bool": torch.tensor([[True], [False]]),
                    "complex": torch.tensor([1 + 2j], dtype=torch.complex64).conj(),
                    "strided": torch.arange(12.0).reshape(3, 4).t(),
                    "param": torch.nn.Parameter(torch.ones(2))},
        "numpy": {"f32": np.float32(1.5), "i64": np.int64(-3), "f64": np.float64(0.1),
                  "matrix": np.arange(6, dtype=np.uint16).reshape(2, 3),
                  "empty": np.zeros((0, 3), np.float32),
                  "text": np.array(["ab", "c"])},
        3: "a key that is not str, inside",
    }
    extra = {"loop": extra}
    mzt.save_checkpoint(archive_path, "t", model, optimizer, extra=extra, durable=False)
    mzt.save_checkpoint(archive_path, "u", model, optimizer, extra=extra, durable=False,
                        blocking=False).result(60)
    mzt.save_checkpoint(archive_path, "none", model, optimizer, durable=False)
    for tag in ("t", "u"):
        loaded = mzt.load_checkpoint(archive_path, tag, model, optimizer).extra
        assert_same(loaded, {"loop": {**extra["loop"], "tensors": {
            **extra["loop"]["tensors"],
            "complex": torch.tensor([1 - 2j], dtype=torch.complex64),  # the values it showed
            "strided": extra["loop"]["tensors"]["strided"].contiguous(), "param": torch.ones(2)}}})
        loop = loaded["loop"]
        assert type(loop["numpy"]["f64"]) is np.float64 and type(loop["numpy"]["i64"]) is np.int64
        assert loop["tensors"]["strided"].is_contiguous()
        assert not loop["tensors"]["complex"].is_conj()
        assert type(loop["tensors"]["param"]) is torch.Tensor
        torch.set_rng_state(loop["rng"]["torch"])  # the states are the setters' arguments
        np.random.set_state(loop["rng"]["numpy"])
        random.setstate(loop["rng"]["python"])
        np.random.PCG64().state = loop["rng"]["generator"]
        loop["numpy"]["matrix"][0, 0] = 9  # writable, the caller's own
    assert mzt.load_checkpoint(archive_path, "none", model, optimizer).extra == {}


def test_extra_gives_back_the_other_values_torch_save_keeps(archive_path):
    # A training loop's torch.save checkpoint holds the amp dtype, the device, a seen set...;
    # save_checkpoint refused them ("values of type dtype cannot be stored in a checkpoint")
    # though modelzip.save stores each in a state dict, and gave a torch.Size back as a tuple.
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    extra = {"amp": {"dtype": torch.bfloat16, "device": torch.device("cuda", 1),
                     "cpu": torch.device("cpu")},
             "shape": torch.Size([2, 3]), "z": complex(1.5, float("-inf")), "pair": [1j, 2],
             "seen": {3, 1, (2, "a")}, "frozen": frozenset({"b"}), "empty": set(),
             "window": slice(2, None, -1), "raw": b"\x00\xff", "buffer": bytearray(b"ab"),
             "nested": ({torch.Size([1])}, [slice(1, 2)])}
    mzt.save_checkpoint(archive_path, "t", model, optimizer, extra=extra, durable=False)
    loaded = mzt.load_checkpoint(archive_path, "t", model, optimizer).extra
    assert loaded == extra

    def types(value):
        if isinstance(value, dict):
            return {k: types(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)) and type(value) is not torch.Size:
            return type(value)(types(v) for v in value)
        if isinstance(value, (set, frozenset)):
            return type(value)(sorted(map(str, map(types, value))))
        return type(value)
    assert types(loaded) == types(extra)
    assert str(loaded["z"]) == "(1.5-infj)"


@pytest.mark.parametrize("extra, error, message", [
    ({"ema": torch.zeros(300_000)}, ValueError,
     "extra.ema: 1200000 bytes, over the 1048576 bytes extra holds per tensor or array (it is "
     "for RNG states and small values): store large tensors in the model (a buffer) or in a tag "
     "of their own (modelzip.torch.save)"),
    ({"model": Small()}, TypeError,
     "extra.model: values of type Small cannot be stored in a checkpoint (supported: tensors, "
     "numpy arrays and scalars, None, bool, int, float, complex, str, bytes, bytearray, slice, "
     "torch.Size, torch.device, torch.dtype, and lists, tuples, dicts, sets and frozensets of "
     "them)"),
    ({"raw": bytes(1048577)}, ValueError,
     "extra.raw: 1048577 bytes, over the 1048576 bytes a checkpoint's values hold inline: store "
     "them as a uint8 tensor in the model or in a tag of their own (modelzip.torch.save)"),
    ({"objects": np.array([None, 1])}, TypeError,
     "extra.objects: a numpy value of dtype object cannot be stored in extra (numbers, bool, "
     "str and bytes only)"),
    ({"sparse": torch.eye(2).to_sparse()}, TypeError,
     "extra.sparse: a torch.sparse_coo tensor cannot be stored in extra (dense tensors only)"),
    ([("rng", 1)], TypeError,
     "modelzip.torch.save_checkpoint() argument 'extra' must be a mapping of str to values, not "
     "list"),
    ({1: 2}, TypeError,
     "modelzip.torch.save_checkpoint() argument 'extra': keys must be str, not int"),
])
@pytest.mark.parametrize("blocking", [True, False])
def test_extra_refuses_what_it_cannot_give_back(archive_path, extra, error, message, blocking):
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mzt.save_checkpoint(archive_path, "a", model, optimizer, durable=False)
    before = archive_path.read_bytes()
    with pytest.raises(error) as e:
        mzt.save_checkpoint(archive_path, "b", model, optimizer, extra=extra, blocking=blocking)
    assert str(e.value) == message
    assert archive_path.read_bytes() == before


@pytest.mark.parametrize("stored, why", [
    ('{"$torch.Tensor":{"dtype":"uint8","shape":[3],"base64":"AAAA"}}', "not an object"),
    ('{"$dict":[["a",{"$torch.Tensor":{"dtype":"float32","shape":[2],"base64":"AAAAAA=="}}]]}',
     "$torch.Tensor: 4 bytes for 2 elements of 4"),
    ('{"$dict":[["a",{"$torch.Tensor":{"dtype":"Tensor","shape":[],"base64":""}}]]}',
     "$torch.Tensor: 'Tensor' is no dense torch dtype of torch " + torch.__version__),
    ('{"$dict":[["a",{"$torch.Tensor":{"dtype":"qint8","shape":[1],"base64":"AA=="}}]]}',
     "$torch.Tensor: 'qint8' is no dense torch dtype of torch " + torch.__version__),
    ('{"$dict":[["a",{"$numpy.ndarray":{"dtype":"<u4","shape":[-1],"base64":""}}]]}',
     '$numpy.ndarray: "shape" is not a list of sizes'),
    ('{"$dict":[["a",{"$numpy.generic":{"dtype":"<f4","base64":"!!"}}]]}', None),
    ('{"$dict":[["a",{"$numpy.ndarray":{"dtype":"|O","shape":[1],"base64":"AAAAAAAAAAA="}}]]}',
     "$numpy.ndarray: 8 bytes of '|O' for shape [1]"),
    ('[1', None),
    ('{"$dict":[["a",{"$torch.dtype":"Tensor"}]]}',
     "$torch.dtype: torch " + torch.__version__ + " has no dtype 'Tensor'"),
    ('{"$dict":[["a",{"$torch.device":"nowhere"}]]}', None),
    ('{"$dict":[["a",{"$slice":[1,2]}]]}', "$slice: malformed value [1, 2]"),
    ('{"$dict":[["a",{"$complex":[1,"x"]}]]}', '$complex: malformed value [1, "x"]'),
    ('{"$dict":[["a",{"$torch.Size":[-1]}]]}', "$torch.Size: malformed value [-1]"),
    ('{"$dict":[["a",{"$bytes":"!!"}]]}', None),
    ('{"$dict":[["a",{"$set":[[1]]}]]}', "unhashable type: 'list'"),
])
def test_a_malformed_extra_changes_nothing(archive_path, monkeypatch, stored, why):
    model = Small()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, optimizer, 2)
    monkeypatch.setattr(mzt, "_extra_json", lambda extra: stored)
    mzt.save_checkpoint(archive_path, "t", model, optimizer, extra={}, durable=False)
    fresh = Small()
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    before = copy.deepcopy((fresh.state_dict(), fresh_opt.state_dict()))
    with pytest.raises(ValueError) as e:
        mzt.load_checkpoint(archive_path, "t", fresh, fresh_opt)
    assert str(e.value).startswith(
        f"{archive_path}: tag 't': property 'torch.extra' is malformed (")
    if why is not None:
        assert str(e.value).endswith(f"({why})")
    assert_same((fresh.state_dict(), fresh_opt.state_dict()), before)


def test_ties_stay_and_equal_tensors_stay_apart_after_load_checkpoint(archive_path):
    """Tied weights stay one Parameter, the one the optimizer holds; tensors that were merely
    equal (stored once by deduplication: two copies of a layer, their equal momentum) load as
    tensors of their own, so training them apart goes on as it would have."""
    class Twins(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.embed.weight
            self.b.load_state_dict(self.a.state_dict())

        def forward(self, tokens, which):
            return self.out((self.a if which else self.b)(self.embed(tokens)))

    def step(model, optimizer, which):
        optimizer.zero_grad(set_to_none=True)  # the layer not used keeps no gradient: no step
        model(torch.arange(6) % 10, which).square().mean().backward()
        optimizer.step()

    torch.manual_seed(0)
    model = Twins()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for p in model.parameters():  # equal momentum buffers for a and b
        p.grad = torch.ones_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    with modelzip.open(archive_path) as ar:
        assert ar.param("a.weight").blob == ar.param("b.weight").blob  # stored once
        rows = {(s.name, s.state): s.blob for s in ar.updater_states("t")}
        assert rows[("a.weight", "momentum_buffer")] == rows[("b.weight", "momentum_buffer")]
    torch.manual_seed(1)
    fresh = Twins()
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    mzt.load_checkpoint(archive_path, "t", fresh, fresh_opt)
    assert fresh.out.weight is fresh.embed.weight
    assert [p for g in fresh_opt.param_groups for p in g["params"]] == list(fresh.parameters())
    assert all(fresh_opt.state[p]["momentum_buffer"].data_ptr() != fresh_opt.state[q][
        "momentum_buffer"].data_ptr() for p, q in ((fresh.a.weight, fresh.b.weight),
                                                   (fresh.a.bias, fresh.b.bias)))
    for which in (True, True, False):  # a trains, b does not, then b
        step(model, optimizer, which)
        step(fresh, fresh_opt, which)
    assert not torch.equal(fresh.a.weight, fresh.b.weight)
    assert_same(fresh.state_dict(), model.state_dict())
    assert_same(fresh_opt.state_dict(), optimizer.state_dict())


def storage(tensor):
    """The address of the storage ``tensor`` views (untyped_storage from torch 2.0 on, where
    storage() warns that TypedStorage is deprecated)."""
    return getattr(tensor, "untyped_storage", tensor.storage)().data_ptr()


class FlatParams(nn.Module):
    """Parameters that are views of one flat buffer (as FSDP's flat parameters, or Q, K and V
    split from one fused matrix): the buffer and the views are all in the state dict."""

    def __init__(self):
        super().__init__()
        self.register_buffer("flat", torch.randn(4 * 3 + 3 + 3))
        self.weight = nn.Parameter(self.flat[:12].view(4, 3))
        self.bias = nn.Parameter(self.flat[12:15])
        self.scale = nn.Parameter(self.flat[15:])

    def forward(self, x):
        return (x @ self.weight.t()[:, :3] + self.bias) * self.scale


def test_views_of_one_storage_keep_sharing_it_through_load_checkpoint(archive_path):
    """modelzip stores every name of a state dict as its own blob, views of one storage too
    (torch.save stores the storage once); load_checkpoint and load_into write into the model's
    own tensors, so its views go on sharing its buffer, and training resumes exactly."""
    def step(model, optimizer):
        optimizer.zero_grad()
        model(torch.arange(12.0).reshape(4, 3)).square().sum().backward()
        optimizer.step()

    torch.manual_seed(0)
    model = FlatParams()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    step(model, optimizer)
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    torch.manual_seed(1)
    fresh = FlatParams()
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=0.1)
    mzt.load_checkpoint(archive_path, "t", fresh, fresh_opt)
    for name in ("weight", "bias", "scale"):
        view = getattr(fresh, name)
        assert storage(view) == storage(fresh.flat), name
    assert_same(fresh.state_dict(), model.state_dict())
    for _ in range(2):
        step(model, optimizer)
        step(fresh, fresh_opt)
    assert_same(fresh.state_dict(), model.state_dict())
    assert torch.equal(fresh.flat[12:15], fresh.bias)  # still one memory
    torch.manual_seed(2)
    other = FlatParams()
    mzt.load_into(other, archive_path, "t")
    assert storage(other.bias) == storage(other.flat)
    # modelzip.torch.load gives each name its own tensor (torch.load: views of one storage)
    state = mzt.load(archive_path, "t")
    assert storage(state["bias"]) != storage(state["flat"])
    state["flat"][12] = 100.0
    assert state["bias"][0] != 100.0


class Counting(torch.optim.Optimizer):
    """SGD keeping, per parameter, a count before its tensors and a flag between them: the
    order of its state keys is neither tensors first nor last."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            with torch.enable_grad():
                closure()
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["count"] = 0
                    state["momentum"] = torch.zeros_like(p)
                    state["fresh"] = True
                    state["last"] = torch.zeros_like(p)
                else:
                    state["fresh"] = False
                state["count"] += 1
                state["momentum"].mul_(0.9).add_(p.grad)
                state["last"].copy_(p.grad)
                p.add_(state["momentum"], alpha=-group["lr"])


@pytest.mark.parametrize("make", [
    lambda params: torch.optim.LBFGS(params, history_size=3, max_iter=3),
    lambda params: torch.optim.RMSprop(params, momentum=0.5, centered=True),
    Counting])
def test_optimizer_state_keeps_the_order_of_its_keys(archive_path, make):
    # torch.load gives each parameter's state dict in the order the optimizer made it; the
    # state loaded by load_checkpoint had the tensors first and the other values (LBFGS's
    # func_evals and n_iter, torch 1.13's int step) after them, so the resumed optimizer's
    # state_dict(), and torch.save of it, differed from the uninterrupted one's.
    torch.manual_seed(0)
    model = Small()
    optimizer = make(model.parameters())
    x = torch.randn(8, 3)

    def closure():
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss
    for _ in range(2):
        optimizer.step(closure)
    mzt.save_checkpoint(archive_path, "t", model, optimizer, durable=False)
    fresh_model = Small()
    fresh = make(fresh_model.parameters())
    mzt.load_checkpoint(archive_path, None, fresh_model, fresh)
    saved, loaded = optimizer.state_dict(), fresh.state_dict()
    assert_same(loaded, saved)
    for i, state in saved["state"].items():
        assert list(loaded["state"][i]) == list(state), i
    before, after = io.BytesIO(), io.BytesIO()
    torch.save(saved, before)
    torch.save(loaded, after)
    assert after.getvalue() == before.getvalue()


def test_save_checkpoint_checks_metadata_before_it_reads_the_model(archive_path):
    # The state dict was read (fetched from the GPU) before an unknown field was refused.
    model = Small()
    read = []
    original = model.state_dict
    model.state_dict = lambda *a, **k: read.append(1) or original(*a, **k)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="unknown metadata field 'format'"):
        mzt.save_checkpoint(archive_path, "t", model, optimizer, metadata={"format": "pt"})
    assert not read and not archive_path.exists()
