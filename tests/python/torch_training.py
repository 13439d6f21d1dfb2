"""A small deterministic training run, for test_torch_checkpoint.py's fresh-process resume test.

    python3 torch_training.py train ARCHIVE OPTIMIZER OUT.pt
        trains 12 steps from seed 0, saving modelzip.torch checkpoints after
        step 4 ("step-4") and step 8 ("step-8", a newer tag), then writes the
        final model, optimizer and scheduler state with torch.save to OUT.pt
    python3 torch_training.py resume ARCHIVE OPTIMIZER OUT.pt TAG
        builds the model from another seed, restores TAG with
        modelzip.torch.load_checkpoint, trains on to step 12, writes OUT.pt

OPTIMIZER: adam (Adam with weight decay and AMSGrad, StepLR scheduler), sgd
(SGD with Nesterov momentum, per-group hyperparameters) or custom (an
optimizer class modelzip does not know, with nested and non-tensor state):
batches depend only on the step number, so both runs see the same data. Or
block: a transformer-like block (tied embedding, LayerNorm, dropout, BatchNorm)
trained with AdamW, OneCycleLR and gradient clipping on batches drawn from the
global torch, numpy and Python RNGs, checkpointed in the background
(blocking=False) after steps 2, 4, 6 and 8 with keep_last=3 and the RNG
states, the losses so far and a GradScaler's state in extra=; the resumed run
restores the RNGs from TrainingState.extra. OUT.pt then also holds the losses
of all 12 steps and the final RNG states.
"""
import random
import sys

import numpy as np
import torch
from torch import nn

import modelzip.torch

STEPS = 12


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 6)
        self.hidden = nn.Linear(6, 6)
        self.norm = nn.BatchNorm1d(6)
        self.out = nn.Linear(6, 20)
        self.out.weight = self.embed.weight  # tied: one parameter, two state-dict names

    def forward(self, tokens):
        return self.out(torch.relu(self.norm(self.hidden(self.embed(tokens)))))


class Lookahead(torch.optim.Optimizer):
    """An optimizer modelzip has no mapping for: momentum kept as a list of two tensors,
    a Python counter and a tuple hyperparameter."""

    def __init__(self, params, lr=0.05, mix=(0.5, 0.25), tag=None):
        super().__init__(params, {"lr": lr, "mix": mix, "tag": tag, "flag": True})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            a, b = group["mix"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["slow"] = [torch.zeros_like(p), torch.zeros_like(p)]
                    state["count"] = 0
                    state["scale"] = 1.0
                state["count"] += 1
                state["scale"] *= 0.99
                fast, slow = state["slow"]
                fast.mul_(a).add_(p.grad)
                slow.mul_(b).add_(fast, alpha=state["scale"])
                p.add_(slow, alpha=-group["lr"])


class Block(nn.Module):
    """Attention and MLP with residuals, the output projection tied to the embedding."""

    def __init__(self, vocab=32, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.drop = nn.Dropout(0.2)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))
        self.bn = nn.BatchNorm1d(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        h = self.embed(tokens)
        q, k, v = self.qkv(self.norm1(h)).chunk(3, -1)
        attention = torch.softmax(q @ k.transpose(-1, -2) / 4.0, -1)
        h = h + self.drop(self.proj(attention @ v))
        h = h + self.drop(self.mlp(self.norm2(h)))
        return self.head(self.bn(h.transpose(1, 2)).transpose(1, 2))


def make(kind, seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    if kind == "block":
        model = Block()
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01,
                                                        total_steps=STEPS)
        return model, optimizer, scheduler
    model = Net()
    scheduler = None
    if kind == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.01, amsgrad=True)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    elif kind == "sgd":
        optimizer = torch.optim.SGD(
            [{"params": [model.embed.weight, model.hidden.weight, model.hidden.bias]},
             {"params": [p for n, p in model.named_parameters()
                         if n.startswith(("norm", "out"))], "lr": 0.02}],
            lr=0.05, momentum=0.9, nesterov=True)
    else:
        optimizer = Lookahead([{"params": list(model.embed.parameters())},
                               {"params": [p for n, p in model.named_parameters()
                                           if not n.startswith("embed")], "tag": "head"}])
    return model, optimizer, scheduler


def train_step(step, model, optimizer, scheduler):
    gen = torch.Generator().manual_seed(1000 + step)
    tokens = torch.randint(0, 20, (16,), generator=gen)
    target = torch.randint(0, 20, (16,), generator=gen)
    model.train()
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(tokens), target).backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()


def block_step(model, optimizer, scheduler):
    """A step of the block on a batch drawn from the global RNGs, as a shuffling sampler and
    random augmentation draw them; returns the loss."""
    order = list(range(8))
    random.shuffle(order)
    tokens = torch.randint(0, 32, (4, 8))[:, order]
    weight = 1.0 + float(np.random.uniform(-0.1, 0.1))
    model.train()
    optimizer.zero_grad()
    logits = model(tokens)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 32), tokens.roll(1, 1).reshape(-1))
    (loss * weight).backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()
    scheduler.step()
    return loss.item()


def rng_states():
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
            "python": random.getstate()}


def train_block(archive, out):
    model, optimizer, scheduler = make("block", 0)
    scaler = torch.cuda.amp.GradScaler(enabled=False)  # a CPU run: its state_dict() is {}
    losses, saves = [], []
    for step in range(1, STEPS + 1):
        losses.append(block_step(model, optimizer, scheduler))
        if step in (2, 4, 6, 8):  # training goes on while each is written
            saves.append(modelzip.torch.save_checkpoint(
                archive, f"step-{step}", model, optimizer, scheduler=scheduler, iteration=step,
                extra={"rng": rng_states(), "losses": list(losses),
                       "scaler": scaler.state_dict()},
                keep_last=3, durable=False, blocking=False))
    for save in saves:
        save.result(timeout=120)
    finish(out, model, optimizer, scheduler, losses=losses, rng=rng_states())


def resume_block(archive, out, tag):
    model, optimizer, scheduler = make("block", 123)
    scaler = torch.cuda.amp.GradScaler(enabled=False)
    state = modelzip.torch.load_checkpoint(archive, tag, model, optimizer, scheduler=scheduler)
    assert model.head.weight is model.embed.weight, "the embedding stays tied to the output"
    assert optimizer.param_groups[0]["params"] == list(model.parameters())  # the same objects
    rng = state.extra["rng"]
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])
    scaler.load_state_dict(state.extra["scaler"])
    losses = state.extra["losses"]
    assert len(losses) == state.iteration, state
    for _ in range(state.iteration + 1, STEPS + 1):
        losses.append(block_step(model, optimizer, scheduler))
    finish(out, model, optimizer, scheduler, losses=losses, rng=rng_states())


def finish(out, model, optimizer, scheduler, **more):
    # torch 1.13's OneCycleLR holds its annealing method in its state: compared by name
    schedule = {key: getattr(value, "__qualname__", value) if callable(value) else value
                for key, value in scheduler.state_dict().items()} if scheduler else None
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": schedule, **more}, out)


def main():
    torch.set_num_threads(1)
    mode, archive, kind, out = sys.argv[1:5]
    if kind == "block":
        torch.use_deterministic_algorithms(True)
        (train_block(archive, out) if mode == "train" else resume_block(archive, out, sys.argv[5]))
        return
    if mode == "train":
        model, optimizer, scheduler = make(kind, 0)
        for step in range(1, STEPS + 1):
            train_step(step, model, optimizer, scheduler)
            if step in (4, 8):
                modelzip.torch.save_checkpoint(archive, f"step-{step}", model, optimizer,
                                               scheduler=scheduler, epoch=step // 4,
                                               iteration=step,
                                               properties={"data.position": str(step * 16)},
                                               durable=False)
    else:
        model, optimizer, scheduler = make(kind, 123)  # other weights: all must come from the archive
        state = modelzip.torch.load_checkpoint(archive, sys.argv[5], model, optimizer,
                                               scheduler=scheduler)
        assert state.properties == {"data.position": str(state.iteration * 16)}, state
        assert state.epoch == state.iteration // 4, state
        for step in range(state.iteration + 1, STEPS + 1):
            train_step(step, model, optimizer, scheduler)
    finish(out, model, optimizer, scheduler)


if __name__ == "__main__":
    main()
