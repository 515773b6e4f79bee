"""PreallocatedLayer writes into its own buffers: every method of transformers' layer classes that assigns
``keys`` or ``values`` (and would leave those buffers stale) is overridden, checked on the installed class, and
transformers is held to the minor version this was checked against."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from runner.backends.hf.kv_cache import PreallocatedLayer  # noqa: E402


def assigns_keys(function: object) -> bool:
    """Whether ``function``'s source assigns ``self.keys``/``self.values`` (plain, tuple or item targets)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and part.attr in ("keys", "values") and \
                        isinstance(part.value, ast.Name) and part.value.id == "self":
                    return True
    return False


def test_every_inherited_method_that_assigns_keys_is_overridden():
    inherited = {name for cls in PreallocatedLayer.__mro__[1:-1] for name, fn in vars(cls).items()
                 if inspect.isfunction(fn) and assigns_keys(fn)}
    assert {"update", "batch_select_indices", "reorder_cache", "offload", "prefetch"} <= inherited  # the scan works
    missing = sorted(name for name in inherited if name not in vars(PreallocatedLayer))
    assert not missing, f"transformers {transformers.__version__}: PreallocatedLayer inherits {missing}"
    layer = PreallocatedLayer(4)
    for call in (lambda: layer.batch_select_indices(torch.tensor([0])), lambda: layer.reorder_cache(torch.tensor([0])),
                 layer.offload, layer.prefetch):
        with pytest.raises(NotImplementedError):
            call()


def test_transformers_is_pinned_to_the_minor_version_checked():
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    pins = set(re.findall(r'"transformers(?:\[serving\])?([^"]+)"', text))
    major, minor = transformers.__version__.split(".")[:2]
    assert pins == {f">={major}.{minor},<{major}.{int(minor) + 1}"}, pins
