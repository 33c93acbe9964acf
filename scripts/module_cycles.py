#!/usr/bin/env python3
"""Finds module cycles in every crate of the workspace.

    scripts/module_cycles.py [CRATE_DIR...]     default: every member with a src/

Builds, per crate, a graph of its file modules (`a.rs`, `a/mod.rs`; inline modules such as
`mod tests { … }` belong to their file) with an edge A -> B when A names an item of B through
`crate::…`, `super::…`, `self::…` or a child module's name, in a `use` line or inline in code.
A path through a re-export (`pub use x::Y` in `lib.rs`, then `crate::Y`) is followed to the
module that defines the item, so importing through the crate root is not counted as a
dependency on the root. Then prints the strongly connected components (Tarjan) of more than
one module: each is a cycle. Exits 1 if it found any.

A module that uses its own ancestor (`use super::Policy` in `policy/random.rs`, while
`policy/mod.rs` names `random::Random`) is the usual shape of a Rust module tree: the parent
is the children's vocabulary and their facade. Such edges are left out of the cycle search
(a child's edge to its ancestor cannot close a loop through siblings), and the strongly
connected components they would form are listed apart as "nested", for information.
Likewise the edges of `#[cfg(test)]` modules (a unit test may build the crate's front door to
test a part): a cycle they alone close is listed as "test-only", and not counted.

This is a reading of the source text, not of the compiler's resolution: it strips comments and
strings, knows `use` trees with braces, globs and renames, and item definitions by keyword. A
name it cannot resolve further is charged to the module it reached, which errs towards
reporting an edge rather than missing one.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_RE = re.compile(
    r"\b(?:struct|enum|fn|trait|type|const|static|union|macro_rules!)\s+(" + IDENT + ")"
)
KEYWORDS = {"crate", "super", "self", "Self"}


def strip(text):
    """Removes comments, string and char literals, keeping line structure."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 12]) or re.match(r"'\\u\{[0-9a-fA-F]+\}'", text[i:i + 12]):
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Module:
    def __init__(self, path, file, parent):
        self.path = path  # tuple of names under the crate root
        self.file = file  # the file this module's text lives in
        self.parent = parent
        self.children = {}
        self.items = set()
        self.imports = {}  # name -> absolute path (tuple), from `use`
        self.globs = []  # absolute paths of `use x::*`
        self.refs = []  # absolute paths named by this module
        # Compiled for tests only: an inline module under `#[cfg(test)]` (or inside one).
        self.test_only = bool(parent and parent.test_only and parent.file == file)


def split_use_tree(tree):
    """Expands `a::{b, c::{d as e, *}}` into [(segments, alias)]."""
    tree = re.sub(r"\s*::\s*", "::", tree.strip())
    results = []

    def walk(prefix, s):
        depth, start, parts = 0, 0, []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        for part in filter(None, parts):
            part = part.strip()
            brace = part.find("{")
            if brace >= 0:
                head = [x.strip() for x in part[:brace].split("::") if x.strip()]
                walk(prefix + head, part[brace + 1:part.rindex("}")])
            else:
                alias = None
                m = re.match(r"^(.*?)\s+as\s+(" + IDENT + r")$", part.strip())
                if m:
                    part, alias = m.group(1), m.group(2)
                segs = prefix + [x.strip() for x in part.split("::") if x.strip()]
                results.append((segs, alias))

    walk([], tree.lstrip(":"))
    return results


class Crate:
    def __init__(self, src):
        self.src = src
        self.modules = {}
        root_file = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
        self.load((), root_file, None, is_root=True)
        # Binaries under src/bin/<name>/main.rs or src/bin/<name>.rs are crates of their own.

    def load(self, path, file, parent, is_root=False):
        text = strip(file.read_text())
        mod = Module(path, file, parent)
        self.modules[path] = mod
        if parent:
            parent.children[path[-1]] = mod
        self.scan(mod, text, file, is_root)

    def child_file(self, file, name, is_root_or_mod):
        base = file.parent if is_root_or_mod else file.parent / file.stem
        for cand in (base / f"{name}.rs", base / name / "mod.rs"):
            if cand.exists():
                return cand
        return None

    def scan(self, mod, text, file, is_root):
        """Walks `text` tracking inline `mod x { … }` scopes by brace depth."""
        # `pub(in crate::a)` restricts visibility; it names no item to depend on.
        text = re.sub(r"\bpub\s*\(\s*in\s+[A-Za-z_:\s]+\)", "pub(restricted)", text)
        is_dir_owner = is_root or file.name == "mod.rs"
        # Stack of (module, brace depth at which its body ends).
        stack = [(mod, -1)]
        depth = 0
        pos = 0
        token = re.compile(
            r"(#\[path\s*=\s*[^\]]*\]\s*)?\bmod\s+(" + IDENT + r")\s*([;{])|[{}]|\buse\s+([^;]*);"
        )
        spans = []  # (start, end, module) text spans for inline path scanning
        last = 0
        for m in token.finditer(text):
            cur = stack[-1][0]
            spans.append((last, m.start(), cur))
            last = m.end()
            if m.group(2):
                name, kind = m.group(2), m.group(3)
                cur.items.add(name)
                if kind == ";":
                    owner_is_dir = is_dir_owner and cur is mod
                    child = self.child_file(file if cur is mod else file, name, owner_is_dir)
                    if cur is not mod:
                        # `mod x;` inside an inline module: rare, resolve beside the file
                        child = None
                    if child:
                        self.load(cur.path + (name,), child, cur)
                else:
                    inline = Module(cur.path + (name,), file, cur)
                    before = text[max(0, m.start() - 200):m.start()]
                    if re.search(r"#\[cfg\([^\]]*\btest\b[^\]]*\)\]\s*(#\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s+)?$", before):
                        inline.test_only = True
                    self.modules[inline.path] = inline
                    cur.children[name] = inline
                    depth += 1
                    stack.append((inline, depth))
            elif m.group(0) == "{":
                depth += 1
            elif m.group(0) == "}":
                if stack[-1][1] == depth:
                    stack.pop()
                depth -= 1
            elif m.group(4) is not None:
                for segs, alias in split_use_tree(m.group(4)):
                    if not segs:
                        continue
                    if segs[-1] == "*":
                        cur.globs.append(("rel", cur, segs[:-1]))
                        cur.refs.append(("rel", cur, segs[:-1]))
                        continue
                    if segs[-1] == "self":
                        segs = segs[:-1]
                    name = alias or segs[-1]
                    if name != "_":
                        cur.imports[name] = ("rel", cur, segs)
                    cur.refs.append(("rel", cur, segs))
        spans.append((last, len(text), stack[-1][0]))
        for start, end, cur in spans:
            chunk = text[start:end]
            for item in ITEM_RE.finditer(chunk):
                cur.items.add(item.group(1))
            for p in re.finditer(r"(?<![A-Za-z0-9_:])((?:" + IDENT + r")(?:\s*::\s*" + IDENT + r")+)", chunk):
                segs = [s.strip() for s in p.group(1).split("::")]
                cur.refs.append(("rel", cur, segs))

    # --- resolution -----------------------------------------------------------------------

    def absolute(self, cur, segs):
        """A relative path as written in `cur` -> absolute segments, or None if external."""
        if not segs:
            return None
        first = segs[0]
        if first == "crate":
            return list(segs[1:])
        if first == "self":
            return list(cur.path) + list(segs[1:])
        if first == "super":
            base = list(cur.path)
            rest = list(segs)
            while rest and rest[0] == "super":
                if not base:
                    return None
                base.pop()
                rest.pop(0)
            return base + rest
        if first in cur.children:
            return list(cur.path) + list(segs)
        if first in cur.imports and first not in KEYWORDS:
            target = cur.imports[first]
            if target[2] and target[2][0] != first or target[1] is not cur:
                base = self.absolute(target[1], target[2])
                if base is not None:
                    return base + list(segs[1:])
        return None

    def resolve(self, segs, seen=0):
        """Absolute segments -> the module that defines the named item."""
        mod = self.modules[()]
        i = 0
        while i < len(segs) and seen < 20:
            s = segs[i]
            if s in mod.children:
                mod = mod.children[s]
                i += 1
                continue
            if s in mod.imports and s not in mod.items:
                target = self.absolute(mod, mod.imports[s][2])
                if target is not None and target != list(mod.path) + [s]:
                    return self.resolve(target + segs[i + 1:], seen + 1)
                return mod
            if s not in mod.items:
                for glob in mod.globs:
                    base = self.absolute(glob[1], glob[2])
                    if base is None:
                        continue
                    target_mod = self.resolve(base, seen + 1)
                    if s in target_mod.items or s in target_mod.children or s in target_mod.imports:
                        return self.resolve(list(target_mod.path) + segs[i:], seen + 1)
            return mod
        return mod

    def file_of(self, mod):
        while mod.parent and mod.parent.file == mod.file:
            mod = mod.parent
        return mod

    def graph(self, tests):
        """File-module edges; with `tests`, also those only `#[cfg(test)]` modules make."""
        edges = {}
        for mod in self.modules.values():
            a = self.file_of(mod)
            edges.setdefault(self.name(a), set())
            if mod.test_only and not tests:
                continue
            for _, cur, segs in mod.refs:
                target = self.absolute(cur, segs)
                if target is None:
                    continue
                b = self.file_of(self.resolve(target))
                if a is not b:
                    edges[self.name(a)].add(self.name(b))
        return edges

    def name(self, mod):
        return str(mod.file.relative_to(ROOT))

    def upward(self, edges):
        """The edges from a module to one of its ancestors."""
        path = {self.name(self.file_of(m)): self.file_of(m).path for m in self.modules.values()}
        return {
            (a, b)
            for a, targets in edges.items()
            for b in targets
            if path[b] == path[a][: len(path[b])]
        }


def sccs(edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def crate_roots(dirs):
    for d in dirs:
        src = d / "src"
        if (src / "lib.rs").exists() or (src / "main.rs").exists():
            yield src
        bins = src / "bin"
        if bins.is_dir():
            for b in sorted(bins.iterdir()):
                if b.is_dir() and (b / "main.rs").exists():
                    yield b
                elif b.suffix == ".rs":
                    yield b


def main():
    if len(sys.argv) > 1:
        dirs = [Path(a).resolve() for a in sys.argv[1:]]
    else:
        dirs = sorted(p.parent for p in ROOT.glob("crates/*/Cargo.toml"))
        dirs += [ROOT / "benches", ROOT / "tests"]
    found = 0
    for src in crate_roots(dirs):
        if src.is_file():
            continue  # a one-file binary has no modules
        crate = Crate.__new__(Crate)
        crate.src = src
        crate.modules = {}
        root = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
        crate.load((), root, None, is_root=True)
        edges = crate.graph(tests=False)
        up = crate.upward(edges)
        strict = {a: {b for b in bs if (a, b) not in up} for a, bs in edges.items()}
        cycles = sccs(strict)
        nested = [c for c in sccs(edges) if not any(set(c) <= set(k) for k in cycles)]
        with_tests = crate.graph(tests=True)
        up_t = crate.upward(with_tests)
        strict_t = {a: {b for b in bs if (a, b) not in up_t} for a, bs in with_tests.items()}
        test_only = [c for c in sccs(strict_t) if not any(set(c) <= set(k) for k in cycles)]
        rel = src.relative_to(ROOT)
        files = len({m.file for m in crate.modules.values()})
        for c in nested:
            print(f"{rel}: nested (a module and its own submodules): " + " <-> ".join(str(Path(x).relative_to(rel)) for x in c))
        for c in test_only:
            print(f"{rel}: test-only (closed by a #[cfg(test)] module's use): " + " <-> ".join(str(Path(x).relative_to(rel)) for x in c))
        if cycles:
            for c in cycles:
                found += 1
                print(f"{rel}: cycle of {len(c)}: " + " <-> ".join(str(Path(x).relative_to(rel)) for x in c))
                for a in c:
                    for b in sorted(strict[a]):
                        if b in c:
                            print(f"    {Path(a).relative_to(rel)} -> {Path(b).relative_to(rel)}")
        else:
            print(f"{rel}: no cycle ({files} files, {sum(map(len, edges.values()))} edges)")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
