"""The shape of the code: no import cycle between modules (lazy imports inside functions included),
and the small, single-idea modules the design asks for."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("runner", "evaluators")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every project module ``path`` imports, at any depth of the file."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + ".") and t not in PACKAGES:
                found.add(t)
    return found


def test_no_import_cycles_lazy_imports_included():
    mods = modules()
    graph = {m: imports(p, m, set(mods)) for m, p in mods.items()}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    assert cycles == []


def test_modules_are_small_enough_to_read_in_one_sitting():
    sizes = {m: len(p.read_text().splitlines()) for m, p in modules().items()}
    assert max(sizes.values()) <= 560, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
