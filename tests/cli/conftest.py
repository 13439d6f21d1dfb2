"""Fixtures for the CLI tests: the modelzip binary and sample archives."""
import os
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
