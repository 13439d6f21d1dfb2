"""Python's side of the Java binding's tests (tests/java/org/modelzip/tests/).

    interop.py write ARCHIVE TAG [--compress]
                                   saves one array of every dtype as TAG
                                   (deflated with --compress)
    interop.py check ARCHIVE TAG   checks that TAG holds exactly those arrays
    interop.py embed ARCHIVE TAG FIFU
                                   saves the finalfusion file FIFU as the
                                   embedding parameter "words" of TAG
    interop.py bools ARCHIVE TAG   saves the bool array "b" whose bytes are
                                   0, 1, 2, 255 (any non-zero byte is true)
    interop.py meta ARCHIVE [FIELD=VALUE | FIELD:=ESCAPED]...
                                   sets the metadata fields given (model_name,
                                   model_version, quantization, description;
                                   an empty VALUE clears the field; ESCAPED is
                                   ASCII with Python's backslash escapes, for
                                   any text), then prints each field of the
                                   metadata as Python reads it, one
                                   FIELD=ascii(value) a line
    interop.py updater ARCHIVE TAG saves the float32 parameter "w" [1, 2] with
                                   Adam's state arrays of "w": "M" [0.25, -1]
                                   and "V" [0.5, 4] (updater.txt)
    interop.py updater-check ARCHIVE TAG
                                   checks that TAG holds those arrays, as
                                   the "updater" command writes them
    interop.py verify ARCHIVE      prints Archive.verify()'s (entry, message)
                                   pairs as a JSON list of two-item lists
    interop.py param ARCHIVE TAG NAME
                                   prints parameter NAME of TAG as JSON:
                                   {"shared", "blob", "values" (a list)}
    interop.py training ARCHIVE TAG
                                   saves the float32 parameter "w" [1, 2] with
                                   the training config TRAINING (below)
    interop.py training-check ARCHIVE TAG
                                   checks that TAG's training config, as
                                   Python reads it and as the command's
                                   info --json prints it, is TRAINING
    interop.py serve ROOT          serves ROOT with nginx on 127.0.0.1 (as the
                                   remote tests do), prints its base URL, and
                                   stops when its standard input closes

The arrays come from the same formulas as Values.java (element index i in
0..11, shape 3 x 4; strings 2 x 2), written here independently with numpy,
so each language checks what the other wrote. The 8-bit floats are twelve
bit patterns each whose values were worked out by hand from the formats'
definitions (FORMAT.md section 6); check() also checks that table against
the definitions. Run with the build's Python bindings on PYTHONPATH.
"""
import json
import math
import os
import sys

import numpy as np

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
          "complex64", "complex128", "float8_e8m0fnu", "float4_e2m1fn_x2", "string"]
STRINGS = ["", "a", "\u03b2eta", "\u65e5\u672c\u8a9e \U0001f642"]
NAN = float("nan")
INF = float("inf")
# (bits, value): +-0, the smallest and largest subnormals, the smallest normal,
# 1 and its successor, -3, the largest finite values, NaN (e4m3fn has no
# infinity: S.1111.111 is NaN, S.1111.110 = 1.75 * 2^8 = 448).
FLOAT8 = {
    "float8_e4m3fn": [(0x00, 0.0), (0x80, -0.0), (0x01, 2.0**-9), (0x07, 7 * 2.0**-9),
                      (0x08, 2.0**-6), (0x38, 1.0), (0x39, 1.125), (0xC4, -3.0), (0x7E, 448.0),
                      (0xFE, -448.0), (0x7F, NAN), (0xFF, NAN)],
    "float8_e5m2": [(0x00, 0.0), (0x80, -0.0), (0x01, 2.0**-16), (0x03, 3 * 2.0**-16),
                    (0x04, 2.0**-14), (0x3C, 1.0), (0x3D, 1.25), (0xC2, -3.0), (0x7B, 57344.0),
                    (0x7C, INF), (0xFC, -INF), (0x7E, NAN)],
}


# The OCP MX types (FORMAT.md section 6): float8_e8m0fnu's byte e is 2^(e - 127), 0xFF NaN;
# a float4_e2m1fn_x2 byte holds two FP4 E2M1 values, the low nibble first.
E8M0 = [(0x00, 2.0**-127), (0x01, 2.0**-126), (0x7E, 0.5), (0x7F, 1.0), (0x80, 2.0), (0x81, 4.0),
        (0x90, 2.0**17), (0x70, 2.0**-15), (0xFD, 2.0**126), (0xFE, 2.0**127), (0xFF, NAN),
        (0x40, 2.0**-63)]
FP4 = [(0x10, (0, 0.5)), (0x32, (1, 1.5)), (0x54, (2, 3)), (0x76, (4, 6)), (0x98, (-0.0, -0.5)),
       (0xBA, (-1, -1.5)), (0xDC, (-2, -3)), (0xFE, (-4, -6)), (0x07, (6, 0)), (0x8F, (-6, -0.0)),
       (0x3A, (-1, 1.5)), (0xE1, (0.5, -4))]


def e2m1_value(nibble):
    """One FP4 E2M1 value: sign bit 3, 2 exponent bits (bias 1), 1 mantissa bit."""
    sign = -1.0 if nibble & 8 else 1.0
    exponent, mantissa = (nibble >> 1) & 3, nibble & 1
    if exponent == 0:
        return sign * mantissa * 0.5
    return sign * (1 + mantissa / 2) * 2.0**(exponent - 1)


def float8_value(dtype, bits):
    """The value of an 8-bit float pattern, from FORMAT.md's definition."""
    ebits, bias = (4, 7) if dtype == "float8_e4m3fn" else (5, 15)
    mbits = 7 - ebits
    sign = -1.0 if bits & 0x80 else 1.0
    exponent, mantissa = (bits >> mbits) & ((1 << ebits) - 1), bits & ((1 << mbits) - 1)
    if dtype == "float8_e4m3fn" and exponent == 15 and mantissa == 7:
        return NAN
    if dtype == "float8_e5m2" and exponent == 31:
        return sign * INF if mantissa == 0 else NAN
    if exponent == 0:
        return sign * mantissa * 2.0**(1 - bias - mbits)
    return sign * (1 + mantissa / 2**mbits) * 2.0**(exponent - bias)


def same_number(a, b):
    """Equal as numbers, NaN equal to NaN, -0.0 not equal to 0.0."""
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def complex_array(dtype, real, imag):
    """Parts set one by one (complex arithmetic could turn a zero's sign)."""
    out = np.empty(real.shape, dtype=dtype)
    out.real, out.imag = real, imag
    return out


def expected():
    """name (= dtype) -> numpy array; bfloat16, the float8 and the MX types as their uint16 / uint8
    bits, as modelzip loads them."""
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
        "float8_e4m3fn": np.array([b for b, _ in FLOAT8["float8_e4m3fn"]], dtype=np.uint8),
        "float8_e5m2": np.array([b for b, _ in FLOAT8["float8_e5m2"]], dtype=np.uint8),
        "complex64": complex_array(np.complex64, i * 0.25 - 1, 3 - i * 0.5),
        "complex128": complex_array(np.complex128, i / 3.0, -i / 7.0),
        "float8_e8m0fnu": np.array([b for b, _ in E8M0], dtype=np.uint8),
        "float4_e2m1fn_x2": np.array([b for b, _ in FP4], dtype=np.uint8),
    }
    out = {name: a.reshape(3, 4) for name, a in arrays.items()}
    out["string"] = np.array(STRINGS, dtype=object).reshape(2, 2)
    return out


def write(path, tag, compress):
    import modelzip
    modelzip.save(path, tag, expected(), compress=compress,
                  dtypes={name: name for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2",
                                                  "float8_e8m0fnu", "float4_e2m1fn_x2")})


def check(path, tag):
    import modelzip
    for dtype, table in FLOAT8.items():  # the hand-worked table against the definitions
        for bits, value in table:
            if not same_number(float8_value(dtype, bits), value):
                sys.exit(f"{dtype} 0x{bits:02X}: the table says {value}, the definition "
                         f"{float8_value(dtype, bits)}")
    for bits, value in E8M0:
        if not same_number(2.0**(bits - 127) if bits != 0xFF else NAN, value):
            sys.exit(f"float8_e8m0fnu 0x{bits:02X}: the table says {value}")
    for bits, pair in FP4:
        if not all(same_number(e2m1_value(n), v) for n, v in zip((bits & 15, bits >> 4), pair)):
            sys.exit(f"float4_e2m1fn_x2 0x{bits:02X}: the table says {pair}")
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


def bools(path, tag):
    import modelzip
    import numpy as np
    modelzip.save(path, tag, {"b": np.array([0, 1, 2, 255], dtype=np.uint8).view(np.bool_)})


def updater(path, tag):
    import modelzip
    f32 = np.float32
    modelzip.save(path, tag, {"w": np.array([1, 2], dtype=f32)},
                  updater={("w", "M"): np.array([0.25, -1], dtype=f32),
                           ("w", "V"): np.array([0.5, 4], dtype=f32)})


def updater_check(path, tag):
    import modelzip
    with modelzip.open(path) as archive:
        states = [(p.name, p.state, p.dtype, tuple(p.shape)) for p in archive.updater_states(tag)]
        if states != [("w", "M", "float32", (2,)), ("w", "V", "float32", (2,))]:
            sys.exit(f"updater states of {tag}: {states}")
        for state, want in (("M", [0.25, -1]), ("V", [0.5, 4])):
            got = archive.updater_state("w", state, tag)
            if got.dtype != np.float32 or got.tolist() != want:
                sys.exit(f"w/{state}: got {got!r}, want {want}")
        if archive.load(tag)["w"].tolist() != [1, 2]:
            sys.exit(f"w: {archive.load(tag)['w']!r}")
    print("ok")


def meta(path, assignments):
    import modelzip
    changes = {}
    for assignment in assignments:
        field, _, value = assignment.partition("=")
        if field.endswith(":"):
            changes[field[:-1]] = value.encode("ascii").decode("unicode_escape")
        else:
            changes[field] = value or None
    if changes:
        modelzip.update_metadata(path, changes)
    with modelzip.open(path) as archive:
        m = archive.metadata
        for field in ("format_version", "model_name", "model_version", "quantization",
                      "description", "writer"):
            print(f"{field}={getattr(m, field)!a}")


# Every kind of field of a training config: an updater with its
# hyperparameters, a nested schedule (a ramp over a step schedule), a map
# schedule's steps, integer schedule fields, mappings, counters, properties.
TRAINING = {
    "updater": {"type": "AdamW", "learning_rate": 0.01, "beta1": 0.8, "beta2": 0.99,
                "epsilon": 1e-7, "weight_decay": 0.125},
    "learning_rate_schedule": {
        "schedule": "RampSchedule", "num_iterations": 100,
        "base": {"schedule": "StepSchedule", "type": "epoch", "initial_value": 0.5,
                 "decay_rate": 0.25, "step": 3.0}},
    "regularization": [
        {"type": "l2", "coefficient": {"schedule": "FixedSchedule", "value": 0.0625},
         "apply_learning_rate": True},
        {"type": "weight_decay",
         "coefficient": {"schedule": "MapSchedule", "type": "iteration",
                         "steps": [{"start": 0, "value": 0.5}, {"start": 10, "value": 0.25}]},
         "apply_learning_rate": False},
        {"type": "l1", "coefficient": {"schedule": "PolySchedule", "type": "iteration",
                                       "initial_value": 2.0, "power": 1.5,
                                       "max_iterations": 9007199254740993}}],
    "minimize": False,
    "feature_mapping": ["in: x"], "label_mapping": ["y"],
    "feature_mask_mapping": [], "label_mask_mapping": ["m\u00e9"],
    "loss_variables": ["loss"], "iteration_count": 1234, "epoch_count": 5,
    "properties": {"seed": "42", "loader": "shard-3\u00e9"},
}


def training(path, tag):
    import modelzip
    with modelzip.Writer(path) as writer:
        writer.add_tag(tag, {"w": np.array([1, 2], dtype=np.float32)}, training=TRAINING)


def training_check(path, tag):
    import copy
    import subprocess
    import modelzip
    expected = copy.deepcopy(TRAINING)
    expected["regularization"][2]["apply_learning_rate"] = True  # the schema's default
    with modelzip.open(path) as archive:
        got = archive.training_config(tag)
    if got != expected:
        sys.exit(f"Python reads the training config of {tag} as {got!r}, not {expected!r}")
    info = subprocess.run([os.environ["MODELZIP_CLI"], "info", path, "--tag", tag, "--json"],
                          check=True, capture_output=True, text=True).stdout
    printed = json.loads(info)["training"]
    if printed != expected:
        sys.exit(f"modelzip info --json prints the training config of {tag} as {printed!r}, "
                 f"not {expected!r}")


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
    elif command == "bools" and len(sys.argv) == 4:
        bools(sys.argv[2], sys.argv[3])
    elif command == "updater" and len(sys.argv) == 4:
        updater(sys.argv[2], sys.argv[3])
    elif command == "updater-check" and len(sys.argv) == 4:
        updater_check(sys.argv[2], sys.argv[3])
    elif command == "meta" and len(sys.argv) >= 3:
        meta(sys.argv[2], sys.argv[3:])
    elif command == "verify" and len(sys.argv) == 3:
        import modelzip
        print(json.dumps([list(p) for p in modelzip.Archive(sys.argv[2]).verify()]))
    elif command == "param" and len(sys.argv) == 5:
        import modelzip
        archive = modelzip.Archive(sys.argv[2])
        info = archive.param(sys.argv[4], sys.argv[3])
        print(json.dumps({"shared": info.shared, "blob": info.blob,
                          "values": archive.tensor(sys.argv[4], sys.argv[3]).tolist()}))
    elif command == "training" and len(sys.argv) == 4:
        training(sys.argv[2], sys.argv[3])
    elif command == "training-check" and len(sys.argv) == 4:
        training_check(sys.argv[2], sys.argv[3])
    elif command == "serve" and len(sys.argv) == 3:
        serve(sys.argv[2])
    else:
        sys.exit(__doc__)
