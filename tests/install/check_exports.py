"""Fails when libmodelzip.so exports anything but the public API.

Usage: check_exports.py LIBRARY SOURCE_ROOT

Lists the library's defined dynamic symbols (`nm -D --defined-only -C`) and
fails, naming each offender, when a symbol
  - lies in (or is instantiated with a type of) an internal namespace:
    a modelzip namespace other than the public ones (modelzip, ::convert,
    ::finalfusion, ::graph, ::training) that the sources in src/ or the
    schemas/ open (zip, io, format, dist, remote, fb...), any `detail` namespace, or an
    anonymous namespace;
  - belongs to an opaque internal type that the public headers only declare
    (Archive::Impl, NewTag::Contents, Vocab::Access...);
  - belongs to an engine the library is built on (libzip, FlatBuffers,
    toml++, libcurl);
  - names, below namespace modelzip, an identifier that appears nowhere in
    include/modelzip/ (a function or class the public headers do not have).
Prints the number of exported symbols and how many of them are modelzip's.
"""
import pathlib
import re
import subprocess
import sys

PUBLIC_NAMESPACES = {"convert", "finalfusion", "graph", "training"}
# Nested types that public headers declare only as opaque names.
OPAQUE_TYPES = {"Impl", "State", "Contents", "Access", "MappedAccess"}
ENGINES = re.compile(r"\b(flatbuffers|toml|reflection)::|^_?zip_|^curl_|^Curl_")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def demangled_symbols(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", str(library)], check=True,
                         capture_output=True, text=True).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            symbols.append(parts[2])
    return symbols


def modelzip_paths(symbol):
    """Every qualified name below modelzip:: in `symbol`, as a list of components (template
    arguments and parameter lists are searched too, each name on its own)."""
    paths = []
    for match in re.finditer(r"\bmodelzip((?:::(?:\(anonymous namespace\)|~?[A-Za-z_]\w*))+)",
                             symbol):
        paths.append(match.group(1).split("::")[1:])
    return paths


def internal_namespaces(root):
    """The namespace names the library's sources and schemas open, apart from the public
    ones."""
    names = set()
    for pattern, opening in (("src/**/*.[ch]pp", r"^namespace ([\w:]+) \{"),
                             ("schemas/*.fbs", r"^namespace ([\w.]+);")):
        for source in root.glob(pattern):
            for match in re.finditer(opening, source.read_text(), re.MULTILINE):
                names.update(re.split(r"::|\.", match.group(1)))
    return names - PUBLIC_NAMESPACES - {"modelzip"}


def problem(symbol, public_identifiers, internal):
    if "(anonymous namespace)" in symbol:
        return "anonymous namespace"
    if ENGINES.search(symbol):
        return "engine symbol"
    for path in modelzip_paths(symbol):
        # Leading components are namespaces up to the first that is not one
        # (a class or function, which may share a namespace's name).
        in_namespaces = True
        for component in path:
            if in_namespaces and component in internal:
                return f"internal namespace {component}"
            in_namespaces = in_namespaces and component in PUBLIC_NAMESPACES
            name = component.lstrip("~")
            if name in OPAQUE_TYPES:
                return f"opaque internal type {name}"
            if name not in public_identifiers and not name.startswith("operator"):
                return f"'{name}' is not declared in include/modelzip/"
    return None


def main():
    library, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    include_dir = root / "include" / "modelzip"
    internal = internal_namespaces(root) | {"detail"}
    public_identifiers = set()
    for header in include_dir.rglob("*.hpp"):
        public_identifiers.update(IDENTIFIER.findall(header.read_text()))
    symbols = demangled_symbols(library)
    ours = [s for s in symbols if "modelzip::" in s]
    bad = [(s, why) for s in symbols if (why := problem(s, public_identifiers, internal))]
    print(f"{library.name}: {len(symbols)} exported symbols, {len(ours)} of them modelzip's, "
          f"{len(bad)} not public API")
    for symbol, why in bad:
        print(f"  {why}: {symbol}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
