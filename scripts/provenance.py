#!/usr/bin/env python3
"""The one check before writing committed results, for the scripts (the mutation report,
the contention audit): the twin of `commit_for` in crates/support/src/provenance.rs, which
the Rust writers use. A unit test there runs this script on the same scratch repositories
and requires the two to agree; change both together.

    scripts/provenance.py DEST    prints the commit to stamp on results written to DEST

Where DEST lies in the top-level results/ of a git checkout, that checkout must be clean: no
tracked file outside results/ differs from HEAD, staged or not (untracked files do not
count, nor do committed results being rewritten). Then it prints the bare commit; otherwise
it exits 1 naming the changed files. Anywhere else nothing is refused and it prints the
current directory's commit, `-dirty` if that tree is not clean (`unknown` outside a
checkout). Results come from a clean commit: commit first, then regenerate.
"""

import os
import subprocess
import sys
from pathlib import Path

# `--no-optional-locks`: a status taken while others work in the same checkout must not hold
# its index lock.
STATUS = [
    "--no-optional-locks", "status", "--porcelain", "--untracked-files=no",
    "--", ":(top,exclude)results",
]
SHOWN = 10


class DirtyTree(Exception):
    """Committed results would have come from a tree that is not a commit."""

    def __init__(self, dest, top, files):
        self.files = files
        lines = [f"refusing to write {dest}: it is in the committed results of {top}, "]
        if files:
            lines[0] += "whose tracked files outside results/ differ from HEAD:"
            lines += [f"    {f}" for f in files[:SHOWN]]
            if len(files) > SHOWN:
                lines.append(f"    … and {len(files) - SHOWN} more")
        else:
            lines[0] += "and git could not say whether that checkout is clean"
        lines.append("Results come from a clean commit: commit these changes (or set them "
                     "aside) and run again, or write the results outside results/")
        super().__init__("\n".join(lines))


def _git(args, cwd=None):
    """git's standard output as printed, or None if it could not run or failed."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout if out.returncode == 0 else None


def changed_files(cwd=None):
    """The tracked files outside the top-level results/ that differ from HEAD, as
    `git status --porcelain` lists them, or None if git cannot say."""
    out = _git(STATUS, cwd)
    return None if out is None else [line for line in out.splitlines() if line.strip()]


def commit_in(cwd=None):
    """The short commit of the checkout containing `cwd`, `-dirty` unless clean."""
    head = _git(["rev-parse", "--short", "HEAD"], cwd)
    if head is None:
        return "unknown"
    files = changed_files(cwd)
    return head.strip() + ("-dirty" if files is None or files else "")


def results_checkout(dest):
    """The top directory of the checkout whose top-level results/ holds `dest` (which need
    not exist yet), or None."""
    dest = Path(dest)
    if not dest.is_absolute():
        dest = Path.cwd() / dest
    existing = dest
    while not existing.is_dir():
        if existing.parent == existing:
            return None
        existing = existing.parent
    real = Path(os.path.realpath(existing))
    for part in dest.relative_to(existing).parts:
        if part == "..":
            real = real.parent
        elif part != ".":
            real = real / part
    top = _git(["rev-parse", "--show-toplevel"], existing)
    if top is None:
        return None
    top = Path(os.path.realpath(top.strip()))
    results = top / "results"
    return top if real == results or results in real.parents else None


def commit_for(dest):
    """The commit to stamp on results written to `dest`; raises DirtyTree if `dest` is in a
    checkout's results/ and that checkout is not clean."""
    top = results_checkout(dest)
    if top is None:
        return commit_in()
    files = changed_files(top)
    head = _git(["rev-parse", "--short", "HEAD"], top)
    if files == [] and head is not None:
        return head.strip()
    raise DirtyTree(dest, top, files or [])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    try:
        print(commit_for(sys.argv[1]))
    except DirtyTree as refused:
        raise SystemExit(str(refused))
