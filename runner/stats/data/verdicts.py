"""Three verdicts: what the data showed about the drop, and how a CI system should read it.

D is the drop of the new build against its reference (oriented so that a positive D is worse), m >= 0
the regression margin and t > 0 the tolerance (docs/statistics.md, "Three verdicts"):

* **NO-GO**: D > m is shown at level alpha (the regression rules, unchanged);
* **GO**: D < t is shown at level alpha (the one-sided 1 - alpha upper bound on D is below t);
* **INCONCLUSIVE**: neither; the report then says how many more samples would decide.

Both claims can hold at once ("worse, but within tolerance"); ``stats.gate`` says which one the
verdict follows. ``stats.verdicts=two_way`` reproduces TensorRT-LLM's pass/fail (PASS = GO or
INCONCLUSIVE) and ``stats.on_inconclusive`` maps INCONCLUSIVE to a pass or a failure.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any

from runner.contract.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION, ConfigError
from runner.stats.data.tolerance import MIN_PERCENT_TOLERANCE, UNITS, check_percent

GO, NO_GO, INCONCLUSIVE = "GO", "NO-GO", "INCONCLUSIVE"
VERDICTS = (GO, NO_GO, INCONCLUSIVE)
MODES = ("three_way", "two_way")
ON_INCONCLUSIVE = ("inconclusive", "pass", "fail")
WORDS = {GO: "go", NO_GO: "no-go", INCONCLUSIVE: "inconclusive"}
"""The verdict in lower case: MLflow's ``verdict`` tag, JUnit and summary rows."""
CODES = {"go": 0, "no-go": 1, "inconclusive": 2, "no verdict": 3, "failed": 4}
"""The ``verdict`` metric (sortable in MLflow's runs table); the ``verdict`` tag says it in words."""


def validate(stats: Any) -> None:
    """Raise :class:`ConfigError` for a verdict setting that cannot be used."""
    for key, value, allowed in (("verdicts", stats.verdicts, MODES), ("on_inconclusive", stats.on_inconclusive,
                                                                      ON_INCONCLUSIVE),
                                ("tolerance_unit", stats.tolerance_unit, UNITS)):
        if value not in allowed:
            raise ConfigError(f"unknown value of stats.{key}", where=f"stats.{key}", given=str(value),
                              allowed=", ".join(allowed))
    tol = stats.tolerance
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not math.isfinite(tol)
                            or tol <= 0):
        raise ConfigError("the tolerance must be a finite number > 0", where="stats.tolerance", given=repr(tol),
                          allowed="a tolerated drop, e.g. 2 (points) or 3 with stats.tolerance_unit=percent; "
                                  "null: the task's designed theta")
    if tol is not None and stats.tolerance_unit == "percent":
        check_percent(float(tol), "stats.tolerance", fraction_below=MIN_PERCENT_TOLERANCE)


def combine(regression: bool, within: bool, gate: str) -> str:
    """The verdict of the two claims; when both were shown, ``gate`` decides (``regression`` follows the
    shown regression, ``noninferiority`` the shown tolerance)."""
    if regression and within:
        return NO_GO if gate == "regression" else GO
    if regression:
        return NO_GO
    return GO if within else INCONCLUSIVE


def inconclusive_fails(mode: str, on_inconclusive: str) -> bool:
    """Whether an INCONCLUSIVE verdict counts as a failure (a failed JUnit case) under these settings."""
    return exit_status(INCONCLUSIVE, mode, on_inconclusive) != EXIT_OK


def reported(verdict: str, mode: str) -> str:
    """What the report calls the verdict: the three-way name, or TensorRT-LLM's PASS / FAIL."""
    if mode == "two_way":
        return "FAIL" if verdict == NO_GO else "PASS"
    return verdict


def exit_status(verdict: str, mode: str, on_inconclusive: str) -> int:
    """0 GO (or PASS), 3 NO-GO (or FAIL), 4 INCONCLUSIVE unless mapped to a pass or a failure."""
    if verdict == NO_GO:
        return EXIT_REGRESSION
    if verdict == GO or mode == "two_way":
        return EXIT_OK
    return {"pass": EXIT_OK, "fail": EXIT_REGRESSION}.get(on_inconclusive, EXIT_INCONCLUSIVE)


def decisive(bound: float, threshold: float, shown: bool, above: bool, decimals: int = 3) -> tuple[str, str]:
    """A bound and its threshold in print, with the digits that decide: ``(bound, threshold)`` as signed decimals.

    ``above``: the claim is shown when the bound is above the threshold (a lower bound, rounded down),
    else below it (an upper bound, rounded up); the threshold is rounded to nearest. Rounding the bound
    outwards never puts an unshown claim's bound on the deciding side; digits are added (from
    ``decimals``) until a shown claim's bound prints strictly past its printed threshold, so a GO bound
    never prints equal to the tolerance."""

    threshold += 0.0  # -0.0 prints as 0
    if not math.isfinite(bound):  # an unbounded side (nothing can be shown): no digits decide
        return ("+inf" if bound > 0 else "-inf"), f"{Decimal(threshold).quantize(Decimal(1).scaleb(-decimals)):+f}"
    exact_b, exact_t = Decimal(bound), Decimal(threshold)
    for k in range(decimals, 40):
        q = Decimal(1).scaleb(-k)
        b = exact_b.quantize(q, ROUND_FLOOR if above else ROUND_CEILING)
        t = exact_t.quantize(q, ROUND_HALF_EVEN)
        if shown == (b > t if above else b < t):
            return f"{b:+f}", f"{t:+f}"
    return f"{exact_b:+f}", f"{exact_t:+f}"
