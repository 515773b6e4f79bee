"""Group-sequential boundaries: error spending, the crossing probabilities behind them, and what they give.

The statistic at look ``k`` is ``Z_k``, oriented so that a large value is evidence of a regression,
with information ``I_k`` (the inverse variance of the estimate). Under the usual normal theory the
``Z_k`` have the canonical joint distribution: ``Cov(Z_j, Z_k) = sqrt(I_j / I_k)`` for ``j <= k``
and ``E[Z_k] = theta sqrt(I_k)`` (Jennison & Turnbull 2000, section 3.1). Informations are
normalised so that the last look has ``I_K = 1``; ``theta`` is then the drift at the last look.

* Efficacy (regression) bound ``b_k``: the probability under H0 of crossing it at look ``k`` and
  not before is the increment of a Lan-DeMets alpha-spending function (O'Brien-Fleming type by
  default, Pocock type as an option).
* Futility (pass) bound ``a_k``: the probability under the alternative of falling below it at look
  ``k`` and not before is the increment of a beta-spending function of the same family; the
  alternative's drift is solved so that the bounds meet at the last look (``a_K = b_K``), which
  makes the power exactly ``1 - beta``. Non-binding (the default): the efficacy bounds ignore the
  futility bounds, so the false-alarm rate stays at most alpha even when a futility stop is
  overruled and the run goes on. Binding bounds are a little tighter but only valid if every
  futility stop is obeyed.

Crossing probabilities use the recursive numerical integration of Jennison & Turnbull (2000,
chapter 19): a grid of ``6r - 1`` points concentrated around the mean, Simpson's rule between them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from runner.contract.errors import ConfigError
from runner.stats.numerics.normal import phi, z

SPENDING = ("obf", "pocock")
FUTILITY = ("obf", "pocock", "none")
_GRID_R = 18
_INF = math.inf


@dataclass
class SequentialConfig:
    """``stats.sequential``: look at the data a few times and stop when a boundary is crossed."""

    enabled: bool = False  # one override turns it on: stats.sequential.enabled=true
    looks: int = 4  # number of looks K, equally spaced in samples (ignored when fractions is set)
    fractions: Optional[list[float]] = None  # look sizes as fractions of n, increasing, the last 1.0
    efficacy: str = "obf"  # alpha spending of the regression bound: obf (O'Brien-Fleming type) | pocock
    futility: str = "obf"  # beta spending of the pass bound: obf | pocock | none (no early pass)
    # non-binding (default): the regression bounds ignore the pass bounds, so alpha holds even when a pass
    # stop is overruled; binding: slightly smaller bounds, valid only if every pass stop is obeyed
    binding: bool = False


def validate(seq: Any) -> None:
    """Raise :class:`ConfigError` for a sequential config that cannot be planned."""
    if not seq.enabled:
        return
    if seq.efficacy not in SPENDING:
        raise ConfigError("unknown alpha-spending function", where="stats.sequential.efficacy", given=seq.efficacy,
                          allowed=", ".join(SPENDING))
    if seq.futility not in FUTILITY:
        raise ConfigError("unknown beta-spending function", where="stats.sequential.futility", given=seq.futility,
                          allowed=", ".join(FUTILITY))
    look_fractions(seq)


def look_fractions(seq: Any) -> list[float]:
    """The look sizes as fractions of n: ``fractions`` as given, else ``k / K``."""
    if seq.fractions is None:
        k = seq.looks
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 20:
            raise ConfigError("the number of looks must be a whole number from 1 to 20",
                              where="stats.sequential.looks", given=repr(k), allowed="1..20 (e.g. 4)")
        return [(i + 1) / k for i in range(k)]
    fr = [float(f) for f in seq.fractions]
    if not fr or any(not 0 < f <= 1 for f in fr) or any(b <= a for a, b in zip(fr, fr[1:])) or fr[-1] != 1.0:
        raise ConfigError("look fractions must increase within (0, 1] and end at 1", where="stats.sequential.fractions",
                          given=repr(list(seq.fractions)), allowed="e.g. [0.25, 0.5, 0.75, 1.0]")
    return fr


def spend(kind: str, t: float, total: float) -> float:
    """Cumulative error spent by information fraction ``t`` (Lan & DeMets 1983; Lan-DeMets Pocock type)."""
    t = min(max(t, 0.0), 1.0)
    if t == 0.0:
        return 0.0
    if kind == "obf":
        return 2.0 * (1.0 - phi(z(1.0 - total / 2.0) / math.sqrt(t)))
    if kind == "pocock":
        return total * math.log(1.0 + (math.e - 1.0) * t)
    raise ValueError(f"unknown spending function {kind!r}")


# ------------------------------------------------------------------ recursive numerical integration
def _grid(mean: float, lo: float, hi: float):  # noqa: ANN202 - numpy arrays
    """Simpson points and weights on ``(lo, hi)`` concentrated around ``mean`` (J&T section 19.2)."""
    import numpy as np

    r = _GRID_R
    i = np.arange(1, 6 * r)
    x = np.where(i < r, -3 - 4 * np.log(r / i),
                 np.where(i <= 5 * r, -3 + 3 * (i - r) / (2 * r), 3 + 4 * np.log(r / np.maximum(6 * r - i, 1e-300))))
    x = mean + x
    pts = np.concatenate(([lo] if math.isfinite(lo) else [], x[(x > lo) & (x < hi)], [hi] if math.isfinite(hi) else []))
    if pts.size < 2:
        return np.zeros(0), np.zeros(0)
    h = np.diff(pts)
    mids = (pts[:-1] + pts[1:]) / 2
    zs = np.empty(2 * pts.size - 1)
    zs[0::2], zs[1::2] = pts, mids
    w = np.zeros_like(zs)
    w[0:-1:2] += h / 6
    w[2::2] += h / 6
    w[1::2] = 4 * h / 6
    return zs, w


class _Paths:
    """The sub-density of ``Z_k`` on the paths that have not stopped, one look after another."""

    def __init__(self, theta: float) -> None:
        self.theta = theta
        self.z = None  # grid of the last look
        self.wg = None  # weights x sub-density on it
        self.info = 0.0

    def _shift(self, info: float):  # noqa: ANN202
        """Mean and sd of ``Z_k sqrt(I_k)`` given each grid point of the previous look."""
        delta = info - self.info
        return self.z * math.sqrt(self.info) + self.theta * delta, math.sqrt(delta)

    def tail(self, c: float, info: float, upper: bool) -> float:
        """P(no stop before, Z_k >= c) (``upper``) or P(no stop before, Z_k <= c)."""
        from scipy.stats import norm

        if not math.isfinite(c):
            return 0.0 if (c > 0) == upper else self.mass(info)
        if self.z is None:
            m = self.theta * math.sqrt(info)
            return float(norm.sf(c - m) if upper else norm.cdf(c - m))
        mean, sd = self._shift(info)
        x = (c * math.sqrt(info) - mean) / sd
        return float((self.wg * (norm.sf(x) if upper else norm.cdf(x))).sum())

    def mass(self, info: float) -> float:
        return 1.0 if self.z is None else float(self.wg.sum())

    def advance(self, lo: float, hi: float, info: float) -> None:
        """Keep the paths that continue past a look with bounds ``(lo, hi)`` at information ``info``."""
        from scipy.stats import norm

        m = self.theta * math.sqrt(info)
        zs, w = _grid(m, lo, hi)
        if self.z is None:
            dens = norm.pdf(zs - m)
        else:
            mean, sd = self._shift(info)
            dens = (norm.pdf((zs[:, None] * math.sqrt(info) - mean[None, :]) / sd) @ self.wg) * math.sqrt(info) / sd
        self.z, self.wg, self.info = zs, w * dens, info


def _solve(f, lo: float = -8.0, hi: float = 12.0) -> float:  # noqa: ANN001
    from scipy.optimize import brentq

    if f(hi) > 0:
        return _INF
    if f(lo) < 0:
        return lo
    return float(brentq(f, lo, hi, xtol=1e-10))


# ------------------------------------------------------------------------------------------- design
@dataclass(frozen=True)
class Design:
    """Boundaries on the z scale at each look, and the drift at which the power is ``1 - beta``."""

    info: tuple[float, ...]  # information fractions, the last 1
    efficacy: tuple[float, ...]  # b_k: a regression when Z_k >= b_k
    futility: tuple[float, ...]  # a_k: a pass when Z_k <= a_k (-inf: no early pass)
    drift: float  # E[Z_K] at which the power is 1 - beta
    alpha: float
    beta: float
    spending: str
    futility_spending: str
    binding: bool

    @property
    def fixed_drift(self) -> float:
        return z(1 - self.alpha) + z(1 - self.beta)

    @property
    def inflation(self) -> float:
        """Maximum information over the fixed design's for the same alpha, beta and effect."""
        return (self.drift / self.fixed_drift) ** 2

    def stopping(self, theta: float) -> tuple[list[float], list[float]]:
        """P(regression at look k) and P(pass at look k) when ``E[Z_K] = theta`` (futility obeyed)."""
        return crossing(self.info, self.futility, self.efficacy, theta)

    def to_dict(self) -> dict[str, Any]:
        return {"info": list(self.info), "efficacy": list(self.efficacy),
                "futility": [None if not math.isfinite(a) else a for a in self.futility], "drift": self.drift,
                "inflation": self.inflation, "spending": self.spending, "futility_spending": self.futility_spending,
                "binding": self.binding}


def crossing(info: Sequence[float], lower: Sequence[float], upper: Sequence[float], theta: float
             ) -> tuple[list[float], list[float]]:
    """Per look: P(first exit above ``upper``) and P(first exit below ``lower``) at drift ``theta``."""
    paths, up, down = _Paths(theta), [], []
    for i, a, b in zip(info, lower, upper):
        up.append(paths.tail(b, i, True))
        down.append(paths.tail(a, i, False) if a < b else 0.0)
        paths.advance(a, b, i)
    return up, down


def _bounds(info: Sequence[float], alpha: float, beta: float, spending: str, fut: str, binding: bool, drift: float,
            spent_info: Sequence[float] | None = None) -> tuple[list[float], list[float]]:
    """Efficacy and futility bounds for the given drift (the futility bounds meet nothing at the end)."""
    sp = spent_info or info
    h0, h0_free, h1 = _Paths(0.0), _Paths(0.0), _Paths(drift)
    b, a = [], []
    for k, i in enumerate(info):
        target = spend(spending, sp[k], alpha) - (spend(spending, sp[k - 1], alpha) if k else 0.0)
        paths = h0 if binding else h0_free
        bk = _solve(lambda c: paths.tail(c, i, True) - target)
        if fut == "none" or k == len(info) - 1:
            ak = -_INF
        else:
            tb = spend(fut, sp[k], beta) - (spend(fut, sp[k - 1], beta) if k else 0.0)
            ak = -_solve(lambda c: h1.tail(-c, i, False) - tb)
            ak = min(ak, bk)
        b.append(bk)
        a.append(ak)
        h0.advance(ak, bk, i)
        h0_free.advance(-_INF, bk, i)
        h1.advance(ak, bk, i)
    return a, b


def design(info: Sequence[float], alpha: float, beta: float, spending: str = "obf", futility: str = "obf",
           binding: bool = False) -> Design:
    """Plan the boundaries for looks at information fractions ``info`` (increasing, the last 1)."""
    info = [float(i) for i in info]
    if not info or info[-1] != 1.0 or any(b <= a for a, b in zip(info, info[1:])) or info[0] <= 0:
        raise ValueError(f"information fractions must increase within (0, 1] and end at 1, got {info}")

    def final_gap(d: float) -> float:
        a, b = _bounds(info, alpha, beta, spending, futility, binding, d)
        paths = _Paths(d)
        for ak, bk, i in zip(a[:-1], b[:-1], info[:-1]):
            paths.advance(ak, bk, i)
        miss = paths.tail(b[-1], 1.0, False) + sum(crossing(info[:-1], a[:-1], b[:-1], d)[1])
        return miss - beta  # decreasing in d

    from scipy.optimize import brentq

    fixed = z(1 - alpha) + z(1 - beta)
    drift = float(brentq(final_gap, fixed * 0.5, fixed * 3.0, xtol=1e-9))
    a, b = _bounds(info, alpha, beta, spending, futility, binding, drift)
    a[-1] = b[-1]
    return Design(tuple(info), tuple(b), tuple(a), drift, alpha, beta, spending, futility, binding)


def expected_info(d: Design, theta: float) -> float:
    """Expected information used (a fraction of the maximum) at drift ``theta``, futility obeyed."""
    up, down = d.stopping(theta)
    stop = [u + w for u, w in zip(up, down)]
    stop[-1] = 1.0 - sum(stop[:-1])
    return sum(s * i for s, i in zip(stop, d.info))


def expected_fraction(d: Design, sizes: Sequence[float], theta: float) -> float:
    """Expected share of the maximum sample size evaluated (``sizes``: the looks' sample fractions)."""
    up, down = d.stopping(theta)
    stop = [u + w for u, w in zip(up, down)]
    stop[-1] = 1.0 - sum(stop[:-1])
    return sum(s * n for s, n in zip(stop, sizes))


def stagewise_p(info: Sequence[float], efficacy: Sequence[float], futility: Sequence[float], stage: int,
                z_obs: float, binding: bool) -> float:
    """One-sided p-value under the stage-wise ordering (Jennison & Turnbull 2000, section 8.4).

    Outcomes more extreme than stopping at look ``stage`` (0-based) with ``z_obs`` are a regression
    bound crossed at an earlier look, or ``Z >= z_obs`` at this one. Futility bounds count only when
    they are binding, so the p-value stays valid when a pass stop is overruled. Below alpha exactly
    when a regression bound was crossed."""
    paths, p = _Paths(0.0), 0.0
    for k in range(stage):
        lo = futility[k] if binding else -_INF
        p += paths.tail(efficacy[k], info[k], True)
        paths.advance(lo, efficacy[k], info[k])
    return min(1.0, max(0.0, p + paths.tail(z_obs, info[stage], True)))


def unpaired_info(sizes: Sequence[float]) -> list[float]:
    """Information fractions of the unpaired test at sample fractions ``sizes``.

    The reference mean is fixed (its n is the last look's), so at a look with ``n_k`` of ``n`` samples
    the difference has variance ``sigma^2 / n_k + sigma^2 / n``: ``t_k = 2 s_k / (1 + s_k)``."""
    return [2 * s / (1 + s) for s in sizes]


@dataclass
class Plan:
    """What ``python -m runner.plan --sequential K`` prints for one design."""

    name: str
    design: Design
    sizes: list[float]
    fixed_n: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def max_n(self) -> int:
        return math.ceil(self.fixed_n * self.design.inflation)

    def to_dict(self) -> dict[str, Any]:
        d = self.design
        return {"design": self.name, "looks": len(self.sizes), "sample_fractions": self.sizes,
                "info_fractions": list(d.info), "efficacy_z": list(d.efficacy),
                "futility_z": [a if math.isfinite(a) else None for a in d.futility], "inflation": d.inflation,
                "fixed_n": self.fixed_n, "max_n": self.max_n,
                "expected_n_h0": self.max_n * expected_fraction(d, self.sizes, 0.0),
                "expected_n_theta": self.max_n * expected_fraction(d, self.sizes, d.drift)} | self.extra
