"""The release verdict from tiers (runner.stats.rules.release): every expected verdict and adjusted p-value below is
derived by hand in the comments, from Holm's step-down on u = p / alpha (k-th smallest of m rejects when
(m - k + 1) u < 1 and every smaller one rejected)."""

from __future__ import annotations

import math

import pytest

from runner.stats.rules.release import FAILED, Claim, TaskEvidence, decide_release


def task(name: str, tier: str, p: float | None = None, within: bool | None = None, *, alpha: float = 0.05,
         shown: bool | None = None, **extra) -> TaskEvidence:
    """A task with one regression claim (``p``; None with ``shown``: a deterministic rule) and its GO claim."""
    if p is None and shown is None:
        return TaskEvidence(name, tier, within=within, **extra)
    claim = Claim(p, alpha, shown if shown is not None else p < alpha)
    return TaskEvidence(name, tier, (claim,), within, **extra)


GO_TASK = {"p": 0.9, "within": True}  # no regression (u = 18), the drop shown within tolerance


def test_a_critical_no_go_blocks_the_release_even_when_everything_else_is_go():
    # one family of the critical and supporting claims: u = 0.001/0.05 = 0.02, 18, 18 -> 3 x 0.02 = 0.06 < 1:
    # rejected; p_adj = 0.05 x 0.06 = 0.003 (the advisory claim stands alone)
    release = decide_release([task("mmlu", "critical", 0.001, False), task("gsm8k", "critical", **GO_TASK),
                              task("ppl", "supporting", **GO_TASK), task("arc", "advisory", **GO_TASK)], 0)
    assert release.verdict == "NO-GO"
    assert release.reason.startswith("critical task mmlu is NO-GO")
    verdicts = {t.name: (t.verdict, t.blocking) for t in release.tasks}
    assert verdicts == {"mmlu": ("no-go", True), "gsm8k": ("go", False), "ppl": ("go", False), "arc": ("go", False)}
    assert release.tasks[0].p_adjusted == pytest.approx(0.003)


def test_more_than_k_supporting_no_gos_block_and_k_of_them_do_not():
    # supporting family u = 0.002, 0.002, 18: 3 x 0.002 = 0.006, max(0.006, 2 x 0.002) = 0.006 -> both rejected
    two = [task("s1", "supporting", 0.0001, False), task("s2", "supporting", 0.0001, False),
           task("s3", "supporting", **GO_TASK)]
    blocked = decide_release([task("mmlu", "critical", **GO_TASK), *two], max_supporting_failures=1)
    assert blocked.verdict == "NO-GO"
    assert blocked.reason == "2 supporting tasks are NO-GO (s1, s2), more than the 1 the policy allows"
    assert [t.name for t in blocked.tasks if t.blocking] == ["s1", "s2"]
    # one supporting NO-GO (s1: u = 0.002 x 2 = 0.004 < 1) is within K = 1: GO, and said
    one = decide_release([task("mmlu", "critical", **GO_TASK), two[0], two[2]], max_supporting_failures=1)
    assert one.verdict == "GO" and one.reason == "every critical task is GO (mmlu); 1 supporting NO-GO, 1 allowed"
    assert decide_release([task("mmlu", "critical", **GO_TASK), two[0], two[2]], 0).verdict == "NO-GO"


def test_advisory_tasks_never_block():
    release = decide_release([task("mmlu", "critical", **GO_TASK), task("arc", "advisory", 1e-6, False),
                              task("json", "advisory", error="CUDA out of memory")], 0)
    assert release.verdict == "GO"
    assert [(t.name, t.verdict, t.blocking) for t in release.tasks] == [
        ("mmlu", "go", False), ("arc", "no-go", False), ("json", "failed", False)]


def test_holm_across_the_critical_tier_turns_a_borderline_rejection_into_inconclusive():
    # alone, p 0.03 < 0.05 rejects. Two critical tasks: u = 0.6 and 10 -> 2 x 0.6 = 1.2 >= 1: not rejected,
    # p_adj = 0.05 x 1.2 = 0.06; its GO claim is not shown either -> INCONCLUSIVE, so the release is too
    borderline = task("mmlu", "critical", 0.03, False, advice="about 300 more samples would decide")
    other = task("gsm8k", "critical", 0.5, True)
    holm = decide_release([borderline, other], 0)
    assert holm.verdict == "INCONCLUSIVE"
    assert [(t.verdict, t.p_adjusted) for t in holm.tasks] == [("inconclusive", pytest.approx(0.06)),
                                                               ("go", pytest.approx(0.5))]
    assert [t.name for t in holm.need_samples] == ["mmlu"] and holm.need_samples[0].advice.startswith("about 300")
    assert holm.reason == "critical task mmlu is not decided yet (inconclusive): more samples would decide"
    # without a correction the same p-value blocks the release; as the only critical task it does with Holm too
    assert decide_release([borderline, other], 0, correction="none").verdict == "NO-GO"
    assert decide_release([borderline], 0).verdict == "NO-GO"


def test_holm_at_each_tests_own_alpha():
    # u = 0.03/0.05 = 0.6 and 0.0015/0.002 = 0.75: 2 x 0.6 = 1.2, max(1.2, 0.75) = 1.2 -> neither rejected;
    # p_adj = 0.05 x 1.2 = 0.06 and 0.002 x 1.2 = 0.0024 (each alone rejects: 0.03 < 0.05, 0.0015 < 0.002)
    tasks = [task("mmlu", "critical", 0.03, False), task("cnn", "critical", 0.0015, False, alpha=0.002)]
    release = decide_release(tasks, 0)
    assert [t.p_adjusted for t in release.tasks] == pytest.approx([0.06, 0.0024])
    assert release.verdict == "INCONCLUSIVE" and [t.name for t in release.need_samples] == ["mmlu", "cnn"]
    # a supporting claim can block the release too, so it is in the same family: the same two, one per tier,
    # give the same adjusted p-values and neither is rejected
    mixed = decide_release([task("mmlu", "critical", 0.03, False), task("cnn", "supporting", 0.0015, False,
                                                                        alpha=0.002)], 0)
    assert [t.p_adjusted for t in mixed.tasks] == pytest.approx([0.06, 0.0024])
    assert mixed.verdict == "INCONCLUSIVE" and [t.verdict for t in mixed.tasks] == ["inconclusive", "inconclusive"]


def _false_no_go(tiers: list[str], k: int, alpha: float = 0.05) -> float:
    """P(release NO-GO) when nothing regressed, each task's regression p-value independent and uniform, no GO
    claim shown: exact, since the verdict is constant on each cell of the grid cut at alpha / j (j = 1..m),
    the only thresholds Holm (or no correction) compares a p-value with."""
    import itertools

    m = len(tiers)
    cuts = sorted({0.0, 1.0, *(alpha / j for j in range(1, m + 1))})
    cells = list(zip(cuts, cuts[1:]))
    total = 0.0
    for box in itertools.product(cells, repeat=m):
        evidence = [task(f"t{i}", tier, (lo + hi) / 2, False) for i, (tier, (lo, hi)) in enumerate(zip(tiers, box))]
        if decide_release(evidence, k).verdict == "NO-GO":
            total += math.prod(hi - lo for lo, hi in box)
    return total


def test_nothing_regressed_one_critical_and_one_supporting_task_block_the_release_at_most_alpha():
    # one Holm family of two: NO-GO exactly when the smaller p < alpha / 2: 1 - (1 - 0.025)^2 = 0.049375
    # (one family per tier gave 1 - 0.95^2 = 0.0975)
    assert _false_no_go(["critical", "supporting"], 0) == pytest.approx(1 - 0.975 ** 2, abs=1e-12)
    for tiers, k in ((["critical", "critical", "supporting", "supporting"], 0),
                     (["critical", "supporting", "supporting", "supporting"], 1),
                     (["critical", "supporting", "advisory"], 0)):
        assert _false_no_go(tiers, k) <= 0.05 + 1e-12


def test_a_failed_critical_job_fails_the_release_and_a_failed_supporting_one_counts_as_a_possible_no_go():
    failed = decide_release([task("mmlu", "critical", error="ModelError: no checkpoint"),
                             task("gsm8k", "critical", 0.0001, False)], 0)
    assert failed.verdict == FAILED and failed.reason == "critical task mmlu failed: ModelError: no checkpoint"
    evidence = [task("mmlu", "critical", **GO_TASK), task("ppl", "supporting", error="did not run in this sweep")]
    unsure = decide_release(evidence, 0)
    assert unsure.verdict == "INCONCLUSIVE" and "supporting task ppl failed" in unsure.reason
    assert [t.name for t in unsure.tasks if t.blocking] == ["ppl"]
    assert decide_release(evidence, 1).verdict == "GO"  # even as a NO-GO it would be within K = 1


def test_deterministic_rules_keep_their_verdict_and_no_verdict_is_not_go():
    exact = task("passkey", "critical", None, shown=True)  # the exact rule failed: NO-GO whatever the family
    assert decide_release([exact, task("mmlu", "critical", **GO_TASK)], 0).verdict == "NO-GO"
    threshold = task("passkey", "critical", None, shown=False)  # an explicit threshold held: GO
    assert decide_release([threshold], 0).verdict == "GO"
    no_reference = decide_release([task("mmlu", "critical")], 0)
    assert no_reference.verdict == "INCONCLUSIVE" and no_reference.tasks[0].verdict == "no verdict"


def test_the_noninferiority_gate_reads_worse_but_within_tolerance_as_go():
    both = TaskEvidence("mmlu", "critical", (Claim(0.001, 0.05, True),), True, "noninferiority")
    assert decide_release([both], 0).verdict == "GO"
    assert decide_release([TaskEvidence("mmlu", "critical", (Claim(0.001, 0.05, True),), True)], 0).verdict == "NO-GO"


def test_an_unknown_tier_is_refused():
    with pytest.raises(ValueError, match="unknown tier"):
        decide_release([task("mmlu", "essential", **GO_TASK)], 0)


def test_a_task_without_a_reference_asks_for_one_not_for_samples():
    # reference.mode=skip: the job gives no verdict (no claims, no within); more samples would not decide it
    release = decide_release([task("mmlu", "critical"), task("gsm8k", "critical", **GO_TASK)], 0)
    assert release.verdict == "INCONCLUSIVE"
    assert {t.name: t.verdict for t in release.tasks}["mmlu"] == "no verdict"
    assert "has no verdict (no reference" in release.reason and "more samples would decide" not in release.reason
    assert "reference.mode=check" in release.reason
