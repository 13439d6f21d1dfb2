#!/usr/bin/env python3
"""Fails when a source of src/ includes a header that only a meson build has.

The library's sources are also compiled outside meson, with the include
paths src/ and include/ and the schemas' generated headers
(../shared/device/build_device.sh builds the Python package that way on the
accelerator machine, which has no meson and no apt). So every quoted
#include of src/ must name a file of src/, of include/, beside the includer,
or a header flatc generates from schemas/*.fbs (NAME_generated.h). A header
that meson generates into the build folder (configure_file) breaks that
build; a definition (cpp_args) with a default in a source header does not.

Usage: check_includes_resolve.py ROOT   (the source root: src/, include/, schemas/)
       check_includes_resolve.py --self-test
Prints "file:line: includes NAME, which is not a source file" per problem and
exits 1 when there is any; 0 otherwise.
"""
import pathlib
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SUFFIXES = {".cpp", ".hpp", ".h", ".cc"}


def problems(root):
    root = pathlib.Path(root)
    src, inc = root / "src", root / "include"
    generated = {fbs.stem + "_generated.h" for fbs in (root / "schemas").glob("*.fbs")}
    found = []
    files = sorted(p for p in src.rglob("*") if p.suffix in SUFFIXES)
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(1)
            if name in generated or any((base / name).is_file()
                                        for base in (src, inc, path.parent)):
                continue
            found.append("%s:%d: includes %s, which is not a source file"
                         % (path.relative_to(root), number, name))
    return files, found


def main(root):
    files, found = problems(root)
    for line in found:
        print(line)
    if not files:
        print("no sources under", root)
        return 1
    if found:
        print("%d includes name no source file (see this script's docstring)" % len(found))
        return 1
    print("%d sources: every include names a source file" % len(files))
    return 0


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for folder in ("src/core", "src/remote", "include/modelzip", "schemas"):
            (root / folder).mkdir(parents=True)
        (root / "schemas/tensor.fbs").write_text("")
        (root / "include/modelzip/error.hpp").write_text("")
        (root / "src/core/util.hpp").write_text("")
        (root / "src/core/util.cpp").write_text(
            '#include "core/util.hpp"\n#include "modelzip/error.hpp"\n'
            '#include "tensor_generated.h"\n#include "util.hpp"\n#include <vector>\n')
        _, found = problems(root)
        if found:
            print("self-test: resolvable includes reported:", found)
            return 1
        (root / "src/remote/url.cpp").write_text('#include "remote/upload_config.hpp"\n')
        _, found = problems(root)
        if found != ["src/remote/url.cpp:1: includes remote/upload_config.hpp, "
                     "which is not a source file"]:
            print("self-test: a generated header was not reported:", found)
            return 1
    print("self-test passed")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]))
