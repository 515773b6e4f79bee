"""The sweep's figure reads without the docs: every mark in the legend, the same band for the same reference
whatever rule decided, a title that fits paired rules, and both verdicts where they differ."""

from __future__ import annotations

from runner.sweep.plot import plot


def row(job: str, **figures) -> dict:
    base = {"job": job, "task": "arc_easy", "metric": "accuracy", "configuration": f"quant={job}", "score": 50.0,
            "reference": 51.75, "tolerance": 3.607, "theta": 3.607, "threshold": None, "bound": None,
            "verdict": "go", "sweep_verdict": "go", "higher_is_better": True}
    return base | figures


def test_every_mark_is_in_the_legend_and_one_reference_has_one_band(tmp_path):
    rows = [row("none", bound=-1.9),  # paired: no threshold, its GO bound instead
            row("w8a16", threshold=46.2, bound=None),  # TensorRT-LLM's unpaired test decided
            row("w4a16", score=43.7, bound=-4.5, verdict="no-go", sweep_verdict="inconclusive")]
    drawn = plot(rows, tmp_path / "summary.png")
    assert (tmp_path / "summary.png").read_bytes()[:4] == b"\x89PNG"
    assert set(drawn.bands.values()) == {(51.75 - 3.607, 51.75)}  # one reference, one band, for all three
    assert drawn.legend == ["tolerance band (a GO may drop this far)", "reference",
                            "one-sided bound of the claim (paired rule)", "score, go in the sweep",
                            "threshold (a threshold rule decided)", "score, inconclusive in the sweep",
                            "ring: no-go alone (the job's own verdict)"]
    assert all("threshold" not in title for title in drawn.titles)


def test_lower_is_better_puts_the_band_above_the_reference(tmp_path):
    drawn = plot([row("w4a16", task="perplexity", reference=15.4, tolerance=3.17, higher_is_better=False)],
                 tmp_path / "p.png")
    assert drawn.bands == {"w4a16": (15.4, 15.4 + 3.17)}
