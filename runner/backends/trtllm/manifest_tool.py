"""Signature manifests of TensorRT-LLM releases, read from a source checkout by AST (nothing imported).

A manifest lists what the runner's TensorRT-LLM backends rely on: the keyword fields (and literal
defaults) of the LLM argument classes, ``BuildConfig``, ``QuantConfig``, ``CalibConfig``,
``KvCacheConfig``, ``SamplingParams`` and ``GuidedDecodingParams``; the ``QuantAlgo`` members; the
names ``tensorrt_llm`` and ``tensorrt_llm.llmapi`` export; which modules exist; and the KV cache
dtypes the PyTorch backend syncs into its quant config. The test double is generated from these
files (``tests/helpers/trtllm_double.py``), so a renamed or removed keyword upstream fails a test.

    python -m runner.backends.trtllm.manifest_tool /path/to/TensorRT-LLM --commit <sha> \\
        --out runner/backends/trtllm/manifests/<release>.json

Classes are found by name in any module under ``tensorrt_llm/`` (their home moved between releases);
fields come from annotated class attributes (pydantic models and dataclasses), bases included,
leaving out private names, ``ClassVar``\\ s, ``PrivateAttr``\\ s and ``field(init=False)``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

FORMAT = 1
CLASSES = ("BaseLlmArgs", "TrtLlmArgs", "TorchLlmArgs", "BuildConfig", "QuantConfig", "CalibConfig",
           "KvCacheConfig", "SamplingParams", "GuidedDecodingParams")
ENUMS = ("QuantAlgo",)
EXPORTING = ("tensorrt_llm/__init__.py", "tensorrt_llm/llmapi/__init__.py")
MODULES = ("tensorrt_llm._tensorrt_engine", "tensorrt_llm.llmapi", "tensorrt_llm.sampling_params",
           "tensorrt_llm.evaluate.mmlu")
KV_SYNC_FUNCTION = "sync_quant_config_with_kv_cache_config_dtype"
NOT_LITERAL = "<expr>"  # a default that is not a Python literal (a factory, an enum member, a call)
REQUIRED = "<required>"


# ----------------------------------------------------------------------------- reading
def parse_tree(root: Path) -> dict[str, ast.Module]:
    """Every parsable module under ``root/tensorrt_llm`` by its path relative to ``root``."""
    modules: dict[str, ast.Module] = {}
    for path in sorted((root / "tensorrt_llm").rglob("*.py")):
        try:
            modules[path.relative_to(root).as_posix()] = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
    return modules


def class_defs(modules: dict[str, ast.Module]) -> dict[str, list[tuple[str, ast.ClassDef]]]:
    """Top-level classes by name, with the file each was found in."""
    found: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    for path, tree in modules.items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append((path, node))
    return found


def _is_classvar(annotation: ast.expr) -> bool:
    node = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    return isinstance(node, (ast.Name, ast.Attribute)) and (getattr(node, "id", None) or node.attr) == "ClassVar"


def _call_name(node: Optional[ast.expr]) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return ""


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def _default(value: Optional[ast.expr]) -> Any:
    """The default an annotated attribute declares: a literal, NOT_LITERAL or REQUIRED."""
    if value is None:
        return REQUIRED
    if _call_name(value) in ("Field", "PydanticField", "field"):
        call = value  # type: ignore[assignment]
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        if "default" in keywords:
            return _literal(keywords["default"])
        if "default_factory" in keywords:
            return NOT_LITERAL
        if call.args and not (isinstance(call.args[0], ast.Constant) and call.args[0].value is Ellipsis):
            return _literal(call.args[0])
        return REQUIRED
    return _literal(value)


def own_fields(node: ast.ClassDef) -> dict[str, Any]:
    """Keyword fields a class body declares (in order), with their defaults."""
    fields: dict[str, Any] = {}
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        name = stmt.target.id
        if name.startswith("_") or name == "model_config" or _is_classvar(stmt.annotation):
            continue
        if _call_name(stmt.value) == "PrivateAttr":
            continue
        if _call_name(stmt.value) == "field" and any(
                k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in stmt.value.keywords):  # type: ignore[union-attr]
            continue
        fields[name] = _default(stmt.value)
    return fields


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases if isinstance(b, (ast.Name, ast.Attribute))]


def _pick(candidates: list[tuple[str, ast.ClassDef]]) -> tuple[str, ast.ClassDef]:
    """The definition with the most fields when a name is defined twice (e.g. a stub beside the real one)."""
    return max(candidates, key=lambda item: len(own_fields(item[1])))


def all_fields(name: str, classes: dict[str, list[tuple[str, ast.ClassDef]]], seen: frozenset = frozenset()) -> dict[str, Any]:
    """Fields of ``name`` with those of its bases found in the tree (bases first, overrides last)."""
    if name not in classes or name in seen:
        return {}
    _, node = _pick(classes[name])
    merged: dict[str, Any] = {}
    for base in _base_names(node):
        merged.update(all_fields(base, classes, seen | {name}))
    merged.update(own_fields(node))
    return merged


def enum_members(node: ast.ClassDef) -> list[str]:
    members = []
    for stmt in node.body:
        if isinstance(stmt, ast.Assign):
            members += [t.id for t in stmt.targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
    return members


def exported(tree: ast.Module) -> list[str]:
    """``__all__`` of a module when it is a literal list, else the names it imports or defines."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = _literal(node.value)
            if isinstance(value, (list, tuple)):
                return sorted(str(v) for v in value)
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
    return sorted(n for n in names if not n.startswith("_"))


def _functions(tree: ast.AST, name: str) -> Iterator[ast.FunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            yield node


def kv_dtypes_synced(modules: dict[str, ast.Module]) -> Optional[list[str]]:
    """The ``kv_cache_config.dtype`` strings the PyTorch args compare against when they sync the KV
    cache algorithm into ``quant_config`` ("auto" included); None when the function is absent."""
    for tree in modules.values():
        for func in _functions(tree, KV_SYNC_FUNCTION):
            values: set[str] = set()
            for node in ast.walk(func):
                if isinstance(node, ast.Compare):
                    for part in [node.left, *node.comparators]:
                        if isinstance(part, ast.Constant) and isinstance(part.value, str):
                            values.add(part.value.lower())
                elif isinstance(node, ast.Dict):  # a mapping {"fp8": QuantAlgo.FP8, ...}
                    values |= {k.value.lower() for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            return sorted(values)
    return None


def version_of(root: Path) -> str:
    path = root / "tensorrt_llm" / "version.py"
    if path.is_file():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets):
                return str(_literal(node.value))
    return "unknown"


# ----------------------------------------------------------------------------- the manifest
def build_manifest(root: Path, source: dict[str, Any]) -> dict[str, Any]:
    """The manifest of the checkout at ``root``; ``source`` records where it came from (commit, repo)."""
    modules = parse_tree(root)
    classes = class_defs(modules)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "tensorrt_llm_version": version_of(root),
        "source": source,
        "classes": {},
        "enums": {},
        "exports": {},
        "modules": {},
        "pytorch_kv_cache_dtypes": kv_dtypes_synced(modules),
    }
    for name in CLASSES:
        if name in classes:
            manifest["classes"][name] = {"file": _pick(classes[name])[0], "fields": all_fields(name, classes)}
    for name in ENUMS:
        if name in classes:
            path, node = max(classes[name], key=lambda item: len(enum_members(item[1])))
            manifest["enums"][name] = {"file": path, "members": enum_members(node)}
    for rel in EXPORTING:
        if rel in modules:
            manifest["exports"][rel[:-len("/__init__.py")].replace("/", ".")] = exported(modules[rel])
    for dotted in MODULES:
        rel = dotted.replace(".", "/")
        manifest["modules"][dotted] = f"{rel}.py" in modules or f"{rel}/__init__.py" in modules
    return manifest


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a TensorRT-LLM source tree (the directory holding tensorrt_llm/)")
    parser.add_argument("--commit", required=True, help="the commit the tree was read at (recorded in the manifest)")
    parser.add_argument("--repo", default="NVIDIA/TensorRT-LLM")
    parser.add_argument("--note", default=None, help="anything a reader must know about the tree (recorded)")
    parser.add_argument("--files", type=Path, default=None,
                        help="JSON {path: commit} when files were read at different commits (recorded)")
    parser.add_argument("--out", type=Path, default=None, help="write here instead of stdout")
    args = parser.parse_args(argv)
    if not (args.checkout / "tensorrt_llm").is_dir():
        print(f"error: {args.checkout} has no tensorrt_llm/ directory", file=sys.stderr)
        return 1
    source: dict[str, Any] = {"repo": args.repo, "commit": args.commit}
    if args.files:
        source["files"] = json.loads(args.files.read_text())
    if args.note:
        source["note"] = args.note
    text = json.dumps(build_manifest(args.checkout, source), indent=1, sort_keys=False) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
