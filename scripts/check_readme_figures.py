#!/usr/bin/env python3
"""Checks that every figure the README quotes next to a committed result is in that result.

    scripts/check_readme_figures.py [FILE.md]    default: README.md
    scripts/check_readme_figures.py --self-test  checks the checker on a page it writes itself

The rule, for a page (the README) and the files under `results/` it links:

* **Units.** Outside fenced code, the page is cut into table rows (a line that starts with
  `|`) and paragraphs (lines up to a blank line, a heading, a table or a fence); a paragraph
  is cut into sentences at `.`, `!` or `?` followed by white space and a capital, a bracket,
  a backtick or `*`.
* **Which units are checked.** A unit that holds a Markdown link `[text](target)` whose
  target lies under `results/` is checked against the files it links there (a directory
  stands for the Markdown files in it). A sentence with no link of its own is checked
  against the `results/` links of the nearest sentence before it in the same paragraph that
  had some: a figure next to a link is read as that link's. Other units are not checked.
* **Numbers.** Link targets are dropped first (their text stays, code spans too). A number
  is a run of digits with an optional decimal part, not glued to a letter, digit, `_` or
  `.` before it nor to a letter, digit or `_` after it (`b1`, `x86`, `2c` are names, not
  figures); digit groups separated by a space (also a no-break or thin space) are one number
  with a thousands separator: `1 708.5` is 1708.5.
* **Present.** Each number must occur in one of the unit's linked files exactly as written
  (`2.2` is not `2.15`, `4.0` is not `4.00`), as a number and not inside a longer one (`34`
  is not in `34.6`, `1.0` is not in `1.05`; a version's head is: `2.42` is in `2.42.0`, `17`
  in `17.0.15`), with or without its thousands separators. A number written with a suffix
  the reports print beside their figures must occur with the same suffix: a ratio's `×`
  right after the number (`34×` needs `34×`, and `±34%` will not do; `2 × CPUs` is a
  product, not a ratio), or the SI `k`, `M` or `G` of a throughput, a space before it or not
  (`1.03 G` needs `1.03 G` or `1.03G`, never `1.03 M`). `%` is not compared, since a report
  may carry it in a column's heading (`overloaded assignments (%)`); nor are units such as
  `ns`, `s` or `bytes`.

This checks presence, not meaning: a small number (`2`) is in nearly every file. It catches
the drift that matters — a figure rounded, copied from a run that was never committed, or
left behind when the report was regenerated. Prints each missing figure as
`page:line: FIGURE not in FILE…` and exits 1 if there is one.
"""

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SPACE = "[ \u00a0\u202f\u2009]"
NUMBER = re.compile(
    rf"(?<![\w.])((?:\d{{1,3}}(?:{SPACE}\d{{3}})+(?!\d)|\d+)(?:\.\d+)?)(?![\w])"
    rf"(?:(×)|{SPACE}?([kMG])(?![\w]))?"
)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[`*])")


def units(text):
    """(line, text, paragraph) of every table row (paragraph None) and of every sentence of
    every paragraph (paragraph: its first line), outside fenced code; line is where the unit
    starts."""
    fenced, paragraph, start = False, [], 0
    out = []

    def flush():
        if paragraph:
            joined = "\n".join(paragraph)
            begin = 0
            for end in [*SENTENCE_END.finditer(joined), None]:
                stop = end.start() if end else len(joined)
                out.append((start + joined.count("\n", 0, begin), joined[begin:stop], start))
                begin = end.end() if end else stop
            paragraph.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            flush()
            fenced = not fenced
        elif fenced:
            continue
        elif line.lstrip().startswith("|"):
            flush()
            out.append((number, line, None))
        elif not line.strip() or line.startswith("#"):
            flush()
        else:
            if not paragraph:
                start = number
            paragraph.append(line)
    flush()
    return out


def results_targets(page, unit):
    """The files under results/ that the unit links."""
    found = []
    for match in LINK.finditer(unit):
        target = match.group(2).partition("#")[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        dest = (page.parent / target).resolve()
        if any(dest.is_relative_to(r) for r in (ROOT / "results", page.parent.resolve() / "results")):
            found.append(dest)
    return found


def numbers(unit):
    """(lines into the unit, as written, digits, suffix) of every number in the unit, link
    targets dropped (they hold no line breaks, so the lines stay the unit's)."""
    text = LINK.sub(lambda m: m.group(1), unit)
    for match in NUMBER.finditer(text):
        written = match.group(0).strip()
        digits = re.sub(SPACE, "", match.group(1))
        suffix = match.group(2) or match.group(3)
        yield text.count("\n", 0, match.start()), written, digits, suffix


def file_text(path):
    if path.is_dir():
        return "\n".join(p.read_text(errors="replace") for p in sorted(path.glob("*.md")))
    return path.read_text(errors="replace") if path.exists() else ""


def present(digits, suffix, text):
    """Whether the number occurs in the text as a number, with the suffix if it has one."""
    # A separator may sit between any two digit groups of three in the file.
    integer, _, fraction = digits.partition(".")
    head = len(integer) % 3 or 3
    groups = [integer[:head]] + [integer[i : i + 3] for i in range(head, len(integer), 3)]
    body = f"{SPACE}?".join(re.escape(g) for g in groups)
    if fraction:
        body += r"\." + re.escape(fraction)
    tail = ""
    if suffix == "×":
        tail = "×"
    elif suffix:
        tail = rf"{SPACE}?{suffix}(?!\w)"
    # A number is not the head of a longer one (34 in 34.6), but it may head a version
    # (2.42 in 2.42.0, 17 in 17.0.15).
    after = r"(?!\d)" if fraction else r"(?!\d)(?!\.\d+(?!\.\d))"
    return re.search(rf"(?<![\w.]){body}{after}{tail}", text) is not None


def missing_figures(page):
    text = page.read_text()
    cache = {}
    inherited, paragraph_of_inherited = [], None
    for line, unit, paragraph in units(text):
        targets = results_targets(page, unit)
        if targets:
            if paragraph is not None:
                inherited, paragraph_of_inherited = targets, paragraph
        elif paragraph is not None and paragraph == paragraph_of_inherited:
            targets = inherited
        if not targets:
            continue
        contents = [cache.setdefault(t, file_text(t)) for t in targets]
        for offset, written, digits, suffix in numbers(unit):
            if not any(present(digits, suffix, c) for c in contents):
                shown = ", ".join(
                    str(t.relative_to(ROOT)) if t.is_relative_to(ROOT) else str(t)
                    for t in targets
                )
                yield line + offset, written, shown


SELF_TEST_PAGE = """# Page

On a test machine ([report](results/r/REPORT.md)) it did 1.03 G pairs/s, 34.6× the
baseline, with 1 000 threads alive 1 708 ns (versions 2.42 and 17); it is wrong to say 34× or
1.03 M or 19 ns. A sentence without a link still quotes 99 % of it (30 × 7), not 98.

Unlinked 12345 figures are not checked.

| row | 12.5 % and 7 of 30 ([report](results/r/REPORT.md)) |
| row | 12.6 % ([report](results/r)) |
"""
SELF_TEST_REPORT = """| a | 1.03 G | 34.6× | 1708 | 1000 | 99% | 12.5 % | 7 of 30 | 2.42.0 | 17.0.15 |\n"""


def self_test():
    """Runs the checker on a page written for it; exits 1 on a wrong answer."""
    expected = [(4, "34×"), (5, "1.03 M"), (5, "19"), (5, "98"), (10, "12.6")]
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "README.md"
        page.write_text(SELF_TEST_PAGE)
        (Path(tmp) / "results" / "r").mkdir(parents=True)
        (Path(tmp) / "results" / "r" / "REPORT.md").write_text(SELF_TEST_REPORT)
        found = [(line, written) for line, written, _ in missing_figures(page)]
    if found != expected:
        print("check_readme_figures self-test FAILED", file=sys.stderr)
        print(f"  expected {expected}", file=sys.stderr)
        print(f"  found    {found}", file=sys.stderr)
        return 1
    print(
        f"check_readme_figures self-test: {len(expected)} wrong figures found as expected",
        file=sys.stderr,
    )
    return 0


def main(args):
    if args == ["--self-test"]:
        return self_test()
    page = Path(args[0]).resolve() if args else ROOT / "README.md"
    bad = 0
    for line, written, targets in missing_figures(page):
        shown = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        print(f"{shown}:{line}: {written} not in {targets}")
        bad += 1
    print(f"check_readme_figures: {bad} figures missing from the results they link", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
