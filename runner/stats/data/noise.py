"""The system's own noise as data: an A/A replicate's figures (the same model and samples scored twice, under a
perturbation such as batch size 1 or another compute dtype) and a run's fidelity to its reference's option
log-likelihoods. Computed by :mod:`runner.stats.numerics.noise`; stored with a reference entry (``recorded.noise``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CONFIDENCE = 0.95
"""The one-sided confidence of the shift's bounds."""

@dataclass(frozen=True)
class Spread:
    """A mean over documents and its two-sided ``confidence`` t interval (documents, not tokens, are the units: a
    document's positions share its text)."""

    mean: float
    lower: float
    upper: float

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "lower": self.lower, "upper": self.upper}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> "Spread":
        return cls(*(_number(data, key, path) for key in ("mean", "lower", "upper")))


@dataclass(frozen=True)
class TokenFidelity:
    """Teacher-forced fidelity of B to A on the same texts, from their per-position top-k records: ``agreement``,
    the share of positions whose most likely next token is the same; ``kl``, KL(A || B) per position on the top-k
    tokens both records hold plus one bucket for the rest (a lower bound on the full KL: merging tokens into a
    bucket never increases a KL divergence); ``nll``, the change of the mean negative log-likelihood per token, B - A
    (nats). Each a mean over the ``n`` documents (``tokens`` positions) with its interval."""

    n: int
    tokens: int
    agreement: Spread
    kl: Spread
    nll: Spread
    confidence: float = CONFIDENCE

    def describe(self) -> str:
        pct = f"{100 * self.confidence:.0f}%"
        return (f"top-1 agreement {self.agreement.mean:.4f} ({pct} {self.agreement.lower:.4f}..{self.agreement.upper:.4f}), "
                f"token KL >= {self.kl.mean:.3g} (upper {self.kl.upper:.3g}), NLL change {self.nll.mean:+.3g}/token "
                f"({pct} {self.nll.lower:+.3g}, {self.nll.upper:+.3g}) on {self.n} texts, {self.tokens} tokens")

    def short(self) -> str:
        """The three means alone (the A/A floor beside a run's figures)."""
        return (f"top-1 agreement {self.agreement.mean:.4f}, token KL >= {self.kl.mean:.3g}, "
                f"NLL change {self.nll.mean:+.3g}/token")

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "tokens": self.tokens, "top1_agreement": self.agreement.to_dict(),
                "token_kl": self.kl.to_dict(), "nll_change": self.nll.to_dict(), "confidence": self.confidence}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "tokens.") -> "TokenFidelity":
        return cls(int(_number(data, "n", path)), int(_number(data, "tokens", path)),
                   Spread.from_dict(data.get("top1_agreement") or {}, f"{path}top1_agreement."),
                   Spread.from_dict(data.get("token_kl") or {}, f"{path}token_kl."),
                   Spread.from_dict(data.get("nll_change") or {}, f"{path}nll_change."),
                   _number(data, "confidence", path) if "confidence" in data else CONFIDENCE)


def _number(where: Mapping[str, Any], key: str, path: str) -> float:
    """``where[key]`` as a finite float; a ValueError naming ``path + key`` otherwise."""
    value = where.get(key) if isinstance(where, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{path}{key} must be a finite number, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class Replicate:
    """One A/A comparison: run B (perturbed) against run A (as recorded) on the same ``n`` samples.

    ``shift_*``: the mean per-sample score change B - A (metric units) and its one-sided ``confidence`` bounds;
    ``worse``/``better``: on a 0/100 metric, samples right in A and wrong in B, and the reverse (None otherwise);
    ``answer_changes``: samples whose prediction changed (a wrong answer to another wrong one counts);
    ``loglik_max``/``loglik_p99``: the largest and 99th-percentile absolute log-likelihood change over every scored
    option (None when the task scores none); ``hosts``: the two fingerprints, ``a`` and ``b``."""

    perturbation: str
    n: int
    answer_changes: int
    shift_mean: float
    shift_lower: float
    shift_upper: float
    worse: int | None = None
    better: int | None = None
    loglik_max: float | None = None
    loglik_p99: float | None = None
    confidence: float = CONFIDENCE
    hosts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    option_kl: float | None = None  # mean KL(A || B) of the options' softmax, per sample (a multiple-choice task)
    # per indicator (prompt cut, token limit, unparsed: runner.contract.indicators), the samples B flags and A does
    # not, and the reverse; None: the task generates no text, or the replicate was measured before they were kept
    indicators: Mapping[str, tuple[int, int]] | None = None
    tokens: TokenFidelity | None = None  # teacher-forced fidelity, where both passes kept per-position top-k records

    @property
    def floor(self) -> float:
        """The largest mean shift, either way, the replicate does not rule out: max(|lower|, |upper|)."""
        return max(abs(self.shift_lower), abs(self.shift_upper))

    @property
    def discordant(self) -> int | None:
        return None if self.worse is None or self.better is None else self.worse + self.better

    def describe(self) -> str:
        """``batch_size=1: 3 of 570 answers changed (b=2, c=1), shift -0.18 (95% bounds -0.53, +0.18)...``"""
        pct = f"{100 * self.confidence:.0f}%"
        parts = [f"{self.answer_changes} of {self.n} answers changed"
                 + (f" (b={self.worse}, c={self.better})" if self.worse is not None else ""),
                 f"shift {self.shift_mean:+.4g} ({pct} bounds {self.shift_lower:+.4g}, {self.shift_upper:+.4g})"]
        if self.loglik_max is not None:
            parts.append(f"|loglik change| max {self.loglik_max:.3g}, p99 {self.loglik_p99:.3g}")
        if self.option_kl is not None:
            parts.append(f"option KL {self.option_kl:.3g}")
        if self.tokens is not None:
            parts.append(self.tokens.describe())
        return f"{self.perturbation}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The form stored with a reference entry (``recorded.noise.replicates``) and in report.json."""
        out: dict[str, Any] = {"perturbation": self.perturbation, "n": self.n, "answer_changes": self.answer_changes}
        if self.worse is not None:
            out["discordant"] = {"worse": self.worse, "better": self.better}
        out["shift"] = {"mean": self.shift_mean, "lower": self.shift_lower, "upper": self.shift_upper,
                        "confidence": self.confidence}
        if self.loglik_max is not None:
            out["loglik_change"] = {"max": self.loglik_max, "p99": self.loglik_p99}
        if self.option_kl is not None:
            out["option_kl"] = self.option_kl
        if self.indicators is not None:
            out["indicators"] = {k: {"more": m, "fewer": f} for k, (m, f) in self.indicators.items()}
        if self.tokens is not None:
            out["tokens"] = self.tokens.to_dict()
        out["hosts"] = {k: dict(v) for k, v in self.hosts.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Replicate":
        """The stored form back; a missing or mistyped field raises ValueError naming it."""
        number = _number
        shift = data.get("shift") or {}
        disc = data.get("discordant")
        ll = data.get("loglik_change")
        hosts = data.get("hosts") or {}
        return cls(str(data.get("perturbation") or "unnamed"), int(number(data, "n", "")),
                   int(number(data, "answer_changes", "")), number(shift, "mean", "shift."),
                   number(shift, "lower", "shift."), number(shift, "upper", "shift."),
                   None if disc is None else int(number(disc, "worse", "discordant.")),
                   None if disc is None else int(number(disc, "better", "discordant.")),
                   None if ll is None else number(ll, "max", "loglik_change."),
                   None if ll is None else number(ll, "p99", "loglik_change."),
                   number(shift, "confidence", "shift.") if "confidence" in shift else CONFIDENCE,
                   {str(k): {str(a): str(b) for a, b in (v or {}).items()} for k, v in hosts.items()},
                   number(data, "option_kl", "") if "option_kl" in data else None,
                   _indicators(data.get("indicators"), number),
                   TokenFidelity.from_dict(data["tokens"]) if isinstance(data.get("tokens"), Mapping) else None)


def _indicators(block: Any, number: Any) -> dict[str, tuple[int, int]] | None:
    """``indicators: {name: {more, fewer}}`` as stored, back to counts (None when absent)."""
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise ValueError(f"indicators must be a mapping of {{more, fewer}} counts, not {block!r}")
    return {str(k): (int(number(v, "more", f"indicators.{k}.")), int(number(v, "fewer", f"indicators.{k}.")))
            for k, v in block.items()}


@dataclass(frozen=True)
class Fidelity:
    """How far a run's option log-likelihoods are from the reference's on the same samples: ``picks`` changed of ``n``
    multiple-choice samples (argmax over options, a wrong pick to another wrong one included) and the mean KL
    divergence of the options' softmax (reference || run). An early, cheap look: it plans, never decides."""

    n: int
    picks: int
    option_kl: float | None
    tokens: TokenFidelity | None = None  # a teacher-forced task's (perplexity's) fidelity to the reference's records

    def describe(self) -> str:
        kl = f", option KL {self.option_kl:.3g}" if self.option_kl is not None else ""
        picks = f"{self.picks} of {self.n} picks changed{kl}" if self.n else ""
        return "; ".join(p for p in (picks, self.tokens.describe() if self.tokens else "") if p)


@dataclass(frozen=True)
class MeasuredNoise:
    """What a job knows of the system's noise before it decides, as the decision reads it: the floor a continuous
    paired rule's NO-GO claim is tested against (None: it does not apply), the ``reference.floor`` mode that chose
    it, how this run's host differs from the reference's (words; None: the same host, or the reference's unknown),
    and the reference entry's replicates (an exact rule's failure is labelled when one fails the same way)."""

    floor: float | None
    mode: str
    host_differs: str | None
    replicates: tuple[Replicate, ...] = ()
