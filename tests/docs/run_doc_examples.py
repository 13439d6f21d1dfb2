#!/usr/bin/env python3
"""Runs the code examples of README.md and docs/*.md, so that the manuals stay true.

Every fenced code block (```python, ```sh, ```cpp, ``` ...) of those pages
either runs here or carries, right before it (blank lines between allowed),
an HTML comment that says why not. The vocabulary (invisible when rendered):

  <!-- example: not run (REASON) -->
      The block is not run; REASON says why (needs CUDA, an S3 server, it is
      output and not a command...). A block with no marker and no language
      it can run is a failure ("add a marker").
  <!-- example: setup LANG
  CODE
  -->
      Hidden setup: CODE (which must not contain "-->") runs before every
      later block of language LANG on the same page. Setups add up.
  <!-- example: setup -->
      The next (visible) block is setup code for the later blocks of its
      language on the page; it runs only as their setup.
  <!-- example: continues -->
      The block runs in the same process as the previous block of its
      language on the page, after it (names it defined stay defined).

How blocks run (each block, or blocks that continue one another, in a fresh
temporary folder, never in the source tree; nothing but 127.0.0.1 is
contacted; two at a time, --jobs):

  python  /usr/bin/python3 (this interpreter) with the build's package on
          PYTHONPATH; tracebacks name the page and its line.
  sh      bash -euo pipefail with the build's `modelzip` first on PATH.
  cpp     compiled with c++ -std=c++20 against include/ and the build's
          libmodelzip.so (mpicxx when it includes mpi.hpp; it runs as one
          rank). A block without `int main` is a fragment: its #include and
          using-directive lines stay at file scope, the rest (after the
          page's setup) becomes main's body.
  java    with the build's modelzip.jar and JNI library, through java's
          source launcher: import lines at file scope, the rest in main.

Hidden setups may `import doc_fixtures` (tests/docs/doc_fixtures.py: tiny
models, files and helpers the examples presuppose).

Usage: run_doc_examples.py --source-dir DIR --build-dir DIR [PAGE...]
Pages default to README.md and docs/*.md; exit status 0 only if every block
ran or is excused. A failure prints PAGE:LINE: what went wrong.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "shell": "sh",
             "cpp": "cpp", "c++": "cpp", "java": "java"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^`]*)$")
MARKER = re.compile(r"<!--\s*example:\s*(?P<body>.*?)-->", re.S)
NOT_RUN = re.compile(r"not run \((?P<reason>[^)]+)\)\s*$", re.S)
SETUP = re.compile(r"setup(?:[ \t]+(?P<lang>[\w+]+))?[ \t]*(?:\n(?P<code>.*))?$", re.S)
STEP_TIMEOUT_S = 120
SKIPPED = "skipped"  # Runner.run's answer for an example this build cannot run


@dataclass
class Block:
    page: Path
    line: int            # line of the first code line (1-based)
    info: str            # the fence's info string
    code: str
    lang: str | None     # python, sh, cpp, java; None for a language not run here
    markers: list[str] = field(default_factory=list)


@dataclass
class Snippet:
    """Code with the page line of its first line (for error positions)."""
    page: Path
    line: int
    code: str


@dataclass
class Chain:
    """Blocks that run in one process, after the setups that precede them."""
    lang: str
    setups: list[Snippet]
    blocks: list[Block]


class PageError(Exception):
    pass


def parse_page(page: Path) -> list[Block]:
    """The page's fenced blocks and hidden setups, in page order, with their markers."""
    text = page.read_text(encoding="utf-8")
    lines = text.split("\n")
    blocks: list[Block] = []
    pending: list[str] = []        # markers since the last block
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            indent, ticks = len(fence["indent"]), fence["fence"]
            info = fence["info"].strip()
            body = []
            j = i + 1
            while j < len(lines) and not re.match(r"^ *" + ticks + r"\s*$", lines[j]):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            if j == len(lines):
                raise PageError(f"{page}:{i + 1}: code block never closed")
            lang_word = info.split()[0].lower() if info else ""
            blocks.append(Block(page, i + 2, info, "\n".join(body) + "\n",
                                LANGUAGES.get(lang_word), pending))
            pending = []
            i = j + 1
            continue
        if re.match(r"\s*<!--\s*example:", line):  # not inside text (`<!-- example: ...`)
            start = line.find("<!--")
            # A marker comment, possibly over several lines.
            j = i
            chunk = line[start:]
            while "-->" not in chunk:
                j += 1
                if j == len(lines):
                    raise PageError(f"{page}:{i + 1}: example comment never closed")
                chunk += "\n" + lines[j]
            match = MARKER.match(chunk)
            if not match:
                raise PageError(f"{page}:{i + 1}: not an example marker: {chunk[:60]!r}")
            body = match["body"].strip("\n ")
            setup = SETUP.match(match["body"].strip(" "))
            if setup and setup["code"] is not None:
                if not setup["lang"]:
                    raise PageError(f"{page}:{i + 1}: hidden setup needs a language "
                                    "(<!-- example: setup python ...)")
                lang = LANGUAGES.get(setup["lang"].lower())
                if lang is None:
                    raise PageError(f"{page}:{i + 1}: setup for unknown language {setup['lang']}")
                # The code starts on the line after "<!-- example: setup LANG".
                blocks.append(Block(page, i + 2, "hidden setup", setup["code"], lang,
                                    ["setup"]))
            else:
                if not (body == "continues" or body == "setup" or NOT_RUN.match(body)):
                    raise PageError(f"{page}:{i + 1}: unknown example marker {body!r} "
                                    "(not run (REASON), setup, continues)")
                pending.append(body)
            i = j + 1
            continue
        if line.strip() and pending:
            raise PageError(f"{page}:{i + 1}: an example marker must stand right before "
                            "its code block (only blank lines between)")
        i += 1
    if pending:
        raise PageError(f"{page}: example marker after the last code block")
    return blocks


def plan(blocks: list[Block]) -> tuple[list[Chain], list[str], int]:
    """Groups the blocks to run into chains; returns (chains, failures, excused count)."""
    failures: list[str] = []
    excused = 0
    setups: dict[str, list[Snippet]] = {}
    chains: list[Chain] = []
    last_chain: dict[str, Chain] = {}
    for block in blocks:
        rel = block.page
        if "setup" in block.markers:
            if block.lang is None:
                failures.append(f"{rel}:{block.line}: setup block in a language not run here")
                continue
            setups.setdefault(block.lang, []).append(Snippet(block.page, block.line, block.code))
            continue
        not_run = [m for m in block.markers if NOT_RUN.match(m)]
        if not_run:
            excused += 1
            continue
        if block.lang is None:
            failures.append(f"{rel}:{block.line - 1}: code block ```{block.info} is neither run "
                            "nor excused: add a marker (<!-- example: not run (REASON) -->) "
                            "or a language that runs (python, sh, cpp, java)")
            continue
        if "continues" in block.markers:
            chain = last_chain.get(block.lang)
            if chain is None:
                failures.append(f"{rel}:{block.line - 1}: 'continues' with no earlier "
                                f"{block.lang} block on the page")
                continue
            chain.blocks.append(block)
            continue
        chain = Chain(block.lang, list(setups.get(block.lang, [])), [block])
        chains.append(chain)
        last_chain[block.lang] = chain
    return chains, failures, excused


class Runner:
    def __init__(self, args, bin_dir: Path):
        self.source = Path(args.source_dir).resolve()
        self.build = Path(args.build_dir).resolve()
        self.cli = Path(args.cli).resolve() if args.cli else self.build / "src" / "cli" / "modelzip"
        self.lib_dir = self.build
        self.mpi = not args.no_mpi
        self.java_jar = args.java_jar and str(Path(args.java_jar).resolve())
        self.jni_dir = args.jni_dir and str(Path(args.jni_dir).resolve())
        here = Path(__file__).resolve().parent
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(self.build / "src" / "python"), str(here)]
            + ([self.env["PYTHONPATH"]] if self.env.get("PYTHONPATH") else []))
        # `python3` in shell examples is this interpreter (Debian's, with numpy and torch).
        (bin_dir / "python3").symlink_to(sys.executable)
        self.env["PATH"] = os.pathsep.join([str(self.cli.parent), str(bin_dir),
                                            self.env.get("PATH", "")])
        self.env["MODELZIP_CLI"] = str(self.cli)
        self.env.setdefault("MODELZIP_SHARED_TESTDATA",
                            str(self.source.parent / "shared" / "testdata"))
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            self.env.pop(proxy, None)
        self.env["NO_PROXY"] = self.env["no_proxy"] = "127.0.0.1,localhost"

    def run(self, chain: Chain, workdir: Path) -> str | None:
        """Runs one chain in workdir; returns None or a failure text."""
        return {"python": self.run_python, "sh": self.run_sh, "cpp": self.run_cpp,
                "java": self.run_java}[chain.lang](chain, workdir)

    def _call(self, argv, workdir, what):
        try:
            done = subprocess.run(argv, cwd=workdir, env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, errors="replace",
                                  timeout=STEP_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return 124, f"{what} timed out after {STEP_TIMEOUT_S} s"
        return done.returncode, done.stdout

    def run_python(self, chain: Chain, workdir: Path) -> str | None:
        snippets = [(str(s.page), s.line, s.code) for s in chain.setups]
        snippets += [(str(b.page), b.line, b.code) for b in chain.blocks]
        driver = workdir / ".doc_example_driver.py"
        driver.write_text(
            "import json, sys\n"
            "g = {'__name__': '__main__'}\n"
            "for path, line, code in json.loads(sys.argv[1]):\n"
            "    exec(compile('\\n' * (line - 1) + code, path, 'exec'), g)\n")
        rc, out = self._call([sys.executable, str(driver), json.dumps(snippets)], workdir, "python")
        driver.unlink()
        if rc == 0:
            return None
        # The innermost frame in a page names the failing line.
        where = [m for m in re.finditer(r'File "([^"]+\.md)", line (\d+)', out)]
        pos = f"{where[-1][1]}:{where[-1][2]}" if where else f"{chain.blocks[0].page}:{chain.blocks[0].line}"
        return f"{pos}: python example failed (exit {rc}):\n{tail(out)}"

    def run_sh(self, chain: Chain, workdir: Path) -> str | None:
        # errtrace: functions a setup defines report the example line that called them.
        lines = ["set -E", "trap 'echo \"__doc_example_lines $LINENO ${BASH_LINENO[*]}\" >&2' ERR"]
        origin: dict[int, tuple[Path, int, bool]] = {}  # script line -> page, line, in a block
        snippets = [(s, False) for s in chain.setups]
        snippets += [(Snippet(b.page, b.line, b.code), True) for b in chain.blocks]
        for s, in_block in snippets:
            for k, text in enumerate(s.code.rstrip("\n").split("\n")):
                lines.append(text)
                origin[len(lines)] = (s.page, s.line + k, in_block)
        script = workdir / ".doc_example.sh"
        script.write_text("\n".join(lines) + "\n")
        rc, out = self._call(["bash", "-euo", "pipefail", str(script)], workdir, "bash")
        if rc == 0:
            return None
        # The innermost line of the trace that is an example's own (not its setup's).
        page, line = chain.blocks[0].page, chain.blocks[0].line
        for trace in re.findall(r"__doc_example_lines ([\d ]+)", out)[:1]:
            places = [origin[int(n)] for n in trace.split() if int(n) in origin]
            places = [p for p in places if p[2]] or places
            if places:
                page, line = places[0][0], places[0][1]
        return f"{page}:{line}: shell example failed (exit {rc}):\n{tail(out)}"

    def run_cpp(self, chain: Chain, workdir: Path) -> str | None:
        snippets = chain.setups + [Snippet(b.page, b.line, b.code) for b in chain.blocks]
        whole = any(re.search(r"\bint\s+main\s*\(", s.code) for s in snippets)
        head, body = [], []
        for s in snippets:
            for k, text in enumerate(s.code.rstrip("\n").split("\n")):
                directive = f'#line {s.line + k} "{s.page}"'
                if not whole and re.match(r"\s*(#include|using namespace)\b", text):
                    head += [directive, text]
                else:
                    body += [directive, text]
        if whole:
            program = "\n".join(head + body)
        else:
            program = "\n".join(head + ["int main() {", "try {"] + body + [
                "} catch (const std::exception& e) {",
                '  std::fprintf(stderr, "error: %s\\n", e.what()); return 1;', "}", "}"])
            program = "#include <cstdio>\n#include <exception>\n" + program
        source = workdir / ".doc_example.cpp"
        source.write_text(program + "\n")
        exe = workdir / ".doc_example"
        compiler = "mpicxx" if "mpi.hpp" in program else os.environ.get("CXX", "c++").split()[-1]
        if compiler == "mpicxx" and not self.mpi:
            return SKIPPED
        rc, out = self._call([compiler, "-std=c++20", "-O0", "-w", f"-I{self.source / 'include'}",
                              str(source), f"-L{self.lib_dir}", "-lmodelzip",
                              f"-Wl,-rpath,{self.lib_dir}", "-o", str(exe)], workdir, "c++")
        if rc != 0:
            first = chain.blocks[0]
            return f"{first.page}:{first.line}: C++ example does not compile:\n{tail(out)}"
        rc, out = self._call([str(exe)], workdir, "the C++ example")
        source.unlink()
        exe.unlink()
        if rc != 0:
            first = chain.blocks[0]
            return f"{first.page}:{first.line}: C++ example failed (exit {rc}):\n{tail(out)}"
        return None

    def run_java(self, chain: Chain, workdir: Path) -> str | None:
        if not self.java_jar:
            return SKIPPED
        snippets = chain.setups + [Snippet(b.page, b.line, b.code) for b in chain.blocks]
        imports, body = [], []
        origin: dict[int, tuple[Path, int]] = {}
        for s in snippets:
            for k, text in enumerate(s.code.rstrip("\n").split("\n")):
                (imports if re.match(r"\s*import\s", text) else body).append((text, s.page, s.line + k))
        program = []
        for text, page, line in imports + [("public class DocExample {", None, 0),
                                           ("public static void main(String[] args) throws Exception {",
                                            None, 0)] + body + [("}}", None, 0)]:
            program.append(text)
            if page is not None:
                origin[len(program)] = (page, line)
        source = workdir / "DocExample.java"
        source.write_text("\n".join(program) + "\n")
        # The source launcher: compiles in memory and runs, one JVM.
        rc, out = self._call(["java", f"-Djava.library.path={self.jni_dir}", "-cp", self.java_jar,
                              str(source)], workdir, "java")
        if rc == 0:
            return None
        at = [origin[int(n)] for n in re.findall(r"DocExample\.java:(\d+)", out) if int(n) in origin]
        page, line = at[0] if at else (chain.blocks[0].page, chain.blocks[0].line)
        return f"{page}:{line}: Java example failed (exit {rc}):\n{tail(out)}"


def tail(text: str, lines: int = 25) -> str:
    return "\n".join("    " + t for t in text.rstrip().split("\n")[-lines:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--cli", help="the modelzip command (default: BUILD/src/cli/modelzip)")
    parser.add_argument("--no-mpi", action="store_true",
                        help="skip (and count) the C++ examples that need MPI: a build without it")
    parser.add_argument("--java-jar", help="modelzip.jar (without it, Java examples are skipped)")
    parser.add_argument("--jni-dir", help="the folder of libmodelzip_jni.so")
    parser.add_argument("--jobs", type=int, default=2, help="examples run at once (default 2)")
    parser.add_argument("pages", nargs="*", help="pages to check (default: README.md, docs/*.md)")
    args = parser.parse_args()
    bin_dir = tempfile.TemporaryDirectory(prefix="modelzip-doc-bin-")
    runner = Runner(args, Path(bin_dir.name))
    source = runner.source
    pages = [Path(p).resolve() for p in args.pages] or \
        [source / "README.md"] + sorted((source / "docs").glob("*.md"))
    failures: list[str] = []
    ran = excused = skipped = 0
    started = time.monotonic()
    jobs: list[tuple[Path, Chain]] = []
    for page in pages:
        try:
            blocks = parse_page(page)
        except PageError as e:
            failures.append(str(e))
            continue
        chains, page_failures, page_excused = plan(blocks)
        failures += page_failures
        excused += page_excused
        jobs += [(page, chain) for chain in chains]

    def run_one(job: tuple[Path, Chain]) -> tuple[str | None, float]:
        chain_started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="modelzip-doc-") as workdir:
            problem = runner.run(job[1], Path(workdir))
        return problem, time.monotonic() - chain_started

    # Two at a time: the examples are mostly process start-up and compiles.
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for (page, chain), (problem, seconds) in zip(jobs, pool.map(run_one, jobs)):
            shown = page.relative_to(source) if page.is_relative_to(source) else page
            if problem == SKIPPED:
                skipped += len(chain.blocks)
                problem, status = None, "skip"
            else:
                ran += len(chain.blocks)
                status = "FAIL" if problem else "ok"
            print(f"{status:4} {shown}:{chain.blocks[0].line - 1} {chain.lang} "
                  f"({len(chain.blocks)} block(s), {seconds:.1f} s)", flush=True)
            if problem:
                failures.append(problem)
    bin_dir.cleanup()
    for f in failures:
        print(f.replace(f"{source}/", ""), file=sys.stderr)
    print(f"{ran} blocks ran, {excused} excused, {skipped} skipped, {len(failures)} failed "
          f"({time.monotonic() - started:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
