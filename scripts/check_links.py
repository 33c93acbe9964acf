#!/usr/bin/env python3
"""Checks that every relative link in the docs points at something that exists.

    scripts/check_links.py [FILE.md...]     default: README.md, scripts/README.md, docs/**/*.md

A link is `[text](target)` outside code blocks and code spans. An `http:`, `https:` or
`mailto:` target is not fetched. Any other target must name a file or directory relative to
the page; a `#fragment` on a Markdown page must match one of its headings as GitHub writes
the anchor (lower case, punctuation dropped, spaces to hyphens). Prints each broken link as
`page:line: target (why)` and exits 1 if there is one.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code, code spans blanked."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def raw_headings(path):
    """(line number, text) of the headings outside fenced code, code spans kept: GitHub
    makes an anchor from their text too."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            yield number, line


def heading_anchors(path):
    """The anchors GitHub gives a Markdown page's headings (a repeated one gets -1, -2…)."""
    seen, found = {}, set()
    for _, line in raw_headings(path):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def broken_links(page):
    for number, line in prose_lines(page):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^(https?|mailto):", target):
                continue
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                yield number, target, "no such file"
            elif fragment and dest.suffix == ".md" and fragment not in heading_anchors(dest):
                yield number, target, "no such heading"


def main(args):
    pages = [Path(a).resolve() for a in args] or [
        ROOT / "README.md",
        ROOT / "scripts" / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
    ]
    bad = 0
    for page in pages:
        if not page.exists():
            continue
        for number, target, why in broken_links(page):
            shown = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
            print(f"{shown}:{number}: {target} ({why})")
            bad += 1
    checked = sum(1 for p in pages if p.exists())
    print(f"check_links: {checked} pages, {bad} broken links", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
