"""Fixtures for the CLI tests: the modelzip binary, sample archives, and
safetensors files built and read by hand."""
import json
import os
import struct
import subprocess

import pytest

CLI = os.environ.get("MODELZIP_CLI", "modelzip")
QUICKSTART = os.environ.get("MODELZIP_QUICKSTART", "quickstart")
SOURCE_DIR = os.environ.get("MODELZIP_SOURCE_DIR", ".")


def run(*args, check=True, input=None):
    """Runs modelzip; returns CompletedProcess with bytes stdout/stderr."""
    proc = subprocess.run([CLI, *map(str, args)], capture_output=True, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"modelzip {args} failed ({proc.returncode}): {proc.stderr.decode()}")
    return proc


@pytest.fixture
def quickstart_archive(tmp_path):
    """An archive with tags step-1 and step-2 written by samples/quickstart."""
    path = tmp_path / "qs.zip"
    subprocess.run([QUICKSTART, str(path)], check=True, capture_output=True)
    return path


def safetensors_file(tensors):
    """{name: (safetensors dtype, shape, raw bytes)} as the library writes
    them: compact JSON, tensors in the order given, header padded to 8."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def read_safetensors(raw):
    """(header dict, {name: raw bytes}) of a safetensors file, read by hand."""
    (n,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    return header, {k: data[v["data_offsets"][0]:v["data_offsets"][1]]
                    for k, v in header.items() if k != "__metadata__"}
