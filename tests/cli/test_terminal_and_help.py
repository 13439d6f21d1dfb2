"""Colour only on a terminal, help with examples for every command, human
sizes, and `export` choosing the format by --format or by OUT's extension."""
import errno
import json
import os
import pty
import re
import struct
import subprocess
import tempfile
import zipfile

import numpy as np
import pytest

from conftest import CLI, run

ESCAPE = re.compile(rb"\x1b\[")


def run_on_terminal(*args, env=None):
    """Runs modelzip with stdout and stderr on a pseudo-terminal; (status, bytes shown)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([CLI, *map(str, args)], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError as e:  # EIO: the child closed the terminal
            if e.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return proc.wait(), shown


def env_with(**changes):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    env["TERM"] = "xterm"
    env.update(changes)
    return env


@pytest.fixture
def edited(quickstart_archive):
    """quickstart's archive plus a tag v3 that adds, removes and changes parameters."""
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "v3.npz"), extra=np.zeros(256, np.float32),
                 **{"fc.bias": np.full(10, 2.0, np.float32)})
        run("import", quickstart_archive, "--tag", "v3", os.path.join(tmp, "v3.npz"))
    return quickstart_archive


def test_diff_is_coloured_on_a_terminal_only(edited):
    status, shown = run_on_terminal("diff", edited, "step-2", "v3", env=env_with())
    assert status == 1  # the tags differ
    assert b"\x1b[32madded\x1b[0m\textra" in shown
    assert b"\x1b[31mremoved\x1b[0m\tembedding" in shown
    assert b"\x1b[33mchanged\x1b[0m\tfc.bias" in shown
    piped = run("diff", edited, "step-2", "v3", check=False)
    assert not ESCAPE.search(piped.stdout + piped.stderr)
    assert b"added\textra\tfloat32 [256], 1.0 KiB\n" in piped.stdout
    assert b"removed\tembedding\tfloat32 [1000, 64], 250.0 KiB\n" in piped.stdout
    assert b"changed\tfc.bias\tmax |a - b| = 1.5\n" in piped.stdout  # 0.5 -> 2.0


@pytest.mark.parametrize("no_color", ["1", "yes"])
def test_no_color_turns_colour_off_on_a_terminal(edited, no_color):
    status, shown = run_on_terminal("diff", edited, "step-2", "v3", env=env_with(NO_COLOR=no_color))
    assert status == 1 and b"added\textra" in shown
    assert not ESCAPE.search(shown)
    status, shown = run_on_terminal("diff", edited, "step-2", "v3", env=env_with(TERM="dumb"))
    assert b"added\textra" in shown and not ESCAPE.search(shown)


def test_empty_no_color_keeps_colour(edited):
    # no-color.org: only a NO_COLOR that is set and not empty counts.
    _, shown = run_on_terminal("diff", edited, "step-2", "v3", env=env_with(NO_COLOR=""))
    assert b"\x1b[32madded" in shown


def test_errors_and_verify_are_coloured_on_a_terminal_only(quickstart_archive, tmp_path):
    status, shown = run_on_terminal("ls", tmp_path / "missing.zip", env=env_with())
    assert status == 1 and shown.startswith(b"\x1b[31mmodelzip:\x1b[0m ")
    piped = run("ls", tmp_path / "missing.zip", check=False)
    assert piped.returncode == 1 and piped.stderr.startswith(b"modelzip: ")
    assert not ESCAPE.search(piped.stderr)
    status, shown = run_on_terminal("ls", env=env_with())  # wrong usage
    assert status == 2 and shown.startswith(b"\x1b[31mmodelzip ls:\x1b[0m ")
    status, shown = run_on_terminal("verify", quickstart_archive, env=env_with())
    assert status == 0 and b"\x1b[32mOK\x1b[0m" in shown
    piped = run("verify", quickstart_archive)
    assert piped.stdout.endswith(b": OK\n") and not ESCAPE.search(piped.stdout)


def test_verify_problems_are_red_on_a_terminal(quickstart_archive, tmp_path):
    # A stored blob with one data byte flipped: its CRC-32 no longer matches.
    broken = tmp_path / "broken.zip"
    data = bytearray(quickstart_archive.read_bytes())
    with zipfile.ZipFile(quickstart_archive) as z:
        info = z.getinfo("step-1/params/0.fb")
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    data[info.header_offset + 30 + name_len + extra_len + info.file_size - 1] ^= 0xFF
    broken.write_bytes(bytes(data))
    status, shown = run_on_terminal("verify", broken, env=env_with())
    assert status == 1 and b"\x1b[31m" in shown and b"problem(s)\x1b[0m" in shown
    piped = run("verify", broken, check=False)
    assert piped.returncode == 1 and piped.stdout and not ESCAPE.search(piped.stdout)


def commands():
    out = run("--help").stdout.decode()
    block = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines()]


def test_overview_lists_seventeen_commands_and_exit_status():
    names = commands()
    assert len(names) == 17 and len(set(names)) == 17
    out = run("--help").stdout.decode()
    assert "Exit status:" in out and "NO_COLOR" in out and "Examples:" in out


@pytest.mark.parametrize("command", commands())
def test_every_command_help_has_usage_and_runnable_looking_examples(command):
    out = run(command, "--help").stdout.decode()
    assert out.startswith(f"Usage: modelzip {command} ")
    examples = re.search(r"\nExamples?:\n((?:  .+\n)+)", out)
    assert examples, out
    for line in examples.group(1).splitlines():
        assert line.startswith(f"  modelzip {command} "), line
    assert run("help", command).stdout.decode() == out  # `modelzip help CMD` too


def test_no_command_is_a_usage_error_on_standard_error():
    """`modelzip` alone exits 2 like every usage error, so its text goes where
    usage errors go: `modelzip > out` leaves out empty."""
    p = run(check=False)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr == run("--help").stdout


def test_options_given_with_an_equals_sign(quickstart_archive):
    """--tag=T works, so users write -k=5 and --updater=VAR STATE too: the
    first works as argparse reads it, the others say how to write them
    (they said 'unknown option', of options the usage lists)."""
    fifu = os.path.join(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata"),
                        "finalfusion", "similarity.fifu")
    assert (run("similar", fifu, "Berlin", "-k=2").stdout
            == run("similar", fifu, "Berlin", "-k", "2").stdout)
    p = run("ls", quickstart_archive, "--json=yes", check=False)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().startswith(
        "modelzip ls: option --json takes no value, got '--json=yes'\nUsage: modelzip ls ")
    p = run("cat", quickstart_archive, "--updater=fc1.weight", "M", check=False)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().startswith(
        "modelzip cat: option --updater takes its two values as separate arguments, got "
        "'--updater=fc1.weight' (see the usage below)\nUsage: modelzip cat ")


def test_help_for_an_unknown_command_is_a_usage_error():
    p = run("help", "lss", check=False)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode() == "modelzip: unknown command 'lss' (did you mean 'ls'?)\n"
    p = run("--help", "frobnicate", check=False)
    assert p.returncode == 2 and b"unknown command 'frobnicate'" in p.stderr
    assert run("help", "help").stdout == run("--help").stdout  # the overview


def test_man_page_from_the_build_tree_is_valid_roff():
    page = run("--man").stdout.decode()
    assert page.startswith(".TH MODELZIP 1 ")
    # Hyphens are escaped (real minus signs), no raw request-looking text lines.
    assert ("\n.B modelzip export ARCHIVE [PARAM...] [\\-\\-updater VAR STATE]... [\\-\\-tag T] "
            "[\\-\\-format F] [\\-\\-dequantize] OUT\n") in page
    for line in page.splitlines():
        if line.startswith("."):
            assert re.match(r"\.(TH|SH|SS|B|I|BR|RI|TP|PP|RS|RE|nf|fi|br)( |$)", line), line
    if subprocess.run(["sh", "-c", "command -v groff"], capture_output=True).returncode == 0:
        proc = subprocess.run(["groff", "-man", "-ww", "-z"], input=page, capture_output=True,
                              text=True)
        assert proc.returncode == 0 and proc.stderr == ""
    assert "--man" not in run("--help").stdout.decode()  # an internal build step


def test_ls_sizes_are_human_readable(quickstart_archive):
    fields = [line.split("\t") for line in run("ls", quickstart_archive).stdout.decode().splitlines()]
    rows = {f[0]: f[3] for f in fields}  # name, dtype, shape, size, blob[, shared...]
    assert rows["embedding"] == "250.0 KiB"  # 1000 x 64 float32 = 256000 B
    assert rows["fc.weight"] == "2.5 KiB"    # 64 x 10 float32 = 2560 B
    assert rows["fc.bias"] == "40 B"


# --- export: the format from --format, else from OUT's extension -------------

@pytest.fixture
def tensors(tmp_path):
    archive = tmp_path / "t.zip"
    np.savez(tmp_path / "in.npz", a=np.arange(6, dtype=np.float32).reshape(2, 3),
             b=np.array([7, -8], dtype=np.int16), c=np.array([0.25], dtype=np.float64))
    run("import", archive, "--tag", "v1", tmp_path / "in.npz")
    np.savez(tmp_path / "in2.npz", a=np.ones((2, 3), np.float32))
    run("import", archive, "--tag", "v2", tmp_path / "in2.npz")
    return archive


def read_btf(data):
    """Dense TFRT BTF records (tensorflow/runtime binary_tensor_format.md): u64 count,
    u64 offsets, then per record u64 rank, u8 dtype, u8 layout, 6 reserved, u64 dims."""
    numpy_of = {0: "<i1", 1: "<i2", 2: "<i4", 3: "<i8", 4: "<f4", 5: "<f8"}
    (count,) = struct.unpack_from("<Q", data, 0)
    offsets = struct.unpack_from(f"<{count}Q", data, 8)
    out = []
    for i, at in enumerate(offsets):
        rank, dtype, layout = struct.unpack_from("<QBB", data, at)
        assert layout == 0 and at % 8 == 0
        dims = struct.unpack_from(f"<{rank}Q", data, at + 16)
        start = at + 16 + 8 * rank
        n = int(np.prod(dims)) * np.dtype(numpy_of[dtype]).itemsize
        out.append(np.frombuffer(data[start:start + n], numpy_of[dtype]).reshape(dims))
    return out


def test_export_btf_by_extension(tensors, tmp_path):
    run("export", tensors, "--tag", "v1", tmp_path / "out.btf")
    a, b, c = read_btf((tmp_path / "out.btf").read_bytes())
    assert np.array_equal(a, np.arange(6).reshape(2, 3)) and a.dtype == np.float32
    assert b.tolist() == [7, -8] and b.dtype == np.int16
    assert c.tolist() == [0.25]


@pytest.mark.parametrize("fmt", ["safetensors", "npz", "btf"])
def test_format_option_wins_over_the_extension(tensors, tmp_path, fmt):
    out = tmp_path / "weights.bin"
    run("export", tensors, "a", "--tag", "v1", "--format", fmt, out)
    data = out.read_bytes()
    if fmt == "safetensors":
        (n,) = struct.unpack_from("<Q", data, 0)
        header = json.loads(data[8:8 + n])
        assert header["a"]["dtype"] == "F32" and header["a"]["shape"] == [2, 3]
        values = np.frombuffer(data[8 + n:], "<f4")
    elif fmt == "npz":
        with np.load(out) as z:
            assert z.files == ["a"]
            values = z["a"].ravel()
    else:
        (values,) = read_btf(data)
    assert values.ravel().tolist() == [0, 1, 2, 3, 4, 5]


def test_export_npy_defaults_to_the_newest_tag(tensors, tmp_path):
    run("export", tensors, "a", tmp_path / "a.NPY")  # extensions in any case
    assert np.array_equal(np.load(tmp_path / "a.NPY"), np.ones((2, 3)))


def test_export_refuses_unknown_formats(tensors, tmp_path):
    p = run("export", tensors, tmp_path / "out.weird", check=False)
    assert p.returncode == 2 and p.stderr.decode().startswith(
        f"modelzip export: cannot tell the format of '{tmp_path / 'out.weird'}' by its extension")
    p = subprocess.run([CLI, "export", str(tensors), "a", "--format", "npy", "-"],
                       capture_output=True, cwd=tmp_path)
    assert p.returncode == 2 and b"OUT '-': export writes a file" in p.stderr
    assert not (tmp_path / "-").exists()  # not a file named "-"
    p = run("export", tensors, tmp_path / "n.npz", "--normalized", check=False)  # not ignored
    assert p.returncode == 2 and b"--normalized applies to embedding exports" in p.stderr
    assert not (tmp_path / "n.npz").exists()
    p = run("export", tensors, tmp_path / "out", check=False)  # says what is missing
    assert p.returncode == 2 and p.stderr.decode().startswith(
        f"modelzip export: cannot tell the format of '{tmp_path / 'out'}' by its extension (")
    assert not (tmp_path / "out.weird").exists()
    p = run("export", tensors, "--format", "pickle", tmp_path / "out.npz", check=False)
    assert p.returncode == 2 and not (tmp_path / "out.npz").exists()


def test_export_embedding_with_format_option(tmp_path):
    fifu = os.path.join(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata"),
                        "finalfusion", "similarity.fifu")
    archive = tmp_path / "e.zip"
    run("import", archive, "--tag", "v1", fifu, "--name", "words")
    run("export", archive, "words", "--format", "fifu", tmp_path / "vectors.data")
    with open(fifu, "rb") as f:
        assert (tmp_path / "vectors.data").read_bytes() == f.read()
    run("export", archive, "words", "--format", "textdims", tmp_path / "vectors.out")
    rows, dims = map(int, (tmp_path / "vectors.out").read_text().split("\n", 1)[0].split())
    lines = (tmp_path / "vectors.out").read_text().splitlines()[1:]
    assert len(lines) == rows and all(len(l.split()) == dims + 1 for l in lines)


def keys_named_in_help(command, obj, nested):
    """The keys of JSON object `obj` (and of its objects under `nested`)
    that `modelzip COMMAND --help` does not name."""
    words = set(re.findall(r"[a-z_]+", run(command, "--help").stdout.decode()))
    missing = [k for k in obj if k not in words]
    for name in nested:
        if isinstance(obj.get(name), dict):
            missing += [f"{name}.{k}" for k in obj[name] if k not in words]
    return missing


def test_info_and_quantize_help_name_every_json_key(quickstart_archive, tmp_path):
    """Scripts read these keys: the help says what they are (it said only
    'the summary as JSON' and 'the result as JSON')."""
    golden = os.path.join(os.environ.get("MODELZIP_SOURCE_DIR", "."), "tests", "golden", "graph",
                          "checkpoint-v1.zip")
    nested = ["metadata", "params", "updater", "graph", "training"]
    for archive in [quickstart_archive, golden]:
        info = json.loads(run("info", archive, "--json").stdout)
        assert keys_named_in_help("info", info, nested) == [], archive
    w = tmp_path / "w.npy"
    np.save(w, np.ones((64, 64), np.float32))
    path = tmp_path / "q.zip"
    run("import", path, "--tag", "f", w)
    result = json.loads(run("quantize", path, "--from", "f", "--tag", "q", "--scheme",
                            "int8-per-channel", "--json").stdout)
    assert result["quantized"] == ["w"] and result["appended"] is True
    assert keys_named_in_help("quantize", result, []) == []


@pytest.mark.parametrize("args,missing", [
    (["ls"], "ARCHIVE"),
    (["diff", "m.zip"], "TAG_A and TAG_B"),
    (["diff", "m.zip", "a"], "TAG_B"),
    (["cat", "m.zip"], "PARAM"),
    (["import", "m.zip", "--tag", "t"], "FILE"),
    (["export", "m.zip"], "OUT"),
    (["extract", "m.zip"], "DIR"),
    (["rm-tag", "m.zip"], "TAG (or --keep-last N)"),
    (["analogy", "FIFU", "Berlin"], "B and C"),
])
def test_too_few_arguments_name_what_is_missing(args, missing):
    """It said 'too few arguments' (which ones, the usage line had to tell)."""
    fifu = os.path.join(os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata"),
                        "finalfusion", "similarity.fifu")
    p = run(*[fifu if a == "FIFU" else a for a in args], check=False)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().startswith(
        f"modelzip {args[0]}: missing {missing}\nUsage: modelzip {args[0]} "), p.stderr


def documented_json_keys():
    """The table of docs/cli.md's "JSON output": {(command, path): (keys always
    there, keys where they apply)}, path the keys leading to the object
    (() for the output or, for an array, each item)."""
    with open(os.path.join(os.environ.get("MODELZIP_SOURCE_DIR", "."), "docs", "cli.md")) as f:
        section = f.read().split("\n## JSON output\n", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        always = re.findall(r"`([a-z_]+)`", cells[1])
        optional = [k for k in re.findall(r"`([^`]+)`", cells[2]) if not k.startswith("-")]
        for part in cells[0].split(","):
            command, *path = re.findall(r"`([a-z_-]+)`", part)
            table[(command, tuple(path))] = (always, optional)
    return table


def objects_at(doc, path):
    """The JSON objects at `path` of output `doc` (each item of an array)."""
    found = []
    for item in doc if isinstance(doc, list) else [doc]:
        for key in path:
            item = item.get(key) if isinstance(item, dict) else None
        if isinstance(item, dict):
            found.append(item)
    return found


def test_every_json_output_has_the_documented_keys(quickstart_archive, tmp_path):
    """meta --json said name and version where info --json says model_name
    and model_version; info --json of an archive without tags left out
    "embeddings". Every command's objects now have the keys docs/cli.md
    lists (one spelling across the commands), and the help names them."""
    table = documented_json_keys()
    assert ("meta", ()) in table and ("ls", ("quantization",)) in table
    data = os.environ.get("MODELZIP_SHARED_TESTDATA", "../shared/testdata")
    fifu = os.path.join(data, "finalfusion", "similarity.fifu")
    golden = tmp_path / "golden.zip"
    with open(os.path.join(os.environ.get("MODELZIP_SOURCE_DIR", "."), "tests", "golden",
                           "graph", "checkpoint-v1.zip"), "rb") as f:
        golden.write_bytes(f.read())
    path = tmp_path / "m.zip"
    w = tmp_path / "w.npy"
    np.save(w, np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64))
    run("import", path, "--tag", "e", fifu, "--name", "words")
    run("import", path, "--tag", "f", w)
    quantized = json.loads(run("quantize", path, "--from", "f", "--tag", "q", "--scheme",
                               "int4-block32", "--params", "w", "--json").stdout)
    empty = tmp_path / "empty.zip"
    run("import", empty, "--tag", "t", w)
    run("rm-tag", empty, "t")

    def out(*args):
        p = run(*args, "--json", check=False)
        assert p.returncode in (0, 1), p.stderr  # diff: 1 when the tags differ
        return json.loads(p.stdout)

    outputs = {
        "ls": [out("ls", path, "--tag", "q"), out("ls", path, "--tag", "e"),
               out("ls", golden, "--updater"), out("ls", quickstart_archive)],
        "info": [out("info", quickstart_archive), out("info", golden, "--tag", "step-1"),
                 out("info", path), out("info", empty)],
        "meta": [out("meta", quickstart_archive)],
        "graph": [out("graph", golden)],
        "diff": [out("diff", quickstart_archive, "step-1", "step-2"),
                 out("diff", golden, "step-1", golden_newest(golden))],
        "quantize": [quantized],
        "similar": [out("similar", fifu, "Berlin", "-k", "3")],
        "analogy": [out("analogy", os.path.join(data, "finalfusion", "analogy.bin"), "Berlin",
                        "Deutschland", "Paris", "-k", "3")],
    }
    checked = set()
    for (command, key_path), (always, optional) in table.items():
        if not always:  # tags, embed: no keys of their own
            continue
        help_words = set(re.findall(r"[a-z_]+", run(command, "--help").stdout.decode()))
        assert [k for k in always + optional if k not in help_words] == [], command
        for doc in outputs[command]:
            for obj in objects_at(doc, key_path):
                if key_path == ("embedding",) and "error" in obj:
                    continue
                where = f"{command} {' '.join(key_path)}"
                assert [k for k in obj if k not in always + optional] == [], where
                assert [k for k in always if k not in obj] == [], where
                checked.add((command, key_path))
    assert checked == {k for k, (always, _) in table.items() if always}
    meta = outputs["meta"][0]  # the deprecated keys of 0.1, for one release
    assert (meta["name"], meta["version"]) == (meta["model_name"], meta["model_version"])
    assert outputs["info"][3]["embeddings"] is None


def golden_newest(golden):
    return json.loads(run("tags", golden, "--json").stdout)[-1]


def test_what_a_new_user_mistypes_gets_a_plain_answer(quickstart_archive, tmp_path):
    """Walking through the commands as a new user: an option where the
    command goes was called an unknown command; a folder as export's OUT was
    told it 'has no extension'; a file as extract's DIR got 'cannot open
    folder ...: Not a directory'; --help did not list the exit status of an
    interrupted command (docs/cli.md, "Exit status")."""
    p = run("--frob", check=False)
    assert (p.returncode, p.stdout) == (2, b"")
    assert p.stderr == b"modelzip: unknown option --frob (see modelzip --help)\n"
    p = run("export", quickstart_archive, tmp_path, check=False)
    assert (p.returncode, p.stdout) == (2, b"")
    assert p.stderr.decode().startswith(
        f"modelzip export: OUT '{tmp_path}' is a folder: name the file to write in it "
        f"(e.g. {tmp_path / 'model.safetensors'})\nUsage: modelzip export "), p.stderr
    p = run("extract", quickstart_archive, quickstart_archive, check=False)
    assert (p.returncode, p.stdout) == (1, b"")
    assert p.stderr == f"modelzip: DIR '{quickstart_archive}' is a file, not a folder\n".encode()
    status = run("--help").stdout.decode().split("Exit status:\n", 1)[1].split("\n\n", 1)[0]
    for words in ("0 on success", "1 on error", "2 for wrong usage", "130", "143",
                  "verify exits 1", "diff exits 1"):
        assert words in status, (words, status)


EMPTY_PATHS = [
    (["tags", ""], "ARCHIVE"), (["ls", ""], "ARCHIVE"), (["info", ""], "ARCHIVE"),
    (["graph", ""], "ARCHIVE"), (["verify", ""], "ARCHIVE"), (["gc", ""], "ARCHIVE"),
    (["meta", ""], "ARCHIVE"), (["quantize", "", "--scheme", "int8"], "ARCHIVE"),
    (["cat", "", "w"], "ARCHIVE"), (["diff", "", "a", "b"], "ARCHIVE"),
    (["extract", "", "DIR"], "ARCHIVE"), (["rm-tag", "", "t"], "ARCHIVE"),
    (["import", "", "--tag", "t", "FILE"], "ARCHIVE"), (["export", "", "w", "OUT"], "ARCHIVE"),
    (["embed", "", "word"], "ARCHIVE or FILE"), (["similar", "", "word"], "ARCHIVE or FILE"),
    (["analogy", "", "a", "b", "c"], "ARCHIVE or FILE"),
    (["import", "ARCHIVE", "--tag", "t", ""], "FILE"), (["export", "ARCHIVE", "w", ""], "OUT"),
    (["extract", "ARCHIVE", ""], "DIR"),
]


def test_empty_path_arguments_cover_every_command():
    assert {args[0] for args, _ in EMPTY_PATHS} == set(commands())


@pytest.mark.parametrize("args,what", EMPTY_PATHS)
def test_an_empty_path_is_a_usage_error(quickstart_archive, tmp_path, args, what):
    """`modelzip tags ''` exited 1 with an I/O error on the path '' (an error
    in the data, by the exit statuses of docs/cli.md); an empty path is wrong
    usage, exit 2 with the usage, as an empty --tag is."""
    fill = {"ARCHIVE": str(quickstart_archive), "FILE": str(quickstart_archive),
            "OUT": str(tmp_path / "out.npz"), "DIR": str(tmp_path / "dir")}
    p = run(*[fill.get(a, a) for a in args], check=False)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().startswith(
        f"modelzip {args[0]}: {what} needs a path, got an empty one\n"
        f"Usage: modelzip {args[0]} "), p.stderr
    assert not (tmp_path / "out.npz").exists() and not (tmp_path / "dir").exists()
