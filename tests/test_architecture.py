"""The shape of the code, declared and checked: the layers (a module imports only from its own layer
and the layers below it, lazy imports included), no import cycle, what evaluators and the statistics
may import, imports inside functions only where a reason is given, modules small enough to read in
one sitting, at most eight top-level modules in runner/, and docs/architecture.md naming every package.

Each rule is checked by a function that takes the import graph, so the tests below can also show the
rule failing on a graph with one forbidden import added."""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("runner", "evaluators")
MAX_LINES = 450
MAX_TOP_LEVEL_MODULES = 8

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("contract", ("runner.contract",)),
    ("files", ("runner.files",)),
    ("statistics", ("runner.stats",)),
    ("services", ("runner.backends", "runner.quant", "runner.references", "runner.cache", "runner.tracking",
                  "runner.reports", "evaluators")),
    ("sweep", ("runner.sweep",)),
    ("config", ("runner.config",)),
    ("job", ("runner.job",)),
    ("commands", ("runner.commands", "runner")),
]
"""Bottom to top. ``runner`` itself holds only the shims of the documented commands (``python -m runner.plan``...)."""

ONLY_FROM = {
    "runner.contract": ("runner.contract",),
    "runner.files": ("runner.contract", "runner.files"),
    "runner.stats": ("runner.contract", "runner.stats"),
    "evaluators": ("runner.contract", "runner.files", "evaluators"),
}
"""Packages that may import from the project only these (the statistics are pure; tasks see the contract)."""

HEAVY = {
    "torch", "transformers", "mlflow", "datasets", "modelopt", "lm_eval", "tensorrt_llm", "openai",  # slow or optional
    "scipy", "numpy", "pandas", "matplotlib", "huggingface_hub", "tqdm", "ruamel", "yaml", "psutil", "jsonschema",
    "httpx", "httpx2", "lmformatenforcer", "rouge_score", "math_verify", "sacrebleu",
}
"""Libraries a function may import where it needs them: slow to import (``--help`` stays under a second) or optional."""

STATS_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("data", ("runner.stats.data",)),
    ("numerics", ("runner.stats.numerics", "runner.stats.multiple_testing")),
    ("rules", ("runner.stats.rules",)),
    ("dispatch", ("runner.stats.dispatch", "runner.stats.decision", "runner.stats.decision_text", "runner.stats.settings",
                  "runner.stats.advising", "runner.stats.acceptance",
                  "runner.stats.conclusion")),
    ("planning", ("runner.stats.planning",)),
]
"""Inside the statistics, bottom to top: a decision goes dispatcher -> one rule -> its numerics -> shared numerics
-> data types, never back up; planning reads the rules. A rule imports no other rule (a wrapper takes its inner rule
as a value)."""

RULE_PROTOCOL = "runner.stats.rules.base"
"""The protocol every rule answers (and the case it reads): the one module of rules/ a rule may import."""

RUNTIME_FORBIDDEN = ("benchmarks", "tests")
"""What the runtime package never imports: the calibration grid and the tests live outside it."""

CHILD_PROGRAMS = {"evaluators.scoring.sandbox_child"}
"""Programs run as their own process (the sandbox's child imports what the guarded step needs, when it needs it)."""


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


@functools.cache
def _project_graph() -> dict[str, frozenset[str]]:
    mods = modules()
    return {m: frozenset(imports(p, m, set(mods))) for m, p in mods.items()}


def graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports: the files are read and walked once per test process (nine tests
    ask; the rule tests add edges to their own copy)."""
    return {m: set(found) for m, found in _project_graph().items()}


def owner(module: str, table) -> str | None:
    """The longest prefix of ``module`` among the table's packages."""
    best = None
    for prefix in table:
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best):
                best = prefix
    return best


def layer_of(module: str) -> int:
    prefixes = {p: i for i, (_, ps) in enumerate(LAYERS) for p in ps}
    return prefixes[owner(module, prefixes)]


def upward_imports(g: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
                  for m, targets in g.items() for t in targets if layer_of(t) > layer_of(m))


def stats_layer_of(module: str) -> int:
    prefixes = {p: i for i, (_, ps) in enumerate(STATS_LAYERS) for p in ps}
    return prefixes[owner(module, prefixes)]


def stats_upward_imports(g: dict[str, set[str]]) -> list[str]:
    """Imports inside runner/stats from a lower layer to a higher one, and from one rule to another."""
    inside = {m: t for m, t in g.items() if m.startswith("runner.stats.")}
    out = [f"{m} ({STATS_LAYERS[stats_layer_of(m)][0]}) imports {t} ({STATS_LAYERS[stats_layer_of(t)][0]})"
           for m, targets in inside.items() for t in targets
           if t.startswith("runner.stats.") and stats_layer_of(t) > stats_layer_of(m)]
    out += [f"{m} (rule) imports {t} (rule)" for m, targets in inside.items() for t in targets
            if m.startswith("runner.stats.rules.") and t.startswith("runner.stats.rules.") and t != RULE_PROTOCOL]
    return sorted(out)


def runtime_imports_outside(paths: dict[str, Path]) -> list[str]:
    """Modules of the runtime package that import the calibration grid, a benchmark or a test (any depth)."""
    out = []
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text())):
            found = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            out += [f"{name} imports {f}" for f in found if f.split(".")[0] in RUNTIME_FORBIDDEN]
    return sorted(out)


def calibration_modules(names) -> list[str]:
    """Calibration code inside the runtime package: a module or package of runner/ named for it."""
    return sorted(m for m in names if m.startswith("runner.stats") and "calibration" in m.split("."))


def forbidden_imports(g: dict[str, set[str]]) -> list[str]:
    out = []
    for m, targets in g.items():
        rule = owner(m, ONLY_FROM)
        if rule is None:
            continue
        out += [f"{m} imports {t} (allowed: {', '.join(ONLY_FROM[rule])})" for t in targets
                if owner(t, ONLY_FROM[rule]) is None]
    return sorted(out)


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
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
                found.append(sorted(comp))

    for m in list(g):
        if m not in index:
            visit(m)
    return found


def lazy_imports_without_reason(path: Path) -> list[str]:
    """Imports inside functions of anything but a heavy library, without a ``# lazy: why`` comment."""
    text = path.read_text()
    lines = text.splitlines()
    out = []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if all(n.split(".")[0] in HEAVY for n in names):
                continue
            if "# lazy:" in lines[node.lineno - 1] or isinstance(node, ast.ImportFrom) and node.level:
                continue
            out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return out


# ------------------------------------------------------------------------------------------- the rules
def test_no_layer_imports_a_higher_one_lazy_imports_included():
    assert upward_imports(graph()) == []


def test_statistics_contract_files_and_evaluators_import_only_what_they_may():
    assert forbidden_imports(graph()) == []


def test_no_import_cycles_lazy_imports_included():
    assert cycles(graph()) == []


def test_statistics_go_down_once_data_numerics_rules_dispatch_planning():
    assert stats_upward_imports(graph()) == []
    assert [m for m in modules() if m.startswith("runner.stats.")
            and owner(m, {p for _, ps in STATS_LAYERS for p in ps}) is None] == []


def test_runner_holds_no_calibration_code_and_imports_none():
    mods = modules()
    assert calibration_modules(mods) == []
    assert runtime_imports_outside({m: p for m, p in mods.items() if m.startswith("runner")}) == []


def test_every_module_belongs_to_a_layer():
    prefixes = {p for _, ps in LAYERS for p in ps}
    assert [m for m in modules() if owner(m, prefixes) is None] == []


def test_imports_inside_functions_are_heavy_libraries_or_say_why():
    found = []
    for name, path in modules().items():
        if name not in CHILD_PROGRAMS:
            found += lazy_imports_without_reason(path)
    assert found == []


def test_modules_are_small_enough_to_read_in_one_sitting():
    sizes = {m: len(p.read_text().splitlines()) for m, p in modules().items()}
    assert [(m, n) for m, n in sizes.items() if n > MAX_LINES] == []


def test_runner_has_few_top_level_modules_each_a_documented_command_or_the_package():
    top = sorted(p.stem for p in (ROOT / "runner").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    for stem in top:
        if stem in ("__init__", "__main__"):
            continue
        text = (ROOT / "runner" / f"{stem}.py").read_text()
        assert f"runner.commands.{stem}" in text, f"runner/{stem}.py is not a shim of runner.commands.{stem}"
        assert len(text.splitlines()) <= 10, f"runner/{stem}.py holds more than a shim"


# -------------------------------------------------------------------- the rules fail when broken
def test_the_layer_rule_fails_on_an_added_upward_import():
    g = graph()
    g["runner.stats.data.verdicts"] = g["runner.stats.data.verdicts"] | {"runner.job.flow"}
    g["runner.contract.requests"] = g["runner.contract.requests"] | {"runner.backends.models"}
    assert upward_imports(g) == [
        "runner.contract.requests (contract) imports runner.backends.models (services)",
        "runner.stats.data.verdicts (statistics) imports runner.job.flow (job)",
    ]


def test_the_purity_rules_fail_on_an_added_import():
    g = graph()
    g["evaluators.tasks.mmlu"] = g["evaluators.tasks.mmlu"] | {"runner.backends.prompting"}
    g["runner.stats.decision"] = g["runner.stats.decision"] | {"runner.files.paths"}
    assert forbidden_imports(g) == [
        "evaluators.tasks.mmlu imports runner.backends.prompting (allowed: runner.contract, runner.files, evaluators)",
        "runner.stats.decision imports runner.files.paths (allowed: runner.contract, runner.stats)",
    ]


def test_the_statistics_layer_rule_fails_on_an_upward_or_sideways_import():
    g = graph()
    g["runner.stats.data.claims"] = g["runner.stats.data.claims"] | {"runner.stats.numerics.normal"}
    g["runner.stats.numerics.ztest"] = g["runner.stats.numerics.ztest"] | {"runner.stats.dispatch"}
    g["runner.stats.rules.corpus"] = g["runner.stats.rules.corpus"] | {"runner.stats.rules.paired_continuous"}
    assert stats_upward_imports(g) == [
        "runner.stats.data.claims (data) imports runner.stats.numerics.normal (numerics)",
        "runner.stats.numerics.ztest (numerics) imports runner.stats.dispatch (dispatch)",
        "runner.stats.rules.corpus (rule) imports runner.stats.rules.paired_continuous (rule)",
    ]


def test_the_calibration_rule_fails_on_calibration_code_in_runner(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from benchmarks.calibration_grid import cells\n")
    assert runtime_imports_outside({"runner.stats.rules.probe": probe}) == [
        "runner.stats.rules.probe imports benchmarks.calibration_grid"]
    assert calibration_modules(["runner.stats.binary.calibration", "runner.stats.rules.corpus"]) == [
        "runner.stats.binary.calibration"]


def test_the_cycle_rule_fails_on_an_added_cycle():
    g = graph()
    g["runner.job.state"] = g["runner.job.state"] | {"runner.job.flow"}
    assert any({"runner.job.flow", "runner.job.state"} <= set(c) for c in cycles(g))


def test_the_lazy_import_rule_fails_on_an_unexplained_one(tmp_path):
    sneaky = ROOT / "runner" / "contract" / "_probe_lazy.py"
    sneaky.write_text("def f():\n    from runner.contract import errors\n    import numpy\n\n"
                      "def g():\n    from runner.contract import spec  # lazy: a reason\n")
    try:
        assert lazy_imports_without_reason(sneaky) == [
            "runner/contract/_probe_lazy.py:2: from runner.contract import errors"]
    finally:
        sneaky.unlink()


# ------------------------------------------------------------------------- the documented layout
def documented_tree() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    match = re.search(r"<!-- tree -->\n```\n(.*?)```\n<!-- /tree -->", text, re.S)
    assert match, "docs/architecture.md has no generated tree block (<!-- tree --> ... <!-- /tree -->)"
    return match.group(1)


def generated_tree() -> str:
    """The packages of runner/ and evaluators/ by layer, each with its modules: what docs/architecture.md shows."""
    mods = modules()
    every = {p for _, ps in LAYERS for p in ps}
    lines = []
    for name, prefixes in reversed(LAYERS):
        lines.append(f"{name}:")
        for prefix in prefixes:
            if prefix == "runner":
                members = sorted(m.split(".")[1] for m in mods if m.count(".") == 1 and m.startswith("runner.")
                                 and owner(m, every) == "runner")
                lines.append(f"  runner/  {' '.join(members)}  (the documented commands' shims)")
                continue
            members = sorted(m[len(prefix) + 1:] for m in mods if m.startswith(prefix + ".")
                             and owner(m, every) == prefix)
            folders: dict[str, list[str]] = {}
            for member in members:
                if member.replace(".", "/") + "/__init__.py" in packages_of(prefix):
                    folders.setdefault(member, [])
                else:
                    parent, _, leaf = member.rpartition(".")
                    folders.setdefault(parent, []).append(leaf)
            for parent in sorted(folders):
                indent = "    " + "  " * parent.count(".") if parent else "  "
                folder = (prefix + ("." + parent if parent else "")).replace(".", "/") + "/"
                shown = folder if not parent else parent.rpartition(".")[2] + "/"
                lines.append(f"{indent}{shown}  {' '.join(folders[parent])}".rstrip())
    return "\n".join(lines) + "\n"


def packages_of(prefix: str) -> set[str]:
    """The ``__init__.py`` paths below ``prefix``'s folder, relative to it."""
    base = ROOT / prefix.replace(".", "/")
    return {str(p.relative_to(base)) for p in base.rglob("__init__.py")}


def test_docs_architecture_shows_the_real_tree_and_layers():
    """Regenerate with: python tests/test_architecture.py > /tmp/tree.txt, and paste it into docs/architecture.md."""
    assert documented_tree() == generated_tree()


def test_tests_mirror_the_packages():
    """tests/<package>/ for the code in runner/<package>/ (or evaluators/<package>/); helpers in tests/helpers/."""
    packages = {p.name for base in ("runner", "evaluators") for p in (ROOT / base).iterdir()
                if p.is_dir() and (p / "__init__.py").exists()}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name not in ("__pycache__",)}
    unknown = folders - packages - {"helpers", "data"}
    assert unknown == set(), f"test folders without a package: {sorted(unknown)}"
    loose = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert loose == ["test_architecture.py"], f"tests outside a package folder: {loose}"


if __name__ == "__main__":
    sys.stdout.write(generated_tree())
