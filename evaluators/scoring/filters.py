"""lm-evaluation-harness's two answer filters, as GSM8K and GPQA report them: ``strict-match`` and
``flexible-extract``. Each output goes through both; the sample keeps what each extracted and whether
it matches the gold answer, and the task reports each filter's exact-match rate."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from evaluators.metrics import rate

Extract = Callable[[str], Any]


def apply_filters(output: str, strict: Extract, flexible: Extract, matches: Callable[[Any], bool]) -> dict[str, Any]:
    """``{"strict", "flexible", "strict_match", "flexible_match"}`` for one output (a sample's meta)."""
    found_strict, found_flexible = strict(output), flexible(output)
    return {"strict": found_strict, "flexible": found_flexible,
            "strict_match": matches(found_strict), "flexible_match": matches(found_flexible)}


def filter_rates(scored: Sequence[Any]) -> dict[str, float]:
    """``exact_match_strict`` and ``exact_match_flexible``: each filter's match rate in percent."""
    return {"exact_match_strict": rate(s.meta["strict_match"] for s in scored),
            "exact_match_flexible": rate(s.meta["flexible_match"] for s in scored)}
