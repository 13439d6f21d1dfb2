"""Python's side of the Java binding's tests (tests/java/org/modelzip/tests/).

    interop.py write ARCHIVE TAG [--compress]
                                   saves one array of every dtype as TAG
                                   (deflated with --compress)
    interop.py check ARCHIVE TAG   checks that TAG holds exactly those arrays
    interop.py embed ARCHIVE TAG FIFU
                                   saves the finalfusion file FIFU as the
                                   embedding parameter "words" of TAG
    interop.py serve ROOT          serves ROOT with nginx on 127.0.0.1 (as the
                                   remote tests do), prints its base URL, and
                                   stops when its standard input closes

The arrays come from the same formulas as Values.java (element index i in
0..11, shape 3 x 4; strings 2 x 2), written here independently with numpy,
so each language checks what the other wrote. Run with the build's Python
bindings on PYTHONPATH.
"""
import os
import sys

import numpy as np

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float64", "string"]
STRINGS = ["", "a", "\u03b2eta", "\u65e5\u672c\u8a9e \U0001f642"]


def expected():
    """name (= dtype) -> numpy array; bfloat16 as its uint16 bits, as modelzip loads it."""
    i = np.arange(12, dtype=np.int64)
    halves = (i * 0.5 - 2).astype(np.float32)
    arrays = {
        "bool": i % 3 == 0,
        "int8": (i * 11 - 60).astype(np.int8),
        "uint8": (255 - i * 3).astype(np.uint8),
        "int16": (i * 1000 - 6000).astype(np.int16),
        "uint16": (65535 - i * 7).astype(np.uint16),
        "int32": (i * 100000 - 600000).astype(np.int32),
        "uint32": (0xFFFFFFFF - i * 13).astype(np.uint32),
        "int64": i * 1_000_000_000_000 - 6_000_000_000_000,
        "uint64": (np.uint64(0xFFFFFFFFFFFFFFFF) - i.astype(np.uint64) * np.uint64(17)),
        "float16": halves.astype(np.float16),
        "bfloat16": (halves.view(np.uint32) >> 16).astype(np.uint16),
        "float32": (i * 0.375 - 2).astype(np.float32),
        "float64": i / 3.0 - 1.0,
    }
    out = {name: a.reshape(3, 4) for name, a in arrays.items()}
    out["string"] = np.array(STRINGS, dtype=object).reshape(2, 2)
    return out


def write(path, tag, compress):
    import modelzip
    modelzip.save(path, tag, expected(), bfloat16=["bfloat16"], compress=compress)


def check(path, tag):
    import modelzip
    with modelzip.open(path) as archive:
        dtypes = {p.name: p.dtype for p in archive.params(tag)}
        if list(dtypes) != DTYPES or any(dtypes[n] != n for n in DTYPES):
            sys.exit(f"params of {tag}: {dtypes}")
        loaded = archive.load(tag)
        for name, want in expected().items():
            got = loaded[name]
            if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
                sys.exit(f"{name}: got {got!r} ({got.dtype}), want {want!r} ({want.dtype})")
    print("ok")


def embed(path, tag, fifu):
    import modelzip
    modelzip.save(path, tag, {"words": modelzip.Embeddings.open(fifu)})


def serve(root):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote"))
    import servers
    workdir = os.path.join(root, ".nginx")
    nginx = servers.Nginx(workdir, root)
    try:
        print(f"{nginx.scheme}://127.0.0.1:{nginx.port}/", flush=True)
        sys.stdin.read()  # until the test closes the pipe (or exits)
    finally:
        servers.stop_process(nginx.proc)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "write" and len(sys.argv) in (4, 5):
        write(sys.argv[2], sys.argv[3], sys.argv[4:] == ["--compress"])
    elif command == "check" and len(sys.argv) == 4:
        check(sys.argv[2], sys.argv[3])
    elif command == "embed" and len(sys.argv) == 5:
        embed(sys.argv[2], sys.argv[3], sys.argv[4])
    elif command == "serve" and len(sys.argv) == 3:
        serve(sys.argv[2])
    else:
        sys.exit(__doc__)
