#!/usr/bin/env python3
"""Writes the mutation-testing report from cargo-mutants' outcomes.

    scripts/mutants_report.py OUTCOMES_ROOT REPORT.md

OUTCOMES_ROOT holds one directory per crate, each with mutants.out/outcomes.json and
commit.txt (what scripts/mutants.sh writes under target/mutants/), a <crate>-doc directory
from the doctest pass over the mutants the plain pass missed and, for crates with loom
models, a <crate>-loom directory from the loom pass over the same: a mutant caught in either
counts as caught (and is counted "by doctests" or "by loom"). The kill rate is
caught ÷ (caught + missed): unviable mutants (they do not build) and excluded ones (never
generated, see .cargo/mutants.toml) count in neither; timeouts are listed apart.

Into the checkout's results/, the report is written only from a clean tree and only from
runs made on clean commits (scripts/provenance.py; a crate whose commit.txt is `-dirty`
must be run again): it names the commit it was written at, and each crate's row the commit
its mutants ran on.
"""

import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import provenance  # noqa: E402 (scripts/provenance.py, beside this file)

# What commit.txt says of a run on a tree that was not a commit (`+ uncommitted changes`:
# mutants.sh before it refused dirty trees).
DIRTY_RUN = ("-dirty", "+ uncommitted changes")

KINDS = {
    "CaughtMutant": "caught",
    "MissedMutant": "missed",
    "Unviable": "unviable",
    "Timeout": "timeout",
}


def rate(c):
    judged = c["caught"] + c["missed"]
    return f"{100 * c['caught'] / judged:.1f} %" if judged else "—"


def outcomes_of(path, with_previous=True):
    """(data, [(kind, file, name)]) of one outcomes.json, without the baseline, plus the
    mutants an earlier run caught or found unviable (`--iterate` lists them in
    previously_caught.txt and does not test them again)."""
    data = json.loads(path.read_text())
    result = []
    previously = path.parent / "previously_caught.txt"
    if with_previous and previously.exists():
        # Caught *or unviable* before (what --iterate skips): take each one's outcome from
        # the earlier runs — the outcomes mutants.sh saved under history/ before each
        # --iterate, then mutants.out.old — the latest run that tested it winning.
        crate_dir = path.parent.parent
        earlier = {}
        for older in sorted((crate_dir / "history").glob("*.json"), key=lambda p: int(p.stem)) + [
            crate_dir / "mutants.out.old" / "outcomes.json"
        ]:
            if older.exists():
                for kind, file, name in outcomes_of(older, False)[1]:
                    earlier[name] = (kind, file)
        for name in filter(None, map(str.strip, previously.read_text().splitlines())):
            kind, file = earlier.get(name, ("caught", name.split(":", 1)[0]))
            result.append((kind, file, name))
    for o in data["outcomes"]:
        if not isinstance(o["scenario"], dict):
            continue  # the baseline
        mutant = o["scenario"]["Mutant"]
        kind = KINDS.get(o["summary"])
        if kind is None:
            raise SystemExit(f"{path}: unknown outcome {o['summary']!r}")
        result.append((kind, mutant["file"], mutant["name"]))
    return data, result


def main(root, out):
    # Before reading anything: committed results come from a clean commit.
    try:
        written_at = provenance.commit_for(out)
    except provenance.DirtyTree as refused:
        raise SystemExit(f"mutants_report.py: {refused}")
    crates = {}
    for outcomes in sorted(Path(root).glob("*/mutants.out/outcomes.json")):
        crate_dir = outcomes.parent.parent
        if crate_dir.name.endswith(("-loom", "-doc")):
            continue
        data, results = outcomes_of(outcomes)
        # Every run's outcomes, oldest first, then this run's: the latest outcome of each
        # mutant wins, so a mutant an `--iterate -f FILE` run did not retest keeps the outcome
        # of the last run that did (missed stays missed).
        runs = sorted((crate_dir / "history").glob("*.json"), key=lambda p: int(p.stem))
        runs.append(crate_dir / "mutants.out.old" / "outcomes.json")
        earlier = [
            r for older in runs if older.exists() for r in outcomes_of(older, False)[1]
        ]
        results = earlier + results
        listed = crate_dir / "list.txt"
        if listed.exists():
            # The mutants of the tree as it is now (mutants.sh lists them after each run):
            # an --iterate run retests the ones whose names (lines) moved, so the earlier
            # names of those are stale, and are dropped here.
            now = set(filter(None, map(str.strip, listed.read_text().splitlines())))
            newest = {}
            for kind, file, name in results:
                newest[name] = (kind, file, name)  # the latest run's outcome comes last
            untested = sorted(now - newest.keys())
            if untested:
                print(f"{crate_dir.name}: {len(untested)} mutants of the tree never tested, "
                      f"e.g. {untested[0]} (run mutants.sh {crate_dir.name} -- --iterate)",
                      file=sys.stderr)
            results = [newest[name] for name in now if name in newest]
        def caught_in(suffix):
            path = crate_dir.parent / f"{crate_dir.name}-{suffix}" / "mutants.out" / "outcomes.json"
            if not path.exists():
                return path, set()
            return path, {name for kind, _, name in outcomes_of(path)[1] if kind == "caught"}

        doc, by_doc = caught_in("doc")
        loom, by_loom = caught_in("loom")
        per_file = defaultdict(lambda: defaultdict(int))
        missed = []
        for kind, file, name in results:
            if kind in ("missed", "timeout") and name in by_doc:
                kind = "caught"
                per_file[file]["by doctests"] += 1
            elif kind in ("missed", "timeout") and name in by_loom:
                kind = "caught"
                per_file[file]["by loom"] += 1
            per_file[file][kind] += 1
            if kind in ("missed", "timeout"):
                missed.append((kind, name))
        commit_file = crate_dir / "commit.txt"
        commit = commit_file.read_text().strip() if commit_file.exists() else "unknown"
        crates[crate_dir.name] = (data, per_file, missed, commit, loom.exists(), doc.exists())
    if not crates:
        raise SystemExit(f"no */mutants.out/outcomes.json under {root}")
    dirty = [f"{crate} ({c[3]})" for crate, c in crates.items() if c[3].endswith(DIRTY_RUN)]
    if dirty and provenance.results_checkout(out) is not None:
        raise SystemExit(
            f"mutants_report.py: refusing to write {out}: these crates' mutants ran on a tree "
            f"that was not a commit: {', '.join(dirty)}. Results come from a clean commit: "
            "run scripts/mutants.sh on them again from one."
        )

    lines = [
        "# Mutation testing",
        "",
        "Generated by `scripts/mutants.sh` (cargo-mutants) and `scripts/mutants_report.py`",
        f"(this report at commit `{written_at}`; each crate's row names the commit its mutants",
        "ran on).",
        "Kill rate = caught ÷ (caught + missed); unviable mutants do not build and count in",
        "neither. Each crate's mutants were tested with its own tests and the packages",
        "`scripts/mutants.sh` lists for it (cargo nextest, which runs no doctests); the",
        "mutants that survived were tested again with the crate's doctests (\"by doctests\":",
        "caught only there) and, for crates with loom models, those in the files the models",
        "cover under loom (\"by loom\"). Mutants excluded in `.cargo/mutants.toml` (each with",
        "its reason) are not generated. Crates not listed below have not been run yet.",
        "",
        "| crate | commit | mutants | caught | (by doctests) | (by loom) | missed | unviable | timeout | kill rate |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for crate, (data, per_file, _, commit, loom, doc) in crates.items():
        total = defaultdict(int)
        for counts in per_file.values():
            for k, v in counts.items():
                total[k] += v
        n = sum(v for k, v in total.items() if k not in ("by loom", "by doctests"))
        by_loom = str(total["by loom"]) if loom else "not run"
        by_doc = str(total["by doctests"]) if doc else "not run"
        lines.append(
            f"| {crate} | `{commit}` | {n} | {total['caught']} | {by_doc} | {by_loom} | "
            f"{total['missed']} | {total['unviable']} | {total['timeout']} | {rate(total)} |"
        )
    for crate, (data, per_file, missed, _, _, _) in crates.items():
        lines += [
            "",
            f"## {crate}",
            "",
            f"cargo-mutants {data.get('cargo_mutants_version', '?')}, "
            f"{data.get('start_time', '?')} – {data.get('end_time', '?')}.",
            "",
            "| file | caught | (by doctests) | (by loom) | missed | unviable | timeout | kill rate |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for file, c in sorted(per_file.items()):
            lines.append(
                f"| `{file}` | {c['caught']} | {c['by doctests']} | {c['by loom']} | {c['missed']} | "
                f"{c['unviable']} | {c['timeout']} | {rate(c)} |"
            )
        if missed:
            lines += ["", "Missed and timed out:", ""]
            lines += [f"- {kind}: `{name}`" for kind, name in sorted(missed)]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
