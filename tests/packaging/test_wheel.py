"""The pip routes: `python3 -m build --wheel` on the source tree gives a wheel tagged for the
interpreter and platform (pip refuses it for another Python) that installs into a fresh venv and
saves and loads there, without the build tree or an installed libmodelzip, with the `modelzip`
command in the venv's bin/; and `pip install --no-build-isolation .` installs the package and the
command into a venv that sees Debian's numpy and torch.

Run by meson as the test `python_wheel` (MODELZIP_SOURCE_DIR = the source tree). Each build
configures and compiles the library once more (pyproject.toml: -Dwheel=true -Dtests=false), with
ccache when it is installed (.ci/install-deps installs it). The cache is the user's (CCACHE_DIR,
else ccache's default folder), not one of this test's own. Both builds are set up to compile with
exactly the commands of the normal `--buildtype=debugoptimized` build in <source>/build (see
`build_settings`), so that in CI, where tests/run.sh built that first, they compile nothing: ccache's
hits are the objects the compiler made from the same preprocessed source and flags. What the test
checks (the wheel's tags and contents, a venv install, the pip route) does not depend on the
optimisation level or debug information.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("MODELZIP_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
# The version meson.build declares: the wheel's name, dist-info and data folder carry it.
VERSION = re.search(r"^\s*version\s*:\s*'([^']+)'", (SOURCE_DIR / "meson.build").read_text(),
                    re.MULTILINE).group(1)

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
    """The builds' environment: ccache (when installed, in the user's cache) with paths relative
    to the source tree and without the build folder in the hash (ccache hashes it for -g
    otherwise): the objects of <source>/build are found from the wheel's build folders."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if shutil.which("ccache") and "CXX" not in env:
        env["CXX"] = "ccache c++"
        env.setdefault("CCACHE_BASEDIR", str(SOURCE_DIR))
        env["CCACHE_NOHASHDIR"] = "1"
    return env


def build_settings(name):
    """meson-python's config settings for one build: its build folder <source>/<name>, a child of
    the source tree as build/ is (the compile commands name the sources as ../src/..., not
    ../../src/... as in meson-python's own .mesonpy-*/build), and -Ddebug=true, which with
    meson-python's -Doptimization=2 gives debugoptimized's flags (-O2 -g). The folder is emptied
    first, and meson-python's native file removed: meson-python 0.12 reconfigures a given build
    folder when that file is unchanged, which fails on an empty one."""
    build_dir = SOURCE_DIR / name
    shutil.rmtree(build_dir, ignore_errors=True)
    (SOURCE_DIR / ".mesonpy-native-file.ini").unlink(missing_ok=True)
    return {"builddir": str(build_dir), "setup-args": "-Ddebug=true"}


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
state = modelzip.torch.load_checkpoint(sys.argv[1], None, again, torch.optim.Adam(again.parameters()))
assert torch.equal(again.weight, model.weight) and state.iteration == 1, state
print("ok")
"""


@pytest.fixture(scope="module")
def build_env():
    return environment()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, build_env):
    """The wheel `python3 -m build --wheel` makes of the source tree."""
    dist = tmp_path_factory.mktemp("dist")
    settings = build_settings(".mesonpy-test-wheel")
    try:
        subprocess.run(["/usr/bin/python3", "-m", "build", "--wheel", "--no-isolation",
                        "--outdir", str(dist), str(SOURCE_DIR)]
                       + [f"-C{key}={value}" for key, value in settings.items()],
                       check=True, env=build_env, timeout=1700)
    finally:
        shutil.rmtree(settings["builddir"], ignore_errors=True)
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


# The modelzip CLI, shipped in the wheel's scripts folder (pip installs it as <venv>/bin/modelzip).
CLI_IN_WHEEL = f"modelzip-{VERSION}.data/scripts/modelzip"


def check_cli(venv, archive, env):
    """The venv's `modelzip` command: help, and real commands on the archive SAVE_AND_LOAD wrote."""
    cli = venv / "bin" / "modelzip"
    assert cli.is_file() and os.access(cli, os.X_OK), f"{cli} not installed"
    dynamic = subprocess.run(["readelf", "-d", str(cli)], check=True, capture_output=True,
                             text=True).stdout
    assert "libmodelzip" not in dynamic and "RUNPATH" not in dynamic, dynamic
    path_env = dict(env, PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")
    shown = subprocess.run(["modelzip", "--help"], env=path_env, capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0 and "Commands:" in shown.stdout, shown.stdout + shown.stderr
    tags = subprocess.run(["modelzip", "tags", str(archive)], env=path_env, capture_output=True,
                          text=True, timeout=60)
    assert (tags.returncode, tags.stdout) == (0, "step-1\nstep-2\n"), tags.stderr
    verified = subprocess.run(["modelzip", "verify", str(archive)], env=path_env,
                              capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def run_in(python, script, archive, env):
    out = subprocess.run([str(python), "-c", script, str(archive)], env=env, cwd=archive.parent,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr


def interpreter_tag():
    """The tags of a wheel built for this interpreter, e.g. "cp311-cp311-linux_x86_64"
    (PEP 425: the platform is sysconfig's, "-" and "." replaced by "_")."""
    cp = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{cp}-{cp}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def pip_would_install(wheel, python_version, tmp_path):
    """pip's answer for a wheel, as if installing into Python `python_version` ("3.12")."""
    return subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
                           "--no-deps", "--only-binary=:all:", "--python-version", python_version,
                           "--target", str(tmp_path / f"target-{python_version}"), str(wheel)],
                          capture_output=True, text=True, timeout=300)


def test_wheel_is_tagged_for_its_interpreter_and_platform(wheel, tmp_path):
    """The wheel holds an extension built for one CPython: tagged cpXY-cpXY-<platform>, not
    py3-none-any, so that pip refuses to install it into another Python (which could not
    load the extension) instead of failing later at `import modelzip`."""
    assert wheel.name == f"modelzip-{VERSION}-{interpreter_tag()}.whl", wheel.name
    with zipfile.ZipFile(wheel) as z:
        fields = z.read(f"modelzip-{VERSION}.dist-info/WHEEL").decode().splitlines()
    assert "Root-Is-Purelib: false" in fields and f"Tag: {interpreter_tag()}" in fields, fields
    ours = pip_would_install(wheel, f"{sys.version_info.major}.{sys.version_info.minor}",
                             tmp_path)
    assert ours.returncode == 0 and f"Would install modelzip-{VERSION}" in ours.stdout, \
        ours.stdout + ours.stderr
    other = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"
    refused = pip_would_install(wheel, other, tmp_path)
    assert refused.returncode != 0, refused.stdout
    assert "is not a supported wheel on this platform" in refused.stderr, refused.stderr


def test_wheel_installs_into_a_fresh_venv_and_works(wheel, build_env, tmp_path):
    env = build_env
    names = zipfile.ZipFile(wheel).namelist()
    for required in ("modelzip/__init__.py", "modelzip/__init__.pyi", "modelzip/py.typed",
                     "modelzip/torch.py", "modelzip/torch.pyi", "modelzip/_errors.py",
                     CLI_IN_WHEEL):
        assert required in names, f"{required} missing from {wheel.name}: {names}"
    (extension,) = [n for n in names if n.startswith("modelzip/_modelzip") and n.endswith(".so")]
    # Nothing but the package and the CLI: no headers, pkg-config file or bundled libraries.
    assert all(n.startswith(("modelzip/", "modelzip-")) for n in names), names
    assert [n for n in names if n.startswith(f"modelzip-{VERSION}.data/")] == [CLI_IN_WHEEL], names

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
    check_cli(venv, tmp_path / "m.zip", env)


# The pip route exactly as README.md and docs/install.md give it; the test below runs these
# commands (the venv in its own folder).
DOCUMENTED_PIP_ROUTE = ["/usr/bin/python3 -m venv --system-site-packages venv",
                        "venv/bin/pip install -v --no-build-isolation ."]


def test_the_documented_pip_route_is_the_tested_one():
    for doc in ("README.md", "docs/install.md"):
        text = (SOURCE_DIR / doc).read_text()
        for command in DOCUMENTED_PIP_ROUTE:
            assert re.search(rf"^{re.escape(command)}( +#.*)?$", text, re.M), \
                f"{doc} does not give: {command}"


def test_pip_install_of_the_source_tree_into_a_venv(wheel, build_env, tmp_path):
    """The documented route: a venv of /usr/bin/python3 with Debian's packages, then
    `pip install -v --no-build-isolation .`, the command as documented, with build_settings given
    in a pip configuration file (PIP_CONFIG_FILE; pip takes one config-settings value per
    section)."""
    settings = build_settings(".mesonpy-test-pip")
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nconfig-settings = builddir={settings['builddir']}\n"
                      f"[install]\nconfig-settings = setup-args={settings['setup-args']}\n")
    env = dict(build_env, PIP_CONFIG_FILE=str(config))
    make_venv_command, pip_command = (shlex.split(c) for c in DOCUMENTED_PIP_ROUTE)
    subprocess.run(make_venv_command, check=True, env=env, cwd=tmp_path, timeout=300)
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    pip_command[0] = str(tmp_path / pip_command[0])
    try:
        installed = subprocess.run(pip_command, env=env, cwd=SOURCE_DIR, timeout=1700,
                                   capture_output=True, text=True)
    finally:
        shutil.rmtree(settings["builddir"], ignore_errors=True)
    assert installed.returncode == 0, installed.stdout[-5000:] + installed.stderr[-5000:]
    # -v shows the build's progress: meson's and ninja's lines, and its setup command, which
    # holds the setting from the configuration file (were it ignored, the build would still pass,
    # only compiling everything again).
    assert "[1/" in installed.stdout + installed.stderr, installed.stdout[-5000:]
    assert "-Ddebug=true" in installed.stdout + installed.stderr, installed.stdout[-5000:]
    assert package_dir(python, env, tmp_path).is_relative_to(venv)
    listed = subprocess.run([str(python), "-m", "pip", "show", "modelzip"], check=True, env=env,
                            capture_output=True, text=True).stdout
    assert "Name: modelzip" in listed and str(venv) in listed, listed
    run_in(python, SAVE_AND_LOAD, tmp_path / "m.zip", env)
    check_cli(venv, tmp_path / "m.zip", env)
    run_in(python, TORCH_CHECKPOINT, tmp_path / "t.zip", env)
