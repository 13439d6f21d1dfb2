"""Fixtures of the Python binding tests (run by meson with PYTHONPATH set to the built package)."""
import os
import pathlib
import sys

import pytest

import modelzip

TESTDATA = pathlib.Path(os.environ.get("MODELZIP_SHARED_TESTDATA",
                                       pathlib.Path(__file__).parents[3] / "shared" / "testdata"))
SOURCE_DIR = pathlib.Path(os.environ.get("MODELZIP_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
CLI = os.environ.get("MODELZIP_CLI")

sys.path.insert(0, str(SOURCE_DIR / "tests" / "support"))
from one_rank import OneRank  # noqa: E402,F401  (the tests import it from here)


@pytest.fixture
def archive_path(tmp_path):
    """A path for a new archive (not created)."""
    return tmp_path / "model.zip"


@pytest.fixture
def finalfusion_dir():
    """The shared real finalfusion/word2vec/fastText files."""
    path = TESTDATA / "finalfusion"
    if not path.is_dir():
        pytest.fail(f"no shared test data at {path} (../shared must be beside the clone)")
    return path


def save(path, tag, arrays, **kwargs):
    """modelzip.save without fsync (tests need no durability)."""
    return modelzip.save(path, tag, arrays, durable=False, **kwargs)
