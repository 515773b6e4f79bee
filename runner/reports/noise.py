"""Where the reference was measured, where this run was, what differs, and the noise the reference's A/A replicate
measured: the opening lines of every report and the one-line summary every other place shows (JUnit, markdown,
MLflow tags, sweep summaries)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.contract.fingerprint import describe, describe_differences, differences
from runner.stats.data.noise import Fidelity, Replicate
from runner.stats.numerics.noise import discordance_upper, expected_discordance, floor

NOT_MEASURED = "not measured (the reference entry has no A/A replicate: record it with reference.noise=replicate)"


@dataclass(frozen=True)
class NoiseView:
    """What a report says about the system's noise.

    ``reference_host``: the entry's fingerprint (None: recorded before fingerprints, or no reference);
    ``run_host``: this run's; ``replicates``: the entry's A/A replicates (in record mode: those just measured);
    ``n``: the samples this run's verdict pairs, for the discordance the noise alone leads one to expect;
    ``recording``: the run records the reference (it has no reference of its own to compare hosts with)."""

    run_host: Mapping[str, str]
    reference_host: Mapping[str, str] | None = None
    replicates: Sequence[Replicate] = field(default_factory=tuple)
    n: int | None = None
    recording: bool = False
    observed: int | None = None  # the run's discordant pairs (b + c) on a 0/100 metric
    fidelity: Fidelity | None = None  # the run's option log-likelihoods against the reference's (never decides)

    def fidelity_line(self) -> str | None:
        """The run's picks changed and option KL beside the replicates' (the A/A floor of the same statistics)."""
        if self.fidelity is None or not (self.fidelity.n or self.fidelity.tokens):
            return None
        floor_of = [f"{r.perturbation}: " + (r.tokens.short() if r.tokens is not None and self.fidelity.tokens else
                                             f"{r.answer_changes} of {r.n} changed"
                                             + (f", option KL {r.option_kl:.3g}" if r.option_kl is not None else ""))
                    for r in self.replicates]
        return (f"{self.fidelity.describe()} (A/A: {'; '.join(floor_of) if floor_of else 'not measured'}); "
                "a look, not a verdict")

    @property
    def differs(self) -> list[tuple[str, str, str]]:
        return differences(self.reference_host, self.run_host) if self.reference_host is not None else []

    @property
    def floor(self) -> float | None:
        return floor(self.replicates) if self.replicates else None

    @property
    def expected_discordant(self) -> float | None:
        return expected_discordance(self.replicates, self.n) if self.replicates and self.n else None

    def line(self) -> str:
        """One line: the floor and the largest replicate's figures, or that none was measured; and what differs."""
        if not self.replicates:
            text = NOT_MEASURED
        else:
            worst = max(self.replicates, key=lambda r: r.floor)
            text = f"A/A floor {self.floor:.4g} (largest of {len(self.replicates)}: {worst.describe()})"
            if self.expected_discordant is not None:
                text += f"; {self.expected_discordant:.1f} of {self.n} paired answers expected to flip from noise alone"
                upper = discordance_upper(self.replicates, self.n or 0)
                if self.observed is not None and upper is not None:
                    text += (f" (95% upper {upper:.1f}); this run flipped {self.observed}, "
                             f"{max(self.observed - upper, 0.0):.1f} beyond that bound")
        if not self.recording:
            if self.reference_host is None:
                text += "; the reference's host was not recorded"
            else:
                text += f"; host differs from the reference's: {describe_differences(self.differs)}"
        return text

    def lines(self) -> list[str]:
        """The report's opening lines."""
        if self.recording:
            out = [f"measured on: {describe(self.run_host)}"]
            out += [f"A/A replicate: {r.describe()}" for r in self.replicates]
            return out + ([f"noise:       A/A floor {self.floor:.4g}"] if self.replicates else [])
        reference = describe(self.reference_host) if self.reference_host is not None else \
            "not recorded (the entry predates host fingerprints: record it again)"
        fidelity = self.fidelity_line()
        return [f"reference measured on: {reference}",
                f"this run measured on:  {describe(self.run_host)}",
                f"differs:     {describe_differences(self.differs) if self.reference_host is not None else 'unknown'}",
                f"noise:       {self.line()}"] + ([f"fidelity:    {fidelity}"] if fidelity else [])

    def to_dict(self) -> dict[str, Any]:
        """report.json's and results.json's ``noise``."""
        return {"line": self.line(), "floor": self.floor, "expected_discordant": self.expected_discordant,
                "observed_discordant": self.observed,
                "fidelity": None if self.fidelity is None else {
                    "n": self.fidelity.n, "picks_changed": self.fidelity.picks, "option_kl": self.fidelity.option_kl,
                    "tokens": self.fidelity.tokens.to_dict() if self.fidelity.tokens is not None else None},
                "reference_host": dict(self.reference_host) if self.reference_host is not None else None,
                "run_host": dict(self.run_host),
                "differs": [{"key": k, "reference": a, "run": b} for k, a, b in self.differs],
                "replicates": [r.to_dict() for r in self.replicates]}


def noise_tags(view: NoiseView) -> dict[str, str]:
    """The tracker tags: the noise line (a column of the runs table's default view) and what differs."""
    return {"noise": view.line()[:5000],
            "host_differs": describe_differences(view.differs) if view.reference_host is not None else "unknown"}
