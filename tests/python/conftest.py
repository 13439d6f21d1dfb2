"""Fixtures of the Python binding tests (run by meson with PYTHONPATH set to the built package)."""
import json
import os
import pathlib
import struct
import sys
import zipfile

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


def write_safetensors(path, tensors):
    """A .safetensors file written by hand, per the published format (no safetensors package):
    {name: (dtype, shape, bytes)}, in the given order; the header padded to 8 bytes."""
    header, body = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def blob_bytes(path, blob):
    """The bytes of zip entry ``blob`` of the archive at ``path``, read by Python's zipfile."""
    with zipfile.ZipFile(path) as z:
        return z.read(blob)

