"""The pip route: `python3 -m build --wheel` on the source tree gives a wheel that installs into
a fresh venv and saves and loads there, without the build tree or an installed libmodelzip.

Run by meson as the test `python_wheel` (MODELZIP_SOURCE_DIR = the source tree). The wheel
build configures and compiles the library once more (pyproject.toml: -Dwheel=true
-Dtests=false), with ccache when it is installed.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

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


def environment():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if shutil.which("ccache") and "CXX" not in env:
        env["CXX"] = "ccache c++"
    return env


def test_wheel_installs_into_a_fresh_venv_and_works(tmp_path):
    env = environment()
    dist = tmp_path / "dist"
    subprocess.run(["/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation",
                    "--outdir", str(dist), str(SOURCE_DIR)], check=True, env=env, timeout=1700)
    (wheel,) = dist.glob("modelzip-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for required in ("modelzip/__init__.py", "modelzip/__init__.pyi", "modelzip/py.typed",
                     "modelzip/torch.py", "modelzip/torch.pyi", "modelzip/_errors.py"):
        assert required in names, f"{required} missing from {wheel.name}: {names}"
    (extension,) = [n for n in names if n.startswith("modelzip/_modelzip") and n.endswith(".so")]
    # Nothing but the package: no CLI, headers, pkg-config file or bundled libraries.
    assert all(n.startswith(("modelzip/", "modelzip-")) for n in names), names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   env=env, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
                   check=True, env=env, timeout=300)
    installed = pathlib.Path(subprocess.run(
        [str(python), "-c", "import modelzip, os; print(os.path.dirname(modelzip.__file__))"],
        check=True, env=env, cwd=tmp_path, capture_output=True, text=True).stdout.strip())
    assert installed.is_relative_to(venv), installed
    needed = subprocess.run(["readelf", "-d", str(installed / pathlib.Path(extension).name)],
                            check=True, capture_output=True, text=True).stdout
    assert "libmodelzip" not in needed, "the extension must link libmodelzip statically"
    assert "RUNPATH" not in needed and "RPATH" not in needed, needed
    out = subprocess.run([str(python), "-c", SAVE_AND_LOAD, str(tmp_path / "m.zip")], check=True,
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.stdout.startswith("ok "), out.stdout + out.stderr
