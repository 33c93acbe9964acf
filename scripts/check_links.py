#!/usr/bin/env python3
"""Checks that every relative link in the docs points at something that exists.

    scripts/check_links.py [FILE.md...]     default: README.md, scripts/README.md, docs/**/*.md
    scripts/check_links.py --self-test      checks the checker on pages it writes itself

A link is `[text](target)` outside code blocks and code spans; its text may run over several
lines of one paragraph (a blank line ends it, as in Markdown). An `http:`, `https:` or
`mailto:` target is not fetched. Any other target must name a file or directory relative to
the page; a `#fragment` on a Markdown page must match one of its headings as GitHub writes
the anchor (lower case, punctuation dropped, spaces to hyphens). Prints each broken link as
`page:line: target (why)`, the line being the one the link starts on, and exits 1 if there
is one.
"""

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The text: anything but brackets, newlines allowed unless the next line is blank (a new
# paragraph). The target: after optional spaces (a newline too), no spaces, then an
# optional "title".
LINK = re.compile(
    r"!?\[(?:[^\[\]\n]|\n(?![ \t]*\n))*\]\([ \t]*\n?[ \t]*([^)\s]+)(?:\s+\"[^\"]*\")?\)"
)
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path):
    """(line number, text) of every line, fenced code and code spans blanked, so a link
    inside code is never read and line numbers stay the page's."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            yield number, ""
        elif fenced:
            yield number, ""
        else:
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


def links(page):
    """(line number, target) of every link on the page, the line the link starts on."""
    text = "\n".join(line for _, line in prose_lines(page))
    for match in LINK.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, match.group(1)


def broken_links(page):
    for number, target in links(page):
        if re.match(r"^(https?|mailto):", target):
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            yield number, target, "no such file"
        elif fragment and dest.suffix == ".md" and fragment not in heading_anchors(dest):
            yield number, target, "no such heading"


SELF_TEST_PAGE = """# A page

## Second heading

[fine](other.md) and [fine, anchored](other.md#a-heading) and [here](#second-heading).
[missing](nowhere.md) on line 6.
A link whose text runs [over
two lines](gone.md) starts on line 7.
And [one over
three
lines](also-gone.md#x) on line 9; [good over
two](other.md) too.
`[in a code span](code-span.md)` is not a link.

[not a link: a blank line

](ends-the-paragraph.md) ends the paragraph.

```
[in a fence](fenced.md)
```

[bad anchor](other.md#no-such) on line 23, [image](pic.png), [web](https://example.invalid/x).
"""
def self_test():
    """Runs the checker on a page written for it; exits 1 on a wrong answer."""
    expected = [
        (6, "nowhere.md", "no such file"),
        (7, "gone.md", "no such file"),
        (9, "also-gone.md#x", "no such file"),
        (23, "other.md#no-such", "no such heading"),
        (23, "pic.png", "no such file"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.md"
        page.write_text(SELF_TEST_PAGE)
        (Path(tmp) / "other.md").write_text("# Other\n\n## A heading\n")
        found = list(broken_links(page))
    if found != expected:
        print("check_links self-test FAILED", file=sys.stderr)
        print(f"  expected {expected}", file=sys.stderr)
        print(f"  found    {found}", file=sys.stderr)
        return 1
    print(f"check_links self-test: {len(expected)} broken links found as expected", file=sys.stderr)
    return 0


def main(args):
    if args == ["--self-test"]:
        return self_test()
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
