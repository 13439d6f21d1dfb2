"""`meson install` into a temporary DESTDIR, then use the result as a user would.

Checks: the installed headers stand alone (only <modelzip/...> and standard
headers; each one compiles by itself); samples/installed/main.cpp compiles
with `pkg-config --cflags --libs modelzip` and runs against the installed
library; the installed CLI runs; modelzip.1 is valid roff that documents every
command listed by `modelzip --help`, with its options and examples; the
Python package lands in a folder /usr/bin/python3 searches under the prefix
and imports from there (or, when the bindings are not built, nothing Python is
installed).

Environment (set by tests/cli/meson.build): MODELZIP_BUILD_DIR,
MODELZIP_SOURCE_DIR, MODELZIP_CLI, MODELZIP_PREFIX, MODELZIP_BINDIR,
MODELZIP_LIBDIR, MODELZIP_INCLUDEDIR, MODELZIP_MANDIR, and
MODELZIP_PYTHON_SITE_DIR (absolute; empty when the bindings are not built).
"""
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

ENV = os.environ
BUILD = pathlib.Path(ENV.get("MODELZIP_BUILD_DIR", "build"))
SOURCE = pathlib.Path(ENV.get("MODELZIP_SOURCE_DIR", "."))
CLI = ENV.get("MODELZIP_CLI", "modelzip")
PREFIX = ENV.get("MODELZIP_PREFIX", "/usr/local")


def under_prefix(option, default):
    """An install folder option as an absolute path (meson gives them relative to prefix)."""
    value = ENV.get(option, default)
    return value if os.path.isabs(value) else os.path.join(PREFIX, value)


@pytest.fixture(scope="module")
def root():
    """The DESTDIR that `meson install` wrote to; removed afterwards."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="modelzip-install-"))
    subprocess.run(["meson", "install", "-C", str(BUILD), "--no-rebuild", "--quiet",
                    "--destdir", str(tmp)], check=True, capture_output=True)
    yield tmp
    shutil.rmtree(tmp)


def inside(root, path):
    """`path` (absolute, as installed) inside the DESTDIR."""
    return root / os.path.relpath(path, "/")


def lib_env(root):
    env = dict(ENV)
    env["LD_LIBRARY_PATH"] = str(inside(root, under_prefix("MODELZIP_LIBDIR", "lib")))
    return env


def pc_file(root):
    return inside(root, under_prefix("MODELZIP_LIBDIR", "lib")) / "pkgconfig" / "modelzip.pc"


def relocatable(root):
    """True for -Dpkgconfig.relocatable=true: the prefix is relative to the .pc file."""
    prefix = [l for l in pc_file(root).read_text().splitlines() if l.startswith("prefix=")]
    return prefix[0].startswith("prefix=${pcfiledir}")


def pkg_config(root, *args):
    """pkg-config run on the DESTDIR tree as it would be on another machine's /.

    A relocatable .pc file finds the tree by itself; a fixed prefix needs
    PKG_CONFIG_SYSROOT_DIR, the standard way to use a DESTDIR or sysroot.
    """
    env = dict(ENV)
    env["PKG_CONFIG_PATH"] = str(pc_file(root).parent)
    env.pop("PKG_CONFIG_SYSROOT_DIR", None)
    if not relocatable(root):
        env["PKG_CONFIG_SYSROOT_DIR"] = str(root)
    out = subprocess.run(["pkg-config", *args, "modelzip"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return out.split()


# Headers dedicated to an engine backend: the one foreign header each may
# include, the pkg-config package that provides it, and the flags that keep
# the engine's own headers from warning (dist/mpi.hpp says why).
ENGINE_HEADERS = {"dist/mpi.hpp": ("mpi.h", "ompi-c", ["-DOMPI_SKIP_MPICXX"])}


def test_headers_stand_alone(root):
    include = inside(root, under_prefix("MODELZIP_INCLUDEDIR", "include"))
    headers = sorted((include / "modelzip").rglob("*.hpp"))
    assert len(headers) == len(list((SOURCE / "include" / "modelzip").rglob("*.hpp"))) > 0

    def key(header):  # "archive.hpp", "dist/mpi.hpp"
        return header.relative_to(include / "modelzip").as_posix()

    for header in headers:
        for target in re.findall(r'#\s*include\s*[<"]([^>"]+)[>"]', header.read_text()):
            if target == ENGINE_HEADERS.get(key(header), ("",))[0]:
                continue
            if "/" in target or target.endswith(".h") or target.endswith(".hpp"):
                assert target.startswith("modelzip/"), f"{key(header)} includes {target}"
                assert (include / target).is_file(), f"{key(header)}: {target} not installed"

    def compile_alone(header):  # with a user's warnings on, as the only include
        engine = []
        if key(header) in ENGINE_HEADERS:
            _, package, flags = ENGINE_HEADERS[key(header)]
            engine = subprocess.run(["pkg-config", "--cflags", package], check=True,
                                    capture_output=True, text=True).stdout.split() + flags
        return subprocess.run(["c++", "-std=c++20", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                               "-fsyntax-only", "-I", str(include), *engine,
                               "-include", str(header), "-x", "c++", "/dev/null"],
                              capture_output=True, text=True)

    with ThreadPoolExecutor(2) as pool:
        for header, proc in zip(headers, pool.map(compile_alone, headers)):
            assert proc.returncode == 0, f"{key(header)} alone:\n{proc.stderr}"


# Designated initializers of the option and value structs, as a user writes
# them (the project's own build passes -Wno-missing-field-initializers; a
# user's -Wextra does not).
DESIGNATED_INITIALIZERS = r"""
#include <modelzip/modelzip.hpp>
#include <modelzip/convert.hpp>
#include <modelzip/finalfusion/convert.hpp>
#include <modelzip/finalfusion/embeddings.hpp>
#include <modelzip/graph/checkpoint.hpp>
#include <modelzip/dist/background_save.hpp>
using namespace modelzip;
WriterOptions writer{.append = false};
BackgroundSaveOptions background{.replace = true};
QuantizeOptions quantize{.min_elements = 1};
OpenOptions open{.limits = {}};
RemoteOptions remote{.cache_limit = 1};
ErrorContext context{.archive = "model.zip"};
Metadata metadata{.model_name = "mlp"};
ParamInfo info{.name = "w"};
Problem problem{.entry = "e"};
convert::NamedTensor named{.name = "w"};
convert::TensorFile file{.format = convert::TensorFormat::npz};
finalfusion::WordSimilarity similarity{.word = "a"};
finalfusion::WriteOptions write_options{.normalize = true};
finalfusion::EmbeddingsOpenOptions embeddings_open{.mmap = false};
graph::Op op{.name = "add"};
graph::Graph graph{.variables = {}};
training::TrainingConfig config{.updater = training::Adam{}};
CheckpointSaveOptions save{.share_from_tag = "step-1"};
CollectiveOptions collective{.durable = false};
BackgroundCollectiveOptions background_collective{.keep_staging = false};
Block block{.offset = {0}};
Communicator::Failure failure{.rank = 1};
// The header templates, instantiated as a user's program does.
#include <complex>
float use_templates(const Archive& a) {
  float sum = 0;
  for (float x : a.tensor("w").as<float>()) sum += x;
  Tensor t = a.tensor("c");
  sum += static_cast<float>(t.as<std::complex<double>>()[0].real());
  sum += static_cast<float>(a.load().at("i").as<std::int8_t>()[0]);
  return sum;
}
"""


def test_headers_compile_cleanly_with_warnings_on(root, tmp_path):
    """A user's -Wall -Wextra -Wpedantic -Werror (g++ and clang++, C++20 and C++23): no
    installed header warns, alone or when its structs are designated-initialized."""
    include = inside(root, under_prefix("MODELZIP_INCLUDEDIR", "include"))
    source = tmp_path / "designated.cpp"
    source.write_text(DESIGNATED_INITIALIZERS)
    compilers = [c for c in ("g++", "clang++") if shutil.which(c)]
    assert compilers
    runs = [[c, f"-std={std}", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fsyntax-only",
             "-I", str(include), str(source)] for c in compilers for std in ("c++20", "c++2b")]
    with ThreadPoolExecutor(2) as pool:
        for args, proc in zip(runs, pool.map(
                lambda a: subprocess.run(a, capture_output=True, text=True), runs)):
            assert proc.returncode == 0, f"{' '.join(args[:2])}:\n{proc.stderr}"


# 0.1's spellings (docs/cpp.md, "Changes in 0.2"), each with a word of the
# warning that names its replacement.
OLD_SPELLINGS = r"""
#include <modelzip/modelzip.hpp>
#include <modelzip/convert.hpp>
#include <modelzip/finalfusion/convert.hpp>
#include <modelzip/finalfusion/embeddings.hpp>
#include <sstream>
#include <string>
#include <vector>
using namespace modelzip;
std::size_t old_spellings(const Archive& a, const finalfusion::Embeddings& e) {
  const std::vector<std::string> names{"w"};
  std::size_t n = a.load({}, ReadMode::copy).size();
  n += a.load_params(names, {}, ReadMode::zero_copy, true).size();
  finalfusion::Metadata m = finalfusion::Metadata::parse("a = 1\n");
  finalfusion::QuantizeResult q = finalfusion::quantize(e, finalfusion::PqOptions{});
  n += finalfusion::dequantize(q.embeddings).rows() + m.toml().size();
  n += finalfusion::format_name(*finalfusion::format_from_name("text")).size();
  n += finalfusion::detect_format("v.txt", "a 1\n").has_value();
  n += finalfusion::format_for_extension("v.vec").has_value();
  finalfusion::Format f = finalfusion::Format::text;
  convert::Format c = convert::format_from_extension("a.npy");
  std::ostringstream out;
  finalfusion::write_word2vec_binary(out, e, true);
  finalfusion::write_text(out, e, false);
  finalfusion::write_text_dims(out, e, true);
  finalfusion::store("e.txt", e, finalfusion::EmbeddingFormat::text, false);
  e.save("e.fifu", false);
  n += finalfusion::Embeddings::open("e.fifu", false).rows();
  QuantizeScheme scheme = *quantize_scheme_from_name("int8-block32");
  n += quantize_scheme_name(scheme).size();
  return n + convert::format_name(c).size() + static_cast<std::size_t>(f);
}
int main() { return 0; }
"""
OLD_SPELLING_WARNINGS = [
    "use load(tag, LoadOptions{.mode = mode, .progress = progress})",
    "use load(tag, LoadOptions{.names = names, .mode = mode, .verify_crc = check_crc})",
    "use finalfusion::EmbeddingsMetadata", "use finalfusion::PqResult",
    "use embeddings.quantize(options)", "use embeddings.dequantize()",
    "use finalfusion::embedding_format_name", "use finalfusion::embedding_format_from_name",
    "use finalfusion::detect_embedding_format", "use finalfusion::embedding_format_for_extension",
    "use finalfusion::EmbeddingFormat", "use convert::TensorFormat",
    "use convert::tensor_format_for_extension", "use convert::tensor_format_name",
    "use write_word2vec_binary(out, embeddings, WriteOptions{.normalize = !unnormalize})",
    "use write_text(out, embeddings, WriteOptions{.normalize = !unnormalize})",
    "use write_text_dims(out, embeddings, WriteOptions{.normalize = !unnormalize})",
    "use store(path, embeddings, format, WriteOptions{.normalize = !unnormalize})",
    "use finalfusion::store(path, embeddings, EmbeddingFormat::finalfusion, "
    "WriteOptions{.durable = durable})",
    "use Embeddings::open(path, EmbeddingsOpenOptions{.mmap = mmap})",
    "use QuantizeRecipe", "use quantize_recipe_from_name", "use quantize_recipe_name"]

# Every namespace at once: no name is declared twice (0.1 declared Metadata,
# QuantizeResult and Format in two namespaces each).
EVERY_NAMESPACE = r"""
#define MODELZIP_NO_DEPRECATED
#include <modelzip/modelzip.hpp>
#include <modelzip/convert.hpp>
#include <modelzip/finalfusion/convert.hpp>
#include <modelzip/finalfusion/embeddings.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>
using namespace modelzip;
using namespace modelzip::convert;
using namespace modelzip::finalfusion;
std::size_t new_spellings(const Archive& a, const Embeddings& e) {
  Metadata m = a.metadata();
  EmbeddingsMetadata em = EmbeddingsMetadata::parse("a = 1\n");
  QuantizeResult tag_result = quantize_tag("m.zip", "t", "q");
  PqResult pq = e.quantize(PqOptions{});
  Tensor q = quantize(a.tensor("w"), QuantizeRecipe::int8_per_tensor);
  NamedTensors all = a.load({}, {.names = std::vector<std::string>{"w"},
                                 .mode = ReadMode::copy, .verify_crc = true});
  TensorFormat t = *tensor_format_for_extension("a.npy");
  EmbeddingFormat f = *embedding_format_from_name("text");
  std::ostringstream out;
  write_text(out, e, {.normalize = true});
  write_word2vec_binary(out, e, WriteOptions{});
  write_text_dims(out, e);
  store("e.fifu", e, EmbeddingFormat::finalfusion, {.durable = false});
  Embeddings opened = Embeddings::open("e.fifu", {.mmap = false});
  Embeddings read = Embeddings::open("e.fifu", {});
  Embeddings mapped = Embeddings::open("e.fifu");
  // One function per reader (0.1 had two each, with and without `source`).
  auto readers = std::make_tuple(&read_npy, &read_npz, &read_safetensors, &read_btf,
                                 &read_word2vec_binary, &read_text, &read_text_dims,
                                 &read_fasttext, &read_floret_text);
  (void)readers;
  std::size_t read_n = read_text(Bytes{}, {}, "v.txt").rows() + read_text(Bytes{}).rows() +
                       read_npz(Bytes{}, {}, "t.npz").size() + read_npz(Bytes{}).size();
  return tensor_format_name(t).size() + embedding_format_name(f).size() + em.toml().size() +
         pq.embeddings.dequantize().rows() + all.size() + q.rank() + tag_result.quantized.size() +
         (m.model_name ? 1 : 0) + opened.rows() + read.rows() + mapped.rows() + read_n +
         quantize_recipe_name(*quantize_recipe_from_name("int4-block32")).size();
}
int main() { return 0; }
"""


def test_old_spellings_compile_with_a_warning_and_namespaces_do_not_clash(root, tmp_path):
    """The spellings 0.2 replaced still compile and link against the installed library, each
    warning with the name to use; without them (MODELZIP_NO_DEPRECATED), a program may use
    the namespaces modelzip, modelzip::convert and modelzip::finalfusion together."""
    old = tmp_path / "old_spellings.cpp"
    old.write_text(OLD_SPELLINGS)
    proc = subprocess.run(["c++", "-std=c++20", "-Wall", "-Wextra", str(old),
                           *pkg_config(root, "--cflags", "--libs"), "-o", str(tmp_path / "old")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert [w for w in OLD_SPELLING_WARNINGS if w not in proc.stderr] == [], proc.stderr
    assert proc.stderr.count("[-Wdeprecated-declarations]") >= len(OLD_SPELLING_WARNINGS)
    every = tmp_path / "every_namespace.cpp"
    every.write_text(EVERY_NAMESPACE)
    include = inside(root, under_prefix("MODELZIP_INCLUDEDIR", "include"))
    compilers = [c for c in ("g++", "clang++") if shutil.which(c)]
    for compiler in compilers:
        proc = subprocess.run([compiler, "-std=c++20", "-Wall", "-Wextra", "-Wpedantic",
                               "-Werror", "-fsyntax-only", "-I", str(include), str(every)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{compiler}:\n{proc.stderr}"


# A braced list of two strings where a tag goes: std::string_view's (and
# std::string's) (first, last) constructor took the two literals as a range,
# undefined behaviour at run time. Each call must fail to compile, with a
# message that names the right call, on the line of the call. Line numbers
# are those of the calls below (lines 1 and 2 are the #includes).
BRACED_TAGS = r"""#include <modelzip/modelzip.hpp>
#include <modelzip/graph/checkpoint.hpp>
using namespace modelzip;
void braced(const Archive& a, Writer& w, CollectiveWriter& c) {
  (void)a.load({"step-1", "step-2"});
  (void)a.find_tag({"a", "b"});
  (void)a.tag_damage({"a", "b"});
  (void)a.params({"a", "b"});
  (void)a.updater_states({"a", "b"});
  w.add_tag({"a", "b"}, NewTag{});
  w.replace_tag({"a", "b"}, NewTag{});
  w.remove_tag({"a", "b"});
  (void)c.commit({"a", "b"});
}
void braced_where_tag_is_not_first(const Archive& a, NamedTensors& m, const NamedTensors& cm,
                                   NewTag& t) {
  (void)a.tensor("w", {"a", "b"});
  (void)a.tensor({"a", "b"});
  (void)a.param("w", {"a", "b"});
  (void)a.param({"a", "b"});
  (void)a.embedding_file("v", {"a", "b"});
  (void)a.embedding_file({"a", "b"});
  (void)a.updater_state("w", "M", {"a", "b"});
  (void)a.entry({"a", "b"});
  (void)a.entry_part({"a", "b"}, 0, 1);
  (void)a.entry_size({"a", "b"});
  (void)a.has_entry({"a", "b"});
  (void)m.at({"a", "b"});
  (void)cm.at({"a", "b"});
  (void)NamedTensors(cm).at({"a", "b"});
  (void)m.find({"a", "b"});
  (void)cm.find({"a", "b"});
  (void)cm.contains({"a", "b"});
  (void)cm.count({"a", "b"});
  (void)load_graph(a, {"a", "b"});
  (void)load_training_config(a, {"a", "b"});
  (void)load_checkpoint(a, {"a", "b"});
  t.share("w", {"a", "b"}, "w");
  t.share_updater_state("w", "M", {"a", "b"});
}
void braced_names(const Archive& a, NewTag& t, CollectiveWriter& c, const Block& b) {
  t.add({"a", "b"}, Tensor{});
  t.add_embedding({"a", "b"}, Bytes{});
  t.add_updater_state({"a", "b"}, "M", Tensor{});
  t.add_updater_state("w", {"a", "b"}, Tensor{});
  t.set_entry({"a", "b"}, Bytes{});
  (void)a.updater_state({"a", "b"}, "M");
  (void)a.updater_state("w", {"a", "b"});
  (void)EntryStream::open(a, {"a", "b"});
  (void)read_block(a, {"a", "b"}, b);
  (void)read_block(a, "w", b, {"a", "b"});
  (void)read_updater_block(a, {"a", "b"}, "M", b);
  (void)read_updater_block(a, "w", {"a", "b"}, b);
  (void)read_updater_block(a, "w", "M", b, {"a", "b"});
  c.add({"a", "b"}, Tensor{});
  c.add_updater_state({"a", "b"}, "M", Tensor{});
  c.add_updater_state("w", {"a", "b"}, Tensor{});
  c.set_entry({"a", "b"}, Bytes{});
}
"""
BRACED_TAG_MESSAGES = {
    5: 'load({"a", "b"}): a tag is one string, as in load("step-1"); to load the parameters a '
       'and b: load(tag, {.names = std::vector<std::string>{"a", "b"}})',
    6: 'find_tag({"a", "b"}): a tag is one string',
    7: 'tag_damage({"a", "b"}): a tag is one string',
    8: 'params({"a", "b"}): a tag is one string',
    9: 'updater_states({"a", "b"}): a tag is one string',
    10: 'add_tag({"a", "b"}, contents): a tag is one string',
    11: 'replace_tag({"a", "b"}, contents): a tag is one string',
    12: 'remove_tag({"a", "b"}): a tag is one string',
    13: 'commit({"a", "b"}): a tag is one string',
    17: 'tensor(name, {"a", "b"}): a tag is one string',
    18: 'tensor({"a", "b"}): a name is one string',
    19: 'param(name, {"a", "b"}): a tag is one string',
    20: 'param({"a", "b"}): a name is one string',
    21: 'embedding_file(name, {"a", "b"}): a tag is one string',
    22: 'embedding_file({"a", "b"}): a name is one string',
    23: 'updater_state(variable, state, {"a", "b"}): a tag is one string',
    24: 'entry({"a", "b"}): an entry name is one string',
    25: 'entry_part({"a", "b"}, offset, length): an entry name is one string',
    26: 'entry_size({"a", "b"}): an entry name is one string',
    27: 'has_entry({"a", "b"}): an entry name is one string',
    28: 'at({"a", "b"}): a name is one string',
    29: 'at({"a", "b"}): a name is one string',
    30: 'at({"a", "b"}): a name is one string',
    31: 'find({"a", "b"}): a name is one string',
    32: 'find({"a", "b"}): a name is one string',
    33: 'contains({"a", "b"}): a name is one string',
    34: 'count({"a", "b"}): a name is one string',
    35: 'load_graph(archive, {"a", "b"}): a tag is one string',
    36: 'load_training_config(archive, {"a", "b"}): a tag is one string',
    37: 'load_checkpoint(archive, {"a", "b"}): a tag is one string',
    38: 'share(name, {"a", "b"}, from_param): a tag is one string',
    39: 'share_updater_state(variable, state, {"a", "b"}): a tag is one string',
    42: 'add({"a", "b"}, tensor): a name is one string',
    43: 'add_embedding({"a", "b"}, fifu_file): a name is one string',
    44: 'add_updater_state({"a", "b"}, state, tensor): a variable is one string',
    45: 'add_updater_state(variable, {"a", "b"}, tensor): a state is one string',
    46: 'set_entry({"a", "b"}, contents): an entry name is one string',
    47: 'updater_state({"a", "b"}, state): a variable is one string',
    48: 'updater_state(variable, {"a", "b"}): a state is one string',
    49: 'open(archive, {"a", "b"}): an entry name is one string',
    50: 'read_block(archive, {"a", "b"}, block): a name is one string',
    51: 'read_block(archive, name, block, {"a", "b"}): a tag is one string',
    52: 'read_updater_block(archive, {"a", "b"}, state, block): a variable is one string',
    53: 'read_updater_block(archive, variable, {"a", "b"}, block): a state is one string',
    54: 'read_updater_block(archive, variable, state, block, {"a", "b"}): a tag is one string',
    55: 'add({"a", "b"}, tensor): a name is one string',
    56: 'add_updater_state({"a", "b"}, state, tensor): a variable is one string',
    57: 'add_updater_state(variable, {"a", "b"}, tensor): a state is one string',
    58: 'set_entry({"a", "b"}, contents): an entry name is one string',
}
# What stays valid: `{}` (the newest tag), one string in braces, a string
# and a (pointer, length) pair.
ONE_TAG = r"""#include <modelzip/modelzip.hpp>
#include <modelzip/graph/checkpoint.hpp>
#include <string>
using namespace modelzip;
std::size_t one_tag(const Archive& a, Writer& w, const std::string& s) {
  const char* p = "step-1x";
  std::size_t n = a.load({}).size() + a.load({}, {.mode = ReadMode::copy}).size() +
                  a.load("step-1").size() + a.load({"step-1"}).size() + a.load(s).size() +
                  a.load({p, 6}).size() + a.params({}).size() + a.params({p, 6}).size() +
                  a.find_tag(s).has_value() + a.tag_damage().has_value();
  w.add_tag("step-2", NewTag{});
  w.add_tag({"step-3"}, NewTag{});
  w.remove_tag({});
  return n;
}
std::size_t one_name(const Archive& a, NamedTensors& m, NewTag& t, const Block& b) {
  const char* p = "wx";
  t.share("w", {"step-1"}, "w");
  t.share_updater_state("w", "M", {});
  t.add({"w"}, Tensor{});
  t.add({p, 1}, Tensor{}, {});
  t.add_embedding({"v"}, Bytes{});
  t.add_updater_state({"w"}, {p, 1}, Tensor{});
  t.set_entry({"graph.fb"}, Bytes{});
  (void)EntryStream::open(a, {p, 1});
  (void)read_block(a, {"w"}, b, {});
  (void)read_updater_block(a, "w", {"M"}, b, {p, 1});
  return a.tensor("w", {}).rank() + a.tensor({"w"}, {"step-1"}).rank() +
         a.tensor({p, 1}, {p, 1}).rank() + a.param({"w"}).shape.size() + a.entry({p, 1}).size() +
         a.embedding_file("v", {}).size() + a.updater_state("w", "M", {}).rank() +
         m.at({"w"}).rank() + m.count("w") + (m.find({p, 1}) == m.end()) +
         load_checkpoint(a, {}).params.size() + load_graph(a, {"step-1"}).variables.size();
}
"""


def test_a_braced_list_of_two_strings_is_no_tag(root, tmp_path):
    """`archive.load({"a", "b"})` and the like do not compile (each message names the call to
    write), and the calls that pass one tag in braces still do, without a warning."""
    include = inside(root, under_prefix("MODELZIP_INCLUDEDIR", "include"))
    braced = tmp_path / "braced.cpp"
    braced.write_text(BRACED_TAGS)
    one = tmp_path / "one_tag.cpp"
    one.write_text(ONE_TAG)
    compilers = [c for c in ("g++", "clang++") if shutil.which(c)]
    assert compilers
    for compiler in compilers:
        # Every error reported: clang++ stops after 20 unless told otherwise.
        no_limit = ["-ferror-limit=0"] if "clang" in compiler else []
        proc = subprocess.run([compiler, "-std=c++20", "-fsyntax-only", *no_limit, "-I",
                               str(include), str(braced)], capture_output=True, text=True)
        assert proc.returncode != 0, f"{compiler} compiled {BRACED_TAGS}"
        lines = proc.stderr.replace('\\"', '"').splitlines()  # clang++ escapes the quotes
        for line, message in BRACED_TAG_MESSAGES.items():
            # The message, and the user's line as the place the failing call is made
            # (g++: "braced.cpp:4:15:   required from here"; clang++: "braced.cpp:4:11:
            # note: in instantiation of ... requested here").
            assert any(message in l for l in lines), f"{compiler}: no {message!r}:\n{proc.stderr}"
            assert any(l.startswith(f"{braced}:{line}:") and
                       ("required from here" in l or "requested here" in l)
                       for l in lines), f"{compiler}: line {line} not named:\n{proc.stderr}"
        proc = subprocess.run([compiler, "-std=c++20", "-Wall", "-Wextra", "-Wpedantic",
                               "-Werror", "-fsyntax-only", "-I", str(include), str(one)],
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{compiler}:\n{proc.stderr}"


def test_pkg_config_file(root):
    libdir = inside(root, under_prefix("MODELZIP_LIBDIR", "lib"))
    include = inside(root, under_prefix("MODELZIP_INCLUDEDIR", "include"))
    def normalized(flags):  # a relocatable .pc gives .../pkgconfig/../../../include
        return [f[:2] + os.path.normpath(f[2:]) if f[:2] in ("-I", "-L") else f for f in flags]

    cflags = normalized(pkg_config(root, "--cflags"))
    libs = normalized(pkg_config(root, "--libs"))
    assert f"-I{include}" in cflags
    assert f"-L{libdir}" in libs and "-lmodelzip" in libs
    # The public headers need no other package's headers; libraries modelzip
    # links privately (libzip...) are not forced on the program.
    assert not pkg_config(root, "--print-requires")
    assert "-lzip" not in libs
    assert pkg_config(root, "--modversion") == [
        re.search(r"version : '([^']+)'", (SOURCE / "meson.build").read_text()).group(1)]
    if relocatable(root):  # the same answers with the tree moved elsewhere
        moved = root.with_name(root.name + "-moved")
        os.rename(root, moved)
        try:
            include_flag = f"-I{inside(moved, under_prefix('MODELZIP_INCLUDEDIR', 'include'))}"
            assert include_flag in [f"-I{os.path.realpath(f[2:])}" for f in
                                    pkg_config(moved, "--cflags") if f.startswith("-I")]
        finally:
            os.rename(moved, root)


def test_static_libs_name_every_library_the_library_needs(root):
    """`pkg-config --static --libs` (static linking of libmodelzip) names every library that
    libmodelzip.so itself links, but for the C and C++ runtime that the compiler adds."""
    libdir = inside(root, under_prefix("MODELZIP_LIBDIR", "lib"))
    dynamic = subprocess.run(["readelf", "-d", str(libdir / "libmodelzip.so")], check=True,
                             capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[lib([^.\]]+)\.so", dynamic)
    runtime = {"c", "m", "stdc++", "gcc_s", "pthread", "dl", "rt"}
    needed = [n for n in needed if n not in runtime and not n.startswith("ld-linux")]
    assert "zip" in needed
    libs = pkg_config(root, "--static", "--libs")
    assert [n for n in needed if f"-l{n}" not in libs] == [], libs


def test_sample_builds_and_runs_against_the_installed_library(root, tmp_path):
    exe = tmp_path / "installed_sample"
    subprocess.run(["c++", "-std=c++20", str(SOURCE / "samples" / "installed" / "main.cpp"),
                    *pkg_config(root, "--cflags", "--libs"), "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe), str(tmp_path / "m.zip")], env=lib_env(root),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # w = 1..6 sums to 21; b = [0.5, -0.5]; one tag holding two parameters.
    assert proc.stdout == "tags=1 params=2 sum(w)=21 b[1]=-0.5 verify=ok\nmissing: not_found\n"
    # It linked the installed library, not the build tree's.
    ldd = subprocess.run(["ldd", str(exe)], env=lib_env(root), capture_output=True,
                         text=True).stdout
    assert str(inside(root, under_prefix("MODELZIP_LIBDIR", "lib"))) in ldd


PRINTS_VERSION = r"""
#include <modelzip/version.hpp>
#include <iostream>
int main() { std::cout << modelzip::version() << "\n"; }
"""


def test_version_is_the_projects(root, tmp_path):
    """modelzip::version() of the installed library is meson.build's project version, as the
    pkg-config file and `modelzip --version` say."""
    source = tmp_path / "prints_version.cpp"
    source.write_text(PRINTS_VERSION)
    exe = tmp_path / "prints_version"
    subprocess.run(["c++", "-std=c++20", str(source), *pkg_config(root, "--cflags", "--libs"),
                    "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe)], env=lib_env(root), capture_output=True, text=True)
    project = re.search(r"version : '([^']+)'", (SOURCE / "meson.build").read_text()).group(1)
    assert proc.returncode == 0 and proc.stdout == project + "\n", (proc.stdout, proc.stderr)


USES_TOML_HEADER_ONLY = r"""
// A program that uses toml++ header-only (its default) beside modelzip.
#include <modelzip/modelzip.hpp>
#include <toml++/toml.h>
#include <iostream>
int main() {
  auto table = toml::parse("answer = 42");
  std::cout << table["answer"].value_or(0) << " " << modelzip::dtype_name(modelzip::DType::float32)
            << "\n";
}
"""


def test_private_defines_stay_private(root, tmp_path):
    """modelzip's own build settings of toml++ (a compiled shared toml++) must not reach users."""
    cflags = pkg_config(root, "--cflags")
    assert not [f for f in cflags if f.startswith("-D")], cflags
    source = tmp_path / "uses_toml.cpp"
    source.write_text(USES_TOML_HEADER_ONLY)
    exe = tmp_path / "uses_toml"
    # No -ltomlplusplus: a leaked -DTOML_HEADER_ONLY=0 makes this fail to link.
    subprocess.run(["c++", "-std=c++20", str(source), *pkg_config(root, "--cflags", "--libs"),
                    "-o", str(exe)], check=True)
    proc = subprocess.run([str(exe)], env=lib_env(root), capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "42 float32\n", proc.stderr


def test_installed_cli_runs_from_any_prefix(root, tmp_path):
    """The installed CLI carries the library inside (it links it statically: it uses internal
    headers too), so it runs without LD_LIBRARY_PATH or a RUNPATH: from the DESTDIR tree (the
    prefix as seen from another root) and after that tree has moved to another folder (another
    prefix, as with -Dprefix=$HOME/opt/modelzip)."""
    env = {k: v for k, v in ENV.items() if k != "LD_LIBRARY_PATH"}
    cli = inside(root, under_prefix("MODELZIP_BINDIR", "bin")) / "modelzip"
    dynamic = subprocess.run(["readelf", "-d", str(cli)], check=True, capture_output=True,
                             text=True).stdout
    assert "libmodelzip" not in dynamic and "RUNPATH" not in dynamic, dynamic
    npy = tmp_path / "w.npy"  # a version 1.0 .npy of float32 [1, 2]
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
    header += b" " * (64 - 10 - len(header) - 1) + b"\n"
    npy.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header
                    + b"\x00\x00\x80\x3f\x00\x00\x00\x40")
    moved = tmp_path / "elsewhere"
    shutil.copytree(root, moved, symlinks=True)
    for tree in (root, moved):
        cli = inside(tree, under_prefix("MODELZIP_BINDIR", "bin")) / "modelzip"
        proc = subprocess.run([str(cli), "--version"], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert re.fullmatch(r"modelzip \d+\.\d+\.\d+\n", proc.stdout)
        # Real commands, not only --version: a tag written and listed.
        archive = tmp_path / f"{tree.name}.zip"
        subprocess.run([str(cli), "import", str(archive), "--tag", "t1", str(npy)], env=env,
                       check=True, capture_output=True)
        tags = subprocess.run([str(cli), "tags", str(archive)], env=env, check=True,
                              capture_output=True, text=True).stdout
        assert tags == "t1\n"


def commands_from_help():
    """Command names from `modelzip --help` (the lines under "Commands:")."""
    text = subprocess.run([CLI, "--help"], check=True, capture_output=True, text=True).stdout
    block = text.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in block.splitlines()]


def roff_text(s):
    """How a plain string is written in the page: roff escapes for '-' and '\\'."""
    return s.replace("\\", "\\e").replace("-", "\\-")


def test_man_page_documents_every_command(root):
    page = inside(root, under_prefix("MODELZIP_MANDIR", "share/man")) / "man1" / "modelzip.1"
    assert page.is_file()
    roff = page.read_text()
    assert roff.startswith(".TH MODELZIP 1 ")
    commands = commands_from_help()
    assert len(commands) >= 15 and "export" in commands and "diff" in commands
    sections = re.findall(r"^\.SS (.+)$", roff, flags=re.M)
    assert sections == [roff_text(c) for c in commands]
    for c in commands:
        help_text = subprocess.run([CLI, c, "--help"], check=True, capture_output=True,
                                   text=True).stdout
        usage = help_text.splitlines()[0].removeprefix("Usage: ")
        assert f".B {roff_text(usage)}\n" in roff, c
        examples = help_text.split("Example", 1)[1].split("\n", 1)[1]
        example_lines = [l.strip() for l in examples.splitlines() if l.startswith("  ")]
        assert example_lines, f"{c} --help has no examples"
        for line in example_lines:
            assert f"\n{roff_text(line)}\n" in roff, f"{c}: example {line!r}"
        for option in re.findall(r"^  (-{1,2}[a-z-]+)", help_text, flags=re.M):
            assert f"\n.B {roff_text(option)}" in roff, f"{c}: option {option}"
    for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXIT STATUS", "ENVIRONMENT"]:
        assert f"\n.SH {section}\n" in roff
    # groff parses it without a single warning (-ww: all warnings).
    assert shutil.which("groff"), "groff (package groff-base) is a test dependency"
    proc = subprocess.run(["groff", "-man", "-ww", "-z", str(page)], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    rendered = subprocess.run(["groff", "-man", "-Tutf8", "-P", "-cbou", str(page)],
                              capture_output=True, text=True, check=True).stdout
    plain = re.sub(r"\s+", " ", rendered.replace("\u2010", "-").replace("\u2212", "-"))
    assert "modelzip export ARCHIVE [PARAM...] [--updater VAR STATE]..." in plain


def python_search_path():
    """The folders /usr/bin/python3 imports from (sys.path, without PYTHONPATH)."""
    env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    out = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"],
                         env=env, check=True, capture_output=True, text=True).stdout
    return [p for p in out.splitlines() if p]


def test_python_package_installed_where_python_looks(root, tmp_path):
    site_dir = ENV.get("MODELZIP_PYTHON_SITE_DIR", "")
    if not site_dir:  # bindings not built: nothing of them may be installed
        assert not list(root.rglob("_modelzip*.so"))
        return
    assert site_dir in python_search_path(), f"{site_dir} is not on python3's sys.path"
    package = inside(root, site_dir) / "modelzip"
    assert (package / "__init__.py").is_file() and (package / "__init__.pyi").is_file()
    assert (package / "py.typed").is_file() and list(package.glob("_modelzip*.so"))
    env = lib_env(root)
    env["PYTHONPATH"] = str(inside(root, site_dir))
    script = ("import modelzip, numpy as np, sys\n"
              "modelzip.save(sys.argv[1], 't', {'x': np.arange(4, dtype=np.float32)})\n"
              "print(modelzip.__file__)\n"
              "print(modelzip.load(sys.argv[1])['x'].tolist())\n")
    out = subprocess.run(["/usr/bin/python3", "-c", script, str(tmp_path / "p.zip")], env=env,
                         check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    imported_from, values = out.splitlines()
    assert imported_from == str(package / "__init__.py")
    assert values == "[0.0, 1.0, 2.0, 3.0]"
