"""The pip routes: `python3 -m build --wheel` on the source tree gives a wheel that installs into
a fresh venv and saves and loads there, without the build tree or an installed libmodelzip; and
`pip install --no-build-isolation .` installs the package into a venv that sees Debian's numpy
and torch.

Run by meson as the test `python_wheel` (MODELZIP_SOURCE_DIR = the source tree). Each build
configures and compiles the library once more (pyproject.toml: -Dwheel=true -Dtests=false), with
ccache when it is installed (.ci/install-deps installs it), so the second build compiles nothing.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("MODELZIP_SOURCE_DIR", pathlib.Path(__file__).parents[2]))

SAVE_AND_LOAD = r"""
import pathlib, sys
import numpy as np
import modelzip

assert pathlib.Path(modelzip.__file__).is_relative_to(sys.prefix), modelzip.__file__
path = pathlib.Path(sys.argv[1])
w = np.arange(12, dtype=np.float32).reshape(3, 4)
modelzip.save(path, "step-1", {"w": w, "b": np.ones(3, np.float64)}, durable=False)
modelzip.save(path, "step-2", {"w": w, "b": np.zeros(3, np.float64)}, durable=False)
with modelzip.open(path) as ar:
    assert ar.tags == ["step-1", "step-2"], ar.tags
    assert ar.param("w").shared, "unchanged w is stored once"
    loaded = ar.load("step-1")
assert np.array_equal(loaded["w"], w) and loaded["b"].tolist() == [1.0, 1.0, 1.0]
try:
    modelzip.open(path.with_name("missing.zip"))
except FileNotFoundError as e:
    assert isinstance(e, modelzip.Error)
print("ok", modelzip.__version__)
"""


def environment(cache_dir):
    """The builds' environment: ccache (when installed) with paths relative to the source tree,
    where meson-python keeps its build folders (.mesonpy-*/build), so the second build of the
    package reuses the first one's objects."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if shutil.which("ccache") and "CXX" not in env:
        env["CXX"] = "ccache c++"
        env.setdefault("CCACHE_DIR", str(cache_dir))
        env.setdefault("CCACHE_BASEDIR", str(SOURCE_DIR))
        env["CCACHE_NOHASHDIR"] = "1"
    return env


TORCH_CHECKPOINT = r"""
import pathlib, sys
import torch
import modelzip, modelzip.torch

assert pathlib.Path(modelzip.__file__).is_relative_to(sys.prefix), modelzip.__file__
torch.manual_seed(0)
model = torch.nn.Linear(3, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
model(torch.ones(4, 3)).sum().backward()
optimizer.step()
modelzip.torch.save_checkpoint(sys.argv[1], "step-1", model, optimizer, durable=False)
again = torch.nn.Linear(3, 2)
state = modelzip.torch.load_checkpoint(sys.argv[1], again, torch.optim.Adam(again.parameters()))
assert torch.equal(again.weight, model.weight) and state.iteration == 1, state
print("ok")
"""


@pytest.fixture(scope="module")
def build_env(tmp_path_factory):
    return environment(tmp_path_factory.mktemp("ccache"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, build_env):
    """The wheel `python3 -m build --wheel` makes of the source tree."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(["/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation",
                    "--outdir", str(dist), str(SOURCE_DIR)], check=True, env=build_env,
                   timeout=1700)
    (built,) = dist.glob("modelzip-*.whl")
    return built


def make_venv(path, env):
    """A fresh venv that sees Debian's numpy and torch; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(path)], check=True,
                   env=env, timeout=300)
    return path / "bin" / "python"


def package_dir(python, env, cwd):
    return pathlib.Path(subprocess.run(
        [str(python), "-c", "import modelzip, os; print(os.path.dirname(modelzip.__file__))"],
        check=True, env=env, cwd=cwd, capture_output=True, text=True).stdout.strip())


def run_in(python, script, archive, env):
    out = subprocess.run([str(python), "-c", script, str(archive)], env=env, cwd=archive.parent,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr


def test_wheel_installs_into_a_fresh_venv_and_works(wheel, build_env, tmp_path):
    env = build_env
    names = zipfile.ZipFile(wheel).namelist()
    for required in ("modelzip/__init__.py", "modelzip/__init__.pyi", "modelzip/py.typed",
                     "modelzip/torch.py", "modelzip/torch.pyi", "modelzip/_errors.py"):
        assert required in names, f"{required} missing from {wheel.name}: {names}"
    (extension,) = [n for n in names if n.startswith("modelzip/_modelzip") and n.endswith(".so")]
    # Nothing but the package: no CLI, headers, pkg-config file or bundled libraries.
    assert all(n.startswith(("modelzip/", "modelzip-")) for n in names), names

    venv = tmp_path / "venv"
    python = make_venv(venv, env)
    subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
                   check=True, env=env, timeout=300)
    installed = package_dir(python, env, tmp_path)
    assert installed.is_relative_to(venv), installed
    needed = subprocess.run(["readelf", "-d", str(installed / pathlib.Path(extension).name)],
                            check=True, capture_output=True, text=True).stdout
    assert "libmodelzip" not in needed, "the extension must link libmodelzip statically"
    assert "RUNPATH" not in needed and "RPATH" not in needed, needed
    run_in(python, SAVE_AND_LOAD, tmp_path / "m.zip", env)


def test_pip_install_of_the_source_tree_into_a_venv(wheel, build_env, tmp_path):
    """The README's route: `pip install --no-build-isolation .` in a venv with Debian's packages
    (after the wheel test, so its compiler runs hit ccache)."""
    env = build_env
    venv = tmp_path / "venv"
    python = make_venv(venv, env)
    subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index",
                    "--no-deps", "."], check=True, env=env, cwd=SOURCE_DIR, timeout=1700)
    assert package_dir(python, env, tmp_path).is_relative_to(venv)
    listed = subprocess.run([str(python), "-m", "pip", "show", "modelzip"], check=True, env=env,
                            capture_output=True, text=True).stdout
    assert "Name: modelzip" in listed and str(venv) in listed, listed
    run_in(python, SAVE_AND_LOAD, tmp_path / "m.zip", env)
    run_in(python, TORCH_CHECKPOINT, tmp_path / "t.zip", env)
