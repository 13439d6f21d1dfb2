"""Type hints of modelzip.torch: whole torch training checkpoints (see torch.py for the layout)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence, Union

import torch

from . import Metadata, PathLike, SaveFuture, WriteStats

OPTIMIZER: str
PARAM_GROUPS: str
OPTIMIZER_STATE: str
LR_SCHEDULER: str
OPTIMIZERS: str
LR_SCHEDULERS: str
UPDATER_EXACT: str
TORCH_VERSION: str
EXTRA: str
RANK_EXTRAS: str
MAX_EXTRA_ARRAY_BYTES: int


class TrainingState(NamedTuple):
    """What load_checkpoint restored besides the model and optimizer."""

    tag: str
    iteration: int
    epoch: int
    properties: dict[str, str]
    extra: dict[str, Any]


def save(tensors: Mapping[str, Any], path: PathLike, tag: str, **options: Any) -> WriteStats:
    """modelzip.save(path, tag, tensors, **options) in safetensors' argument order; tied
    weights are recorded (ties.json) and load as one tensor again."""


def load(path: PathLike, tag: Optional[str] = None, *, device: Any = "cpu",
         names: Optional[Iterable[str]] = None, verify: bool = False,
         dequantize: bool = False) -> dict[str, torch.Tensor]:
    """The tensors of ``tag`` (None: the newest): zero-copy private CPU views, or on
    ``device`` through pinned staging buffers (docs/torch.md)."""


def load_into(module: torch.nn.Module, path: PathLike, tag: Optional[str] = None, *,
              strict: bool = True, verify: bool = False) -> Any:
    """Copies ``tag`` into ``module``'s own parameters and buffers (CPU or GPU), checked
    first as load_state_dict checks; returns (missing_keys, unexpected_keys)."""


Optimizers = Union[torch.optim.Optimizer, Mapping[str, torch.optim.Optimizer],
                   Sequence[torch.optim.Optimizer]]
"""One optimizer, or several: by name, or a list (named "0", "1"... by position)."""


def save_checkpoint(path: PathLike, tag: str, model: torch.nn.Module,
                    optimizer: Optimizers, *, scheduler: Any = None, epoch: int = 0,
                    iteration: Optional[int] = None, properties: Optional[Mapping[str, str]] = None,
                    extra: Optional[Mapping[str, Any]] = None,
                    metadata: Optional[Metadata | Mapping[str, Optional[str]]] = None,
                    tag_metadata: Optional[Mapping[str, str]] = None,
                    compress: bool = False, dedup: bool = True, durable: bool = True,
                    append: bool = True, replace: bool = False, keep_last: Optional[int] = None,
                    progress: Optional[Callable[[int, int], Optional[bool]]] = None,
                    blocking: bool = True) -> Union[WriteStats, SaveFuture]:
    """Adds tag ``tag`` holding model parameters, optimizer state (by parameter name),
    hyperparameters, scheduler state, step/epoch counters and ``extra`` (RNG states, a
    GradScaler's state, the caller's values, given back as TrainingState.extra); with blocking=False
    in the background (a SaveFuture of the WriteStats). ``optimizer`` and ``scheduler``:
    one, or several as a mapping name -> object or a list."""


def load_checkpoint(path: PathLike, tag: Optional[str] = None,
                    model: Optional[torch.nn.Module] = None,
                    optimizer: Optional[Optimizers] = None,
                    *, scheduler: Any = None, strict: bool = True,
                    extra_rank: Optional[int] = None) -> TrainingState:
    """Restores model, optimizer and scheduler from ``tag`` (None: the newest) so training
    resumes bit-exactly (several optimizers or schedulers in the structure they were saved
    from); returns the counters and extra properties (``extra_rank``: whose extra of a
    sharded save with per-rank extras). (The order of earlier
    releases, ``(path, model, optimizer, tag)`` with the tag positional or ``tag=`` a keyword,
    still works with a DeprecationWarning.)"""
