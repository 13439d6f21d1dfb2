"""Resharded reads (read_block, modelzip.distributed.load with blocks) of a
remote archive fetch the blob header and the block's rows or runs, not the
whole tensor: nginx's access log is the witness, the local file the oracle."""
import time

import numpy as np
import pytest

import modelzip
import modelzip.distributed as mzd

from conftest import run

ROWS, COLS = 256, 65536  # float32: 64 MiB, rows of 256 KiB
FINE_ROWS, FINE_COLS = 4096, 1024  # float32: 16 MiB, rows of 4 KiB


@pytest.fixture(scope="module")
def grid(site, tmp_path_factory):
    data = tmp_path_factory.mktemp("grid")
    rng = np.random.default_rng(3)
    arrays = {"w": rng.standard_normal((ROWS, COLS), dtype=np.float32),
              "v": rng.standard_normal((FINE_ROWS, FINE_COLS), dtype=np.float32)}
    for name, a in arrays.items():
        np.save(data / f"{name}.npy", a)
    run("import", site / "grid.zip", "--tag", "t", data / "w.npy", data / "v.npy")
    return arrays


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("MODELZIP_NO_CACHE", "1")


def traffic(nginx, start):
    time.sleep(0.2)  # nginx logs a request when it has ended
    log = nginx.log_lines()[start:]
    return log, sum(r["body_bytes_sent"] for r in log)


def open_cost(nginx, url):
    """Body bytes of opening the archive and reading the parameter's info
    (tail, tables, blob header): what every block read pays first."""
    start = len(nginx.log_lines())
    with modelzip.open(url) as a:
        a.params("t")
    return traffic(nginx, start)[1]


CASES = [  # (parameter, offset, shape, bytes of the block's rows/runs fetched at most)
    ("w", (10, 0), (2, COLS), 2 * COLS * 4),                    # two whole rows: one run
    ("w", (0, 1000), (ROWS, 16), ROWS * 64),                    # a column strip: 256 runs
    ("w", (100, 30000), (3, 5), 3 * 5 * 4),                     # a small tile
    ("v", (0, 0), (FINE_ROWS, FINE_COLS // 2), 2 * 8 << 20),    # half of each 4 KiB row:
    # gaps of 2 KiB are fetched along (bounded over-read): at most twice the block
]


@pytest.mark.parametrize("name,offset,shape,budget", CASES,
                         ids=[f"{c[0]}{list(c[1])}{list(c[2])}" for c in CASES])
def test_block_fetches_only_its_runs(nginx, grid, name, offset, shape, budget):
    url = nginx.url("grid.zip")
    base = open_cost(nginx, url)
    start = len(nginx.log_lines())
    stats = {}
    got = mzd.load(url, {name: (offset, shape)}, tag="t", stats=stats)[name]
    log, sent = traffic(nginx, start)
    (o0, o1), (s0, s1) = offset, shape
    np.testing.assert_array_equal(got, grid[name][o0:o0 + s0, o1:o1 + s1])
    whole = (ROWS * COLS if name == "w" else FINE_ROWS * FINE_COLS) * 4
    assert all(r["status"] in (200, 206) for r in log)
    assert sent <= base + budget + (16 << 10), (sent, base, budget, len(log))
    assert sent < whole // 2 or budget >= whole // 2
    assert stats[name][0] == np.prod(shape) * 4


def test_whole_tensor_still_fetches_everything(nginx, grid):
    """The control: without a block, the tensor's bytes are all fetched (so
    the budgets above are not met by accident)."""
    url = nginx.url("grid.zip")
    start = len(nginx.log_lines())
    got = mzd.load(url, {"w": None}, tag="t")["w"]
    _, sent = traffic(nginx, start)
    assert got.shape == (ROWS, COLS)
    assert sent >= ROWS * COLS * 4
