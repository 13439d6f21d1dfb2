"""One rank of the distributed tests (test_distributed.py starts it in 4
gloo processes, or under mpirun for mpi4py).

usage: dist_worker.py mpi SCENARIO ARCHIVE_DIR
       dist_worker.py torch SCENARIO ARCHIVE_DIR RANK WORLD PORT [SCENARIO ARCHIVE_DIR ...]

With torch, further SCENARIO ARCHIVE_DIR pairs run in turn in the same
process group (the ranks start, and import torch, once for all of them);
after each pair every rank prints "rank R SCENARIO ARCHIVE_DIR ok".

Scenarios: "save" (uneven row shards as numpy, strided column shards as
torch tensors, a whole tensor on the last rank only, ranks with nothing of
some parameters, then a second tag where dedup finds the unchanged ones),
"invalid" (overlapping shards: the same error on every rank; then a block
outside its global shape on the last rank: its error there, and on every
other rank one naming it; the archive unchanged),
"optim" (a sharded Adam checkpoint with save_checkpoint: w by rows, c by
columns, b whole on the last rank, each rank's Adam over its blocks; then
optimizers that disagree: the same ValueError on every rank),
"gan" (an FSDP-like GAN: each rank's blocks of a generator and a discriminator, an
Adam and an SGD with momentum over them, saved as a mapping of two optimizers, loaded
back into fresh ones; then optimizers that do not fit together: a ValueError on every
rank, the archive unchanged),
"rng" (each rank draws its gradient noise from torch's, numpy's and Python's generators seeded
per rank, saves after RNG_STEPS_SAVED steps with its RNG states as extra=, loads them back into
fresh tensors and reseeded generators and trains on: bit for bit the uninterrupted run),
"rotate" (six saves with keep_last=2, blocking and blocking=False, the
file size bounded; replace; invalid rotations raising on every rank; then
save_checkpoint with keep_last=1 leaves ckpt-2 alone), "background" (the two tags of "save" with blocking=False, the
tensors overwritten right after each call, a synchronous collective on the
training's group while the saves run), "background-invalid" ("invalid" with
blocking=False: result() raises on every rank), "text" (str and lists of str beside
the shards, replicated or on one rank; text that differs between ranks raises on every
rank), "tag-metadata" (tag_metadata= and state dicts' module versions, the same or
different on the ranks), "default-group" (mpi only:
saves with group=None, which must not import torch). Exit status 0 when
every check held (of every pair).
"""
import atexit
import datetime
import os
import random
import sys

import numpy as np

import modelzip
import modelzip.distributed as mzd


def model(version):
    """The whole model: values the test computes itself."""
    return {
        "w": (np.arange(10 * 6, dtype=np.float32).reshape(10, 6) + 1000 * version),
        "c": (np.arange(4 * 9, dtype=np.float64).reshape(4, 9) * 0.5),  # unchanged
        "b": np.arange(5, dtype=np.int32) + version,
    }


TEXT = {"vocab": ["<pad>", "caf\u00e9", "\u65e5\u672c", ""],  # replicated on every rank
        "grid": [["a", "b"], ["c", "d"]]}  # the first rank's


def text_values(version):
    """The text of the "text" scenario, whole: "run" changes with the version."""
    return dict(TEXT, run=f"run-{7 + version}")


def staged_text(rank, world, version, torch):
    """staged() with text: the vocabulary on every rank, the grid on the first, the run
    id on the last (each rank's dict in its own order)."""
    out = staged(rank, world, version, torch)
    out["vocab"] = list(TEXT["vocab"])
    if rank == 0:
        out["grid"] = TEXT["grid"]
    if rank == world - 1:
        out["run"] = text_values(version)["run"]
    return out


def staged(rank, world, version, torch):
    whole = model(version)
    out = {}
    off, shape = mzd.split(whole["w"].shape, 0, rank, world)
    out["w"] = mzd.Shard(whole["w"][off[0]:off[0] + shape[0]].copy(), whole["w"].shape, off)
    off, shape = mzd.split(whole["c"].shape, 1, rank, world)
    block = whole["c"][:, off[1]:off[1] + shape[1]].copy()
    out["c"] = mzd.Shard(torch.from_numpy(block) if torch else block, whole["c"].shape, off)
    if rank == world - 1:
        out["b"] = whole["b"]
    return out


ADAM = {"lr": 0.01, "betas": (0.8, 0.99)}
ADAM_STEPS = 2


def adam_model_values():
    """The optimizer test's initial parameters and per-step gradients (whole)."""
    g = np.random.default_rng(5)
    start = {"w": g.standard_normal((10, 6)).astype(np.float32),
             "c": g.standard_normal((4, 9)).astype(np.float32),
             "b": g.standard_normal(5).astype(np.float32)}
    grads = [{n: g.standard_normal(v.shape).astype(np.float32) for n, v in start.items()}
             for _ in range(ADAM_STEPS)]
    return start, grads


def adam_blocks(rank, world):
    """(offset, shape) of this rank's block of w, c and b (None: not held)."""
    return {"w": mzd.split((10, 6), 0, rank, world), "c": mzd.split((4, 9), 1, rank, world),
            "b": ([0], [5]) if rank == world - 1 else None}


def sharded_adam(rank, world, torch):
    """This rank's blocks as Shards of parameters trained by an Adam over them."""
    start, grads = adam_model_values()
    params = {}
    for name, block in adam_blocks(rank, world).items():
        if block is not None:
            index = tuple(slice(o, o + s) for o, s in zip(*block))
            params[name] = (torch.nn.Parameter(torch.from_numpy(start[name][index].copy())), index)
    optimizer = torch.optim.Adam([p for p, _ in params.values()], **ADAM)
    for step in range(ADAM_STEPS):
        for name, (p, index) in params.items():
            p.grad = torch.from_numpy(grads[step][name][index].copy())
        optimizer.step()
    shards = {n: mzd.Shard(p, start[n].shape, [i.start for i in index]) if n != "b" else p
              for n, (p, index) in params.items()}
    return shards, optimizer


GAN_SHAPES = {"gen.w": (8, 5), "gen.b": (8,), "disc.w": (3, 8), "disc.b": (3,)}
GAN_OPTIMIZERS = {"gen": ("Adam", {"lr": 0.01, "betas": (0.8, 0.99)}),
                  "disc": ("SGD", {"lr": 0.1, "momentum": 0.9})}
GAN_STEPS = 2


def gan_values():
    """The GAN's initial parameters and per-step gradients (whole)."""
    g = np.random.default_rng(11)
    start = {n: g.standard_normal(shape).astype(np.float32) for n, shape in GAN_SHAPES.items()}
    grads = [{n: g.standard_normal(v.shape).astype(np.float32) for n, v in start.items()}
             for _ in range(GAN_STEPS)]
    return start, grads


def gan_blocks(rank, world):
    """(offset, shape) of this rank's block of each GAN parameter (None: not held): the
    weights by rows and columns over every rank, gen.b whole on the last, disc.b on the
    first."""
    return {"gen.w": mzd.split((8, 5), 0, rank, world),
            "gen.b": ([0], [8]) if rank == world - 1 else None,
            "disc.w": mzd.split((3, 8), 1, rank, world),
            "disc.b": ([0], [3]) if rank == 0 else None}


def gan_optimizers(torch, tensors):
    """{name: optimizer} of GAN_OPTIMIZERS, each over the tensors of its model (by name)."""
    return {name: getattr(torch.optim, kind)(
        [t for n, t in tensors.items() if n.startswith(name + ".")], **options)
        for name, (kind, options) in GAN_OPTIMIZERS.items()}


def sharded_gan(rank, world, torch):
    """This rank's GAN blocks as Shards (whole tensors for the biases) and the two optimizers
    trained over them."""
    start, grads = gan_values()
    tensors, indices = {}, {}
    for name, block in gan_blocks(rank, world).items():
        if block is not None:
            indices[name] = tuple(slice(o, o + s) for o, s in zip(*block))
            tensors[name] = torch.nn.Parameter(torch.from_numpy(start[name][indices[name]].copy()))
    optimizers = gan_optimizers(torch, tensors)
    for step in range(GAN_STEPS):
        for name, p in tensors.items():
            p.grad = torch.from_numpy(grads[step][name][indices[name]].copy())
        for optimizer in optimizers.values():
            optimizer.step()
    shards = {n: mzd.Shard(p, GAN_SHAPES[n], [i.start for i in indices[n]]) if n.endswith(".w")
              else p for n, p in tensors.items()}
    return shards, optimizers


RNG_SHAPE = (8, 3)
RNG_STEPS, RNG_STEPS_SAVED = 4, 2


def rng_seeds(rank):
    """(torch, numpy, Python) seeds of rank ``rank`` of the "rng" scenario."""
    return 100 + rank, 200 + rank, 300 + rank


def rng_noise(torch, shape):
    """One step's gradient noise of a block of ``shape``, from the three global generators (the
    test draws the same to work out each rank's saved RNG states)."""
    return (torch.randn(shape) + torch.from_numpy(np.random.standard_normal(shape)).float()
            + random.random())


def rng_training(rank, world, torch, steps, params=None, optimizer=None):
    """This rank's block of the "rng" scenario's weight and its SGD with momentum, after
    ``steps`` steps (from the start, seeding the generators, unless ``params`` and
    ``optimizer`` go on from where they are)."""
    offset, shape = mzd.split(RNG_SHAPE, 0, rank, world)
    if params is None:
        seeds = rng_seeds(rank)
        torch.manual_seed(seeds[0])
        np.random.seed(seeds[1])
        random.seed(seeds[2])
        whole = torch.arange(float(np.prod(RNG_SHAPE))).reshape(RNG_SHAPE) / 10
        block = torch.nn.Parameter(whole[offset[0]:offset[0] + shape[0]].clone())
        params = {"w": mzd.Shard(block, RNG_SHAPE, offset)}
        optimizer = torch.optim.SGD([block], lr=0.1, momentum=0.9)
    block = params["w"].value
    for _ in range(steps):
        block.grad = block.detach() * 0.1 + rng_noise(torch, tuple(shape))
        optimizer.step()
    return params, optimizer


def run(scenario, folder, rank, world, torch, group, comm):
    """One scenario into FOLDER/dist.zip; raises when a check fails."""
    path = os.path.join(folder, "dist.zip")
    if scenario == "save":
        s1 = mzd.save(path, "step-1", staged(rank, world, 1, torch), group=comm, durable=False)
        assert s1.blobs_written == 3, s1
        s2 = mzd.save(path, "step-2", staged(rank, world, 2, torch), group=comm, durable=False)
        assert s2.appended and s2.blobs_deduplicated == 1 and s2.blobs_written == 2, s2
    elif scenario == "background":
        futures = []
        for version in (1, 2):
            tensors = staged(rank, world, version, torch)
            futures.append(mzd.save(path, f"step-{version}", tensors, group=group,
                                    durable=False, blocking=False))
            for value in tensors.values():  # the next training step: must not reach the archive
                block = value.value if isinstance(value, mzd.Shard) else value
                block[...] = -7
        assert not futures[0].cancel()
        assert comm.broadcast(b"training goes on", 0) == b"training goes on"
        s1, s2 = (f.result(timeout=120) for f in futures)
        assert s1.blobs_written == 3, s1
        assert s2.appended and s2.blobs_deduplicated == 1 and s2.blobs_written == 2, s2
    elif scenario in ("invalid", "background-invalid"):
        blocking = scenario == "invalid"
        mzd.save(path, "base", staged(rank, world, 1, torch), group=comm, durable=False)
        before = open(path, "rb").read()
        rows = np.ones((3, 6), np.float32)
        try:
            result = mzd.save(path, "bad", {"w": mzd.Shard(rows, (4, 6), (min(rank, 1), 0))},
                              group=comm if blocking else group, durable=False, blocking=blocking)
            if not blocking:
                result.result(timeout=120)
        except modelzip.Error as e:
            message = str(e)
        else:
            raise AssertionError("an overlapping save succeeded")
        assert "overlap" in message, message
        assert "failed on rank 0" in message, message
        assert comm.broadcast(message.encode(), 0).decode() == message
        assert open(path, "rb").read() == before
        assert sorted(f for f in os.listdir(folder) if not f.endswith("-lock")) == ["dist.zip"]
        if blocking:  # one rank's block does not stage: every rank fails, none waits
            last = rank == world - 1
            block = mzd.Shard(rows, (3 * world, 6), (3 * rank + (5 if last else 0), 0))
            try:
                mzd.save(path, "bad", {"w": block}, group=comm, durable=False)
            except modelzip.InvalidArgumentError as e:
                message = str(e)
            else:
                raise AssertionError("a block outside its global shape was saved")
            assert "is not inside the global shape" in message, message
            if not last:  # the last rank raises its own error, the others name it
                assert f"tag 'bad': collective commit failed on rank {world - 1}: " in message, \
                    message
            assert open(path, "rb").read() == before
    elif scenario == "text":
        # Text beside the shards: step-1 blocking, step-2 (the vocabulary and
        # grid unchanged: references) blocking=False, then text that is not
        # the same on every rank, in a Shard, or not encodable on one rank:
        # an error on every rank naming it, nothing written.
        s1 = mzd.save(path, "step-1", staged_text(rank, world, 1, torch), group=comm,
                      durable=False)
        assert s1.blobs_written == 6, s1
        s2 = mzd.save(path, "step-2", staged_text(rank, world, 2, torch), group=group,
                      durable=False, blocking=False).result(timeout=120)
        assert s2.blobs_deduplicated == 3 and s2.blobs_written == 3, s2
        before = open(path, "rb").read()
        cases = [({"vocab": ["<pad>", "x"] if rank == world - 1 else ["<pad>"]},
                  (modelzip.InvalidArgumentError,),
                  f"parameter 'vocab': rank 0 and rank {world - 1} stage different text"),
                 ({"run": mzd.Shard(["a"], (1,), (0,))} if rank == world - 1 else {},
                  (TypeError, modelzip.InvalidArgumentError), "text is saved whole"),
                 ({"run": "\ud800"} if rank == world - 1 else {},
                  (ValueError, modelzip.InvalidArgumentError),
                  "parameter 'run': string 0 is no UTF-8 text: 'utf-8' codec can't encode")]
        if world > 1:
            cases.append(({"b": np.ones(2, np.float32)} if rank == 0 else {"b": "text"},
                          (modelzip.InvalidArgumentError,),
                          "parameter 'b': rank 1 stages text, rank 0 a tensor"))
        for tensors, errors, text in cases:
            try:
                mzd.save(path, "step-3", tensors, group=comm, durable=False)
            except errors as e:
                message = str(e)
            else:
                raise AssertionError(f"{tensors} was saved")
            assert text in message, message
            # The last rank may raise its own error; every other rank the root's.
            agreed = comm.broadcast(message.encode(), 0).decode()
            assert rank == world - 1 or agreed == message, (agreed, message)
            assert open(path, "rb").read() == before
    elif scenario == "rotate":
        # A rolling run: keep_last=2 in each save's commit, "c" unchanged
        # (dedup references step-1's blob from every later tag, so removing
        # step-1 moves it), blocking saves and blocking=False ones.
        sizes = []
        for version in range(1, 7):
            tensors = staged(rank, world, version, torch)
            if version <= 3:
                s = mzd.save(path, f"step-{version}", tensors, group=comm, durable=False,
                             keep_last=2)
            else:
                s = mzd.save(path, f"step-{version}", tensors, group=group, durable=False,
                             keep_last=2, blocking=False).result(timeout=120)
            assert version == 1 or s.blobs_deduplicated == 1, s
            sizes.append(os.path.getsize(path))
            with modelzip.open(path) as a:
                assert a.tags == [f"step-{v}" for v in range(max(1, version - 1), version + 1)]
        # Two tags' data, at most as many free bytes, and one save's entries.
        assert max(sizes[2:]) <= 3 * sizes[1], sizes
        # replace=True: the newest tag again (blocking=False), then an older one.
        mzd.save(path, "step-6", staged(rank, world, 9, torch), group=group, durable=False,
                 replace=True, keep_last=2, blocking=False).result(timeout=120)
        mzd.save(path, "STEP-5", staged(rank, world, 5, torch), group=comm, durable=False,
                 replace=True)
        with modelzip.open(path) as a:
            assert a.tags == ["step-6", "STEP-5"], a.tags
            assert a.verify() == []
            for version, tag in ((9, "step-6"), (5, "STEP-5")):
                for name, value in model(version).items():
                    np.testing.assert_array_equal(a.tensor(name, tag), value)
        before = open(path, "rb").read()
        # Invalid rotations raise on every rank, the archive unchanged.
        cases = [({}, "already_exists", "replace=True replaces it"),
                 ({"keep_last": 0}, "invalid_argument", "keep_last needs at least 1")]
        if world > 1:
            cases.append(({"keep_last": 2 + (rank == world - 1), "replace": True},
                          "invalid_argument", "every rank passes the same"))
        for kwargs, code, text in cases:
            for blocking in (True, False):
                try:
                    result = mzd.save(path, "step-6", staged(rank, world, 10, torch),
                                      group=comm if blocking else group, durable=False,
                                      blocking=blocking, **kwargs)
                    if not blocking:
                        result.result(timeout=120)
                except modelzip.Error as e:
                    message = str(e)
                    assert e.code == code, (e.code, message)
                else:
                    raise AssertionError(f"save with {kwargs} succeeded")
                assert text in message, message
                assert comm.broadcast(message.encode(), 0).decode() == message
                assert open(path, "rb").read() == before
        if world > 1:  # a keep_last that is no count, on one rank: every rank raises
            try:
                mzd.save(path, "step-6", staged(rank, world, 10, torch), group=comm,
                         durable=False, replace=True, keep_last=-1 if rank == world - 1 else 2)
            except ValueError as e:  # the last rank's own, InvalidArgumentError elsewhere
                message = str(e)
            else:
                raise AssertionError("keep_last=-1 was saved")
            assert "keep_last must be a number of tags >= 1, not -1" in message, message
            assert open(path, "rb").read() == before
        # save_checkpoint rotates too.
        for version in (1, 2):
            mzd.save_checkpoint(path, f"ckpt-{version}", staged(rank, world, version, torch),
                                group=comm, durable=False, keep_last=1)
        with modelzip.open(path) as a:
            assert a.tags == ["ckpt-2"], a.tags
            assert a.verify() == []
            for name, value in model(2).items():
                np.testing.assert_array_equal(a.tensor(name, "ckpt-2"), value)
    elif scenario == "tag-metadata":
        # tag_metadata= and a state dict's module versions (_metadata): the same tag metadata
        # on every rank is stored once; each rank's state dict versions are stored together;
        # values that differ between ranks raise InvalidArgumentError on every rank, nothing
        # written (blocking, blocking=False, save_checkpoint); a rank whose block does not
        # stage with blocking=False fails every rank in the call.
        import collections
        rows = np.full((2, 3), rank, np.float32)

        def state(versions):
            out = collections.OrderedDict(w=mzd.Shard(rows, (2 * world, 3), (2 * rank, 0)))
            out._metadata = collections.OrderedDict(versions)
            return out

        mine = {f"block{rank}": {"version": 1 + rank}, "": {"version": 1}}
        meta = {"run": "r7", "format": "pt"}
        mzd.save(path, "step-1", state(mine), group=comm, durable=False, tag_metadata=meta)
        mzd.save(path, "step-2", state(mine), group=group, durable=False,
                 tag_metadata=dict(meta), blocking=False).result(timeout=120)
        versions = {"": {"version": 1}}
        for r in range(world):
            versions[f"block{r}"] = {"version": 1 + r}
        with modelzip.open(path) as a:
            for tag in ("step-1", "step-2"):
                assert a.tag_metadata(tag) == meta, a.tag_metadata(tag)
                import json
                assert json.loads(a._torch_metadata(tag)["state_dict_metadata"]) == versions
        before = open(path, "rb").read()
        cases = [(state(mine), {"run": f"r{rank}"}, "tag_metadata={'run': 'r1'}"),
                 (state(mine), meta if rank == 0 else None, "every rank passes the same"),
                 (state({"": {"version": 1 + rank}}), meta,
                  "module versions (_metadata) of '' differ")]
        for tensors, given, text in cases:
            for blocking in (True, False):
                try:
                    result = mzd.save(path, "bad", tensors, group=comm if blocking else group,
                                      durable=False, blocking=blocking, tag_metadata=given)
                    if not blocking:
                        result.result(timeout=120)
                except modelzip.InvalidArgumentError as e:
                    message = str(e)
                else:
                    raise AssertionError(f"{text}: saved")
                assert text in message, message
                assert open(path, "rb").read() == before
        if world > 1:  # one rank's block does not stage, blocking=False: every rank raises in
            last = rank == world - 1  # the call (the others started a commit it never joined)
            block = mzd.Shard(rows, (2 * world, 3), (2 * rank + (5 if last else 0), 0))
            try:
                mzd.save(path, "bad", {"w": block}, group=group, durable=False,
                         blocking=False).result(timeout=120)
            except modelzip.InvalidArgumentError as e:
                message = str(e)
            else:
                raise AssertionError("a block outside its global shape was saved")
            assert "is not inside the global shape" in message, message
            if not last:
                assert f"collective commit failed on rank {world - 1}: " in message, message
            assert open(path, "rb").read() == before
        mzd.save_checkpoint(path, "ckpt", state(mine), group=comm, durable=False,
                            tag_metadata=meta)
        with modelzip.open(path) as a:
            assert a.tag_metadata("ckpt") == meta
            # No module versions: a checkpoint keeps them for quantize_dynamic's state dicts
            # only, as modelzip.torch.save_checkpoint does.
            assert "state_dict_metadata" not in a._torch_metadata("ckpt")
        before = open(path, "rb").read()
        try:
            mzd.save_checkpoint(path, "bad", state(mine), group=comm, durable=False,
                                tag_metadata={"run": f"r{rank}"})
        except modelzip.InvalidArgumentError as e:
            message = str(e)
        else:
            raise AssertionError("save_checkpoint with differing tag_metadata: saved")
        assert "tag_metadata={'run': 'r1'}" in message, message
        assert open(path, "rb").read() == before
    elif scenario == "default-group":  # mpi only: group=None is COMM_WORLD
        rows = np.full((2, 3), rank, np.float32)
        tensors = {"w": mzd.Shard(rows, (2 * world, 3), (2 * rank, 0))}
        mzd.save(path, "step-1", tensors, durable=False)
        mzd.save(path, "step-2", tensors, durable=False, blocking=False).result(timeout=120)
        # Telling whether torch's default group is initialized imports no torch
        # (an import of seconds, paid by the first save).
        assert "torch" not in sys.modules, "a save with group=None imported torch"
        with modelzip.open(path) as a:
            assert a.tags == ["step-1", "step-2"]
            assert a.tensor("w", "step-2").tolist() == [[r] * 3 for r in range(world)
                                                        for _ in range(2)]
    elif scenario == "gan":
        if torch is None:
            import torch
        shards, optimizers = sharded_gan(rank, world, torch)
        mzd.save_checkpoint(path, "gan", shards, optimizers, group=comm, durable=False, epoch=1)
        before = open(path, "rb").read()
        # Fresh tensors and optimizers of the same layout get every value back.
        fresh = {n: mzd.Shard(torch.nn.Parameter(torch.zeros(tuple(s.value.shape))),
                              s.global_shape, s.offset) if isinstance(s, mzd.Shard)
                 else torch.nn.Parameter(torch.zeros(tuple(s.shape))) for n, s in shards.items()}
        again = gan_optimizers(torch, {n: s.value if isinstance(s, mzd.Shard) else s
                                       for n, s in fresh.items()})
        state = mzd.load_checkpoint(path, "gan", fresh, again)
        assert (state.iteration, state.epoch) == (GAN_STEPS, 1), state
        for name, optimizer in optimizers.items():
            for p, p2 in zip(optimizer.param_groups[0]["params"],
                             again[name].param_groups[0]["params"]):
                assert torch.equal(p, p2), name
                assert optimizer.state[p].keys() == again[name].state[p2].keys(), name
                for key, value in optimizer.state[p].items():
                    assert torch.equal(value, again[name].state[p2][key]), (name, key)
            assert again[name].param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
        if world == 1:
            return
        # Optimizers that do not fit together: on the last rank one of the two, one
        # optimizer, then its disc.w block held by the generator's optimizer (the
        # discriminator's holding a tensor that is not saved).
        last = rank == world - 1
        extra = torch.nn.Parameter(torch.zeros(1))
        disc_w = shards["disc.w"].value
        cases = [({"gen": optimizers["gen"]} if last else optimizers,
                  f"rank {world - 1} passes optimizers named ['gen'], rank 0 ['gen', 'disc']"),
                 (optimizers["gen"] if last else optimizers,
                  f"rank {world - 1} passes one optimizer, rank 0 several ['gen', 'disc']"),
                 ({"gen": torch.optim.Adam(list(optimizers["gen"].param_groups[0]["params"])
                                           + [disc_w], **GAN_OPTIMIZERS["gen"][1]),
                   "disc": torch.optim.SGD([extra], **GAN_OPTIMIZERS["disc"][1])}
                  if last else optimizers,
                  "parameter 'disc.w' is held by optimizers 'gen' and 'disc' (on different "
                  "ranks)")]
        for given, text in cases:
            try:
                mzd.save_checkpoint(path, "bad", shards, given, group=comm, durable=False)
            except ValueError as e:
                message = str(e)
            else:
                raise AssertionError(f"{text}: saved")
            assert text in message, message
            assert comm.broadcast(message.encode(), 0).decode() == message
            assert open(path, "rb").read() == before
    elif scenario == "rng":
        if torch is None:
            import torch
        whole, whole_optimizer = rng_training(rank, world, torch, RNG_STEPS)
        params, optimizer = rng_training(rank, world, torch, RNG_STEPS_SAVED)
        mzd.save_checkpoint(path, "rng", params, optimizer, group=comm, durable=False, extra={
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
                    "python": random.getstate()}, "rank": rank})
        torch.manual_seed(7)  # the generators and tensors of a new process
        np.random.seed(7)
        random.seed(7)
        fresh = {"w": mzd.Shard(torch.nn.Parameter(torch.zeros_like(params["w"].value)),
                                RNG_SHAPE, params["w"].offset)}
        fresh_optimizer = torch.optim.SGD([fresh["w"].value], lr=0.1, momentum=0.9)
        state = mzd.load_checkpoint(path, "rng", fresh, fresh_optimizer)  # group: the default
        assert state.extra["rank"] == rank, state.extra["rank"]
        torch.set_rng_state(state.extra["rng"]["torch"])
        np.random.set_state(state.extra["rng"]["numpy"])
        random.setstate(state.extra["rng"]["python"])
        rng_training(rank, world, torch, RNG_STEPS - RNG_STEPS_SAVED, fresh, fresh_optimizer)
        done, expected = fresh["w"].value, whole["w"].value
        assert torch.equal(done, expected), (done, expected)
        assert torch.equal(fresh_optimizer.state[done]["momentum_buffer"],
                           whole_optimizer.state[expected]["momentum_buffer"])
        other = (rank + 1) % world
        assert mzd.load_checkpoint(path, "rng", fresh, extra_rank=other).extra["rank"] == other
    elif scenario == "optim":
        if torch is None:
            import torch
        shards, optimizer = sharded_adam(rank, world, torch)
        s = mzd.save_checkpoint(path, "adam", shards, optimizer, group=comm, durable=False,
                                epoch=3, properties={"data.position": "17"})
        assert s.blobs_written == 3 + 3 * 3, s  # 3 parameters, 3 states each
        before = open(path, "rb").read()
        if world == 1:
            return
        for param_group in optimizer.param_groups:
            param_group["lr"] = 0.5 if rank == world - 1 else param_group["lr"]
        try:
            mzd.save_checkpoint(path, "bad", shards, optimizer, group=comm, durable=False)
        except ValueError as e:
            message = str(e)
        else:
            raise AssertionError("optimizers with different hyperparameters were saved")
        assert f"the hyperparameters of rank {world - 1} differ" in message, message
        assert open(path, "rb").read() == before


def main():
    engine, scenario, folder = sys.argv[1:4]
    jobs = [(scenario, folder)]
    torch = None
    if engine == "torch":
        import torch
        import torch.distributed as dist
        rank, world, port = map(int, sys.argv[4:7])
        rest = sys.argv[7:]
        jobs += list(zip(rest[::2], rest[1::2]))
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=60))
        atexit.register(dist.destroy_process_group)  # as torch asks, however the run ends
        group = None
    else:
        from mpi4py import MPI
        group = MPI.COMM_WORLD
        rank, world = group.Get_rank(), group.Get_size()
    comm = mzd.communicator(group)
    for scenario, folder in jobs:
        run(scenario, folder, rank, world, torch, group, comm)
        if engine == "torch":  # the engine's own barrier: modelzip's Communicator has none
            torch.distributed.barrier()
        print(f"rank {rank} {scenario} {folder} ok", flush=True)
    if engine != "torch":
        group.Barrier()


if __name__ == "__main__":
    main()
