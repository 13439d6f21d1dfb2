#!/usr/bin/env python3
"""Fails when a folder of src/ includes a folder above it in the layer order.

The layers, lowest first (docs/architecture.md says what each holds):

    core < io < remote < zip < format < checkpoint < finalfusion < graph
         < convert < dist < cli, python, java

A file in one layer may include the internal headers ("folder/name.hpp") of
its own layer and of the layers below it. The public headers of the
optional parts count as the layer that implements them (PUBLIC_HEADERS
below); the other public headers (archive, writer, tensor, error, ...) are
the library's core API, which every layer may include. cli, python and java
are programs on top of the library: nothing includes them, and they do not
include one another.

Headers in PRIVATE_HEADERS may be included by their own layer only.

Usage: check_layering.py [SRC_DIR]   (default: the src/ beside tests/)
       check_layering.py --self-test (the checker finds planted violations)
Prints one line per violation, "file:line: layer includes higher-layer",
and exits 1 when there is any; 0 otherwise.
"""
import pathlib
import re
import sys

ORDER = ["core", "io", "remote", "zip", "format", "checkpoint", "finalfusion", "graph",
         "convert", "dist"]
TOP = ["cli", "python", "java"]  # programs: each above every library layer
RANK = {name: i for i, name in enumerate(ORDER)}
for name in TOP:
    RANK[name] = len(ORDER)

# Public headers of the optional parts -> the layer that implements them.
PUBLIC_HEADERS = {
    "modelzip/finalfusion/embeddings.hpp": "finalfusion",
    "modelzip/finalfusion/convert.hpp": "finalfusion",
    "modelzip/graph/graph.hpp": "graph",
    "modelzip/graph/training.hpp": "graph",
    "modelzip/graph/checkpoint.hpp": "graph",
    "modelzip/convert.hpp": "convert",
    "modelzip/dist/distributed.hpp": "dist",
    "modelzip/dist/communicator.hpp": "dist",
    "modelzip/dist/mpi.hpp": "dist",
}

# Internal headers private to their own layer: Archive::Impl is reached from
# above only through checkpoint/archive_state.hpp.
PRIVATE_HEADERS = {"checkpoint/archive_impl.hpp"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".cpp", ".hpp", ".h", ".cc")


def layer_of_include(path):
    """The layer an #include "path" reaches, or None (same folder, generated
    or core public headers)."""
    if path in PUBLIC_HEADERS:
        return PUBLIC_HEADERS[path]
    first = path.split("/", 1)[0]
    if "/" in path and first in RANK:
        return first
    return None


def violations(src):
    found = []
    for file in sorted(src.rglob("*")):
        if file.suffix not in SOURCES or not file.is_file():
            continue
        layer = file.relative_to(src).parts[0]
        if layer not in RANK:
            continue
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = layer_of_include(match.group(1))
            if target is None or target == layer:
                continue
            if match.group(1) in PRIVATE_HEADERS:
                found.append(f"{file}:{number}: {layer} includes \"{match.group(1)}\", "
                             f"which is private to {target}")
                continue
            if RANK[target] >= RANK[layer]:
                found.append(f"{file}:{number}: {layer} includes {target} "
                             f"(\"{match.group(1)}\"), which is not below it")
    return found


def self_test():
    """Plants violations in a scratch tree and checks that each is found,
    with its file and line, and that the allowed includes are not."""
    import tempfile
    with tempfile.TemporaryDirectory() as scratch:
        src = pathlib.Path(scratch)
        for name in RANK:
            (src / name).mkdir()
        (src / "zip" / "ok.cpp").write_text('#include "core/a.hpp"\n#include "zip/b.hpp"\n'
                                            '#include "modelzip/archive.hpp"\n')
        (src / "checkpoint" / "up.cpp").write_text('// a comment\n#include "graph/rules.hpp"\n')
        (src / "format" / "public.cpp").write_text('#include <vector>\n'
                                                   '#include "modelzip/finalfusion/embeddings.hpp"\n')
        (src / "dist" / "private.cpp").write_text('#include "checkpoint/archive_impl.hpp"\n')
        (src / "cli" / "sideways.cpp").write_text('#include "python/x.hpp"\n')
        found = violations(src)
        expected = [("checkpoint/up.cpp:2:", "graph"), ("cli/sideways.cpp:1:", "python"),
                    ("dist/private.cpp:1:", "private"), ("format/public.cpp:2:", "finalfusion")]
        ok = len(found) == len(expected) and all(
            where in line and what in line for line, (where, what) in zip(found, expected))
        print("\n".join(found))
        print("self-test", "passed" if ok else "FAILED")
        return 0 if ok else 1


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    src = pathlib.Path(argv[1]) if len(argv) > 1 else \
        pathlib.Path(__file__).resolve().parents[2] / "src"
    if not src.is_dir():
        print(f"{src}: not a folder", file=sys.stderr)
        return 2
    missing = [name for name in RANK if not (src / name).is_dir()]
    if missing:
        print(f"{src}: the layer folders {', '.join(missing)} are missing: update ORDER",
              file=sys.stderr)
        return 2
    unknown = sorted(p.name for p in src.iterdir() if p.is_dir() and p.name not in RANK)
    if unknown:
        print(f"{src}: folders {', '.join(unknown)} have no place in the layer order: "
              "add them to ORDER (and docs/architecture.md)", file=sys.stderr)
        return 1
    found = violations(src)
    for v in found:
        print(v)
    print(f"{len(found)} layering violation(s) in {src}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
