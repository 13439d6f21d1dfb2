#!/usr/bin/env python3
"""Checks that every relative link of README.md, docs/*.md and schemas/*.md resolves.

A link [text](target) or <a href="target"> whose target is not a URL with a
scheme (http:, https:, mailto:...) must name a file or folder of the source
tree, relative to the page; a #fragment (alone for the same page, or after a
.md target) must be the anchor of a heading of that page, as GitHub makes it:
lower case, punctuation but '-' and '_' dropped, spaces turned into '-', the
n-th repeat of a heading suffixed with -n; or an explicit <a id/name="...">.
Links inside fenced code blocks and inline code spans are not links.

Usage: check_links.py --source-dir DIR [PAGE...]
Exit status 0 only if every link resolves; each failure prints PAGE:LINE: why.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

FENCE = re.compile(r"^ *(```+|~~~+)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HREF = re.compile(r"<a\s[^>]*\bhref=\"([^\"]*)\"", re.I)
HTML_ID = re.compile(r"<a\s[^>]*\b(?:id|name)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str):
    """Yields (line number, line) outside fenced code blocks, HTML comments and inline code."""
    fence = None
    in_comment = False
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match and not in_comment:
            fence = match.group(1)
            continue
        visible = ""
        rest = line
        while rest:
            if in_comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                else:
                    rest = rest[end + 3:]
                    in_comment = False
            else:
                start = rest.find("<!--")
                if start < 0:
                    visible += rest
                    rest = ""
                else:
                    visible += rest[:start]
                    rest = rest[start + 4:]
                    in_comment = True
        yield number, INLINE_CODE.sub("", visible)


def slug(heading: str) -> str:
    text = INLINE_CODE.sub(lambda m: m.group(0).strip("`"), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path, cache: dict[Path, set[str]]) -> set[str]:
    if page not in cache:
        found: set[str] = set()
        seen: dict[str, int] = {}
        text = page.read_text(encoding="utf-8")
        for _, line in prose_lines(text):
            found.update(HTML_ID.findall(line))
            match = HEADING.match(line)
            if match:
                base = slug(match.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
        cache[page] = found
    return cache[page]


def links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link of the page; a link's text may span lines."""
    lines = dict(prose_lines(page.read_text(encoding="utf-8")))
    text = "\n".join(lines.get(n, "") for n in range(1, max(lines, default=0) + 1))
    found = [(text.count("\n", 0, m.start(1)) + 1, m.group(1))
             for pattern in (LINK, HREF) for m in pattern.finditer(text)]
    return sorted(found)


def check(page: Path, source: Path, cache: dict[Path, set[str]]) -> list[str]:
    problems = []
    name = page.relative_to(source)
    for number, target in links(page):
        if not target or SCHEME.match(target):
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            problems.append(f"{name}:{number}: {target}: no file {path_part}")
            continue
        try:
            resolved.relative_to(source.resolve())
        except ValueError:
            problems.append(f"{name}:{number}: {target}: outside the source tree")
            continue
        if fragment:
            if resolved.suffix != ".md":
                problems.append(f"{name}:{number}: {target}: an anchor into a file that is not "
                                "markdown")
            elif fragment not in anchors(resolved, cache):
                problems.append(f"{name}:{number}: {target}: {resolved.name} has no heading "
                                f"with the anchor #{fragment}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", type=Path, required=True)
    parser.add_argument("pages", nargs="*", type=Path)
    args = parser.parse_args()
    source = args.source_dir.resolve()
    pages = [p.resolve() for p in args.pages] or (
        [source / "README.md"] + sorted((source / "docs").glob("*.md"))
        + sorted((source / "schemas").glob("*.md")))
    cache: dict[Path, set[str]] = {}
    problems = [problem for page in pages for problem in check(page, source, cache)]
    for problem in problems:
        print(problem)
    count = sum(len(links(page)) for page in pages)
    print(f"{len(pages)} pages, {count} links, {len(problems)} that do not resolve")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
