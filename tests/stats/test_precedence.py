"""The decision's precedence table (``dispatch.RULES``): which rule decides an entry, and what the others say when
they do not apply. The verdicts each rule reaches are tested with that rule; here, only the order."""

from __future__ import annotations

from types import SimpleNamespace

from runner.contract.evaluator import ScoredSample
from runner.stats.data.entry import Entry as Reference
from runner.stats.data.hypothesis import HypothesisParams
from runner.stats.data.tolerance import Tolerance
from runner.stats.dispatch import RULES
from runner.stats.rules.base import EntryCase
from runner.stats.settings import StatsConfig


def case(reference: Reference, sigma: float = 40.0, rows: dict[str, float] | None = None, corpus: object = None,
         problem: str | None = None, **stats: object) -> EntryCase:
    scored = [ScoredSample(f"s{i}", "", "", "", s) for i, s in enumerate([100.0, 0.0, 100.0, 100.0])]
    rows_ = None if rows is None else {k: SimpleNamespace(score=v) for k, v in rows.items()}
    return EntryCase(reference, scored, 75.0, HypothesisParams(0.05, 0.2, sigma, len(scored)),
                     SimpleNamespace(**(vars(StatsConfig()) | stats)), "acc", 0.0, Tolerance(2.75, "test"), [],
                     rows_, problem, None, corpus)  # type: ignore[arg-type]


def chosen(c: EntryCase) -> tuple[str, dict[str, str | None]]:
    """The first rule that applies, and each rule's answer (None: it applies)."""
    said = {type(r).__name__: r.applies(c) for r in RULES}
    return next(name for name, why in said.items() if why is None), said


ALL = {"s0": 100.0, "s1": 0.0, "s2": 100.0, "s3": 0.0}


def test_the_deterministic_rule_comes_first_even_with_rows_or_a_corpus():
    assert chosen(case(Reference(70.0, threshold=60.0), rows=ALL, corpus=object()))[0] == "Threshold"
    assert chosen(case(Reference(70.0), sigma=0.0, rows=ALL))[0] == "Threshold"


def test_a_corpus_metric_comes_before_the_per_sample_rules():
    name, said = chosen(case(Reference(70.0), rows=ALL, corpus=object()))
    assert name == "Corpus" and said["Threshold"] == "the entry has no explicit threshold and a nonzero sigma"


def test_pairs_decide_when_every_sample_pairs_and_the_unpaired_rule_otherwise():
    assert chosen(case(Reference(70.0), rows=ALL))[0] == "Paired"
    name, said = chosen(case(Reference(70.0), rows={"s0": 100.0, "s1": 0.0}))
    assert name == "Unpaired" and said["Paired"] == "only 2 of 4 samples have reference scores"
    assert chosen(case(Reference(70.0), rows={"s0": 100.0, "s1": 0.0}, method="paired"))[0] == "Paired"
    assert chosen(case(Reference(70.0), rows=ALL, method="unpaired"))[0] == "Unpaired"
    name, said = chosen(case(Reference(70.0), rows=ALL, problem="the reference was scored by another task"))
    assert name == "Unpaired" and said["Paired"] == "the reference was scored by another task"
    assert chosen(case(Reference(70.0)))[0] == "Unpaired"
