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
optimizer class modelzip does not know, with nested and non-tensor state).
Batches depend only on the step number, so both runs see the same data.
"""
import sys

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


def make(kind, seed):
    torch.manual_seed(seed)
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


def finish(out, model, optimizer, scheduler):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler else None}, out)


def main():
    torch.set_num_threads(1)
    mode, archive, kind, out = sys.argv[1:5]
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
