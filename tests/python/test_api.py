"""The type stub (__init__.pyi) describes the whole public API, with a docstring on every function,
and its parameter names match the runtime's."""
import ast
import inspect
import pathlib
import re

import pytest

import modelzip

STUB = pathlib.Path(modelzip.__file__).with_name("__init__.pyi")
RUNTIME_ONLY = {"__init__"}  # checked through the class


def stub_tree():
    return ast.parse(STUB.read_text())


def stub_definitions():
    """{name: node} of the stub's top-level classes, functions and annotated names."""
    out = {}
    for node in stub_tree().body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = node
    return out


def methods(cls_node):
    return {n.name: n for n in cls_node.body if isinstance(n, ast.FunctionDef)}


def stub_parameters(fn):
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    return [n for n in names if n != "self"]


def runtime_parameters(obj):
    """Parameter names of a Python function, or of a pybind11 one (from its signature line)."""
    try:
        return [p for p in inspect.signature(obj).parameters if p not in ("self", "fields")]
    except (TypeError, ValueError):
        first = (obj.__doc__ or "").splitlines()[0]
        inner = first[first.index("(") + 1:first.rindex(")")]
        names = re.findall(r"(?:^|, )\*?(\w+)(?=:|,|$)", inner)
        return [n for n in names if n != "self"]


def test_every_public_name_is_in_the_stub():
    defined = stub_definitions()
    missing = [name for name in modelzip.__all__ if name not in defined]
    assert missing == []


def test_every_stub_name_exists_at_runtime():
    """The reverse of the test above: the stub promises nothing the module lacks."""
    aliases = {node.targets[0].id for node in stub_tree().body if isinstance(node, ast.Assign)}
    assert aliases == {"PathLike", "Similarities", "LoadedValue"}
    stub_only = [name for name in [*stub_definitions(), *aliases] if not hasattr(modelzip, name)]
    assert stub_only == []


def test_every_public_runtime_function_has_a_docstring():
    for name in modelzip.__all__:
        obj = getattr(modelzip, name)
        if callable(obj):
            assert (obj.__doc__ or "").strip(), name


def test_every_stub_function_has_a_docstring():
    undocumented = []
    for node in ast.walk(stub_tree()):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not ast.get_docstring(node):
            undocumented.append(node.name)
    assert undocumented == []


@pytest.mark.parametrize("name", ["Archive", "Writer", "Embeddings", "Metadata", "ParamInfo",
                                  "WriteStats", "SparseCOO"])
def test_class_members_match(name):
    cls_node = stub_definitions()[name]
    stub_members = set(methods(cls_node)) | {
        n.target.id for n in cls_node.body if isinstance(n, ast.AnnAssign)}
    cls = getattr(modelzip, name)
    runtime = {m for m in vars(cls) if not m.startswith("_")}
    if name == "SparseCOO":
        runtime -= {"count", "index"}  # tuple methods
    assert runtime - stub_members == set(), "missing in the stub"
    assert {m for m in stub_members if not m.startswith("_")} - runtime - set(
        getattr(cls, "_fields", ())) == set(), "only in the stub"
    for method_name, fn in methods(cls_node).items():
        if method_name.startswith("__") and method_name != "__init__":
            continue
        attr = getattr(cls, method_name)
        if isinstance(attr, property) or isinstance(inspect.getattr_static(cls, method_name),
                                                    property):
            continue
        if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
            continue
        assert stub_parameters(fn) == runtime_parameters(attr), f"{name}.{method_name}"
        assert attr.__doc__, f"{name}.{method_name} has no runtime docstring"


@pytest.mark.parametrize("name", ["open", "load", "save", "remove_tag", "update_metadata",
                                  "set_metadata",
                                  "collect_garbage", "read_tensor_file", "write_tensor_file",
                                  "import_tensor_files", "export_tensor_file",
                                  "imported_metadata"])
def test_function_parameters_match(name):
    fn = stub_definitions()[name]
    assert stub_parameters(fn) == runtime_parameters(getattr(modelzip, name))
    assert getattr(modelzip, name).__doc__


def test_public_classes_say_they_come_from_modelzip():
    for name in ["Archive", "Writer", "Embeddings", "Metadata", "ParamInfo", "WriteStats",
                 "SparseCOO", "LoadedArrays", "Error", "NotFoundError", "read_tensor_file",
                 "save"]:
        assert getattr(modelzip, name).__module__ == "modelzip", name


def test_dtypes_listed():
    assert modelzip.DTYPES == ("bool", "float16", "float32", "float64", "int8", "int16", "int32",
                               "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16",
                               "float8_e4m3fn", "float8_e5m2", "complex64", "complex128",
                               "float8_e8m0fnu", "float4_e2m1fn_x2", "string")
