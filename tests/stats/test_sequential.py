"""Group-sequential gates: boundaries against published tables, error rates and expected n by simulation,
the paired (McNemar) monitor on real decisions, and the job flow with the scripted fake backend.

Published values used:
* Lan-DeMets O'Brien-Fleming-type spending, one-sided alpha 0.025, K = 4 equally spaced looks:
  4.3326, 2.9631, 2.3590, 2.0141 (gsDesign, ``gsDesign(k=4, test.type=1, alpha=0.025, sfu=sfLDOF)``,
  the package's vignette and manual; also Jennison & Turnbull 2000, chapter 7 for the same spending).
* Classic constant boundaries of Jennison & Turnbull (2000), tables 2.1 and 2.3, two-sided 0.05, K = 4:
  Pocock C_P = 2.361; O'Brien-Fleming C_B = 2.024 (bounds C_B sqrt(K / k)). Each has one-sided crossing
  probability 0.025 under H0 (up to the rounding of the published constants).
* Lan-DeMets spending functions in closed form (Lan & DeMets 1983): OBF type
  ``2 - 2 Phi(z_{1-alpha/2} / sqrt(t))``, Pocock type ``alpha log(1 + (e - 1) t)``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from runner.stats.numerics import group_sequential as gs
from runner.stats.rules.sequential import Monitor
from runner.stats.numerics.looks import look_sizes

EQ4 = [0.25, 0.5, 0.75, 1.0]


def cfg(**kw) -> gs.SequentialConfig:
    return gs.SequentialConfig(**({"enabled": True} | kw))


# ------------------------------------------------------------------------------ boundaries
def test_obrien_fleming_spending_matches_gsdesign():
    d = gs.design(EQ4, 0.025, 0.1, "obf", "none")
    assert d.efficacy == pytest.approx((4.3326, 2.9631, 2.3590, 2.0141), abs=2e-4)


def test_classic_constant_boundaries_of_jennison_turnbull_have_their_published_level():
    none = [-math.inf] * 4
    pocock = sum(gs.crossing(EQ4, none, [2.361] * 4, 0.0)[0])
    obf = sum(gs.crossing(EQ4, none, [2.024 * math.sqrt(4 / k) for k in (1, 2, 3, 4)], 0.0)[0])
    assert pocock == pytest.approx(0.025, abs=1e-4) and obf == pytest.approx(0.025, abs=1e-4)


def test_spending_functions_in_closed_form():
    # OBF type at t = 0.25, alpha 0.025: 2 - 2 Phi(2.2414 / 0.5) = 2 (1 - Phi(4.4827)) = 7.37e-6
    assert gs.spend("obf", 0.25, 0.025) == pytest.approx(7.3715e-6, rel=1e-3)
    assert gs.spend("obf", 1.0, 0.025) == pytest.approx(0.025)
    assert gs.spend("pocock", 0.5, 0.025) == pytest.approx(0.025 * math.log(1 + (math.e - 1) / 2))


def test_pocock_spending_spends_early_and_costs_more_information():
    obf, poc = gs.design(EQ4, 0.025, 0.1, "obf", "none"), gs.design(EQ4, 0.025, 0.1, "pocock", "none")
    assert poc.efficacy[0] < 2.5 < obf.efficacy[0]
    assert 1.0 < obf.inflation < 1.05 < poc.inflation  # J&T table 7.6: OBF-type ~1.02, Pocock-type ~1.1 at K=4


def test_futility_bounds_meet_at_the_last_look_and_give_the_planned_power():
    d = gs.design(EQ4, 0.025, 0.1, "obf", "obf")
    assert d.futility[-1] == d.efficacy[-1]
    assert all(a < b for a, b in zip(d.futility[:-1], d.efficacy[:-1]))
    up, _ = d.stopping(d.drift)
    assert sum(up) == pytest.approx(0.9, abs=1e-6)
    # non-binding: the false-alarm rate with the futility bounds obeyed is below alpha
    up0, _ = d.stopping(0.0)
    assert sum(up0) < 0.025
    binding = gs.design(EQ4, 0.025, 0.1, "obf", "obf", binding=True)
    assert sum(binding.stopping(0.0)[0]) == pytest.approx(0.025, abs=1e-6)
    assert binding.efficacy[-1] < d.efficacy[-1] and binding.drift < d.drift


def _brownian_exits(rng, d: gs.Design, drift: float, reps: int, futility: bool):
    """Per look, the share of ``reps`` paths of the canonical process (``S(t) = W(t) + drift t``,
    ``Z_k = S(t_k) / sqrt(t_k)``) that first leave above ``b_k`` and below ``a_k`` (``futility``: obeyed)."""
    t = np.asarray(d.info)
    steps = rng.standard_normal((len(t), reps)) * np.sqrt(np.diff(t, prepend=0.0))[:, None]
    zs = (np.cumsum(steps, axis=0) + drift * t[:, None]) / np.sqrt(t)[:, None]
    alive = np.ones(reps, bool)
    up, down = [], []
    for k in range(len(t)):
        hi = alive & (zs[k] >= d.efficacy[k])
        lo = alive & ~hi & (zs[k] <= d.futility[k]) if futility else np.zeros(reps, bool)
        up.append(hi.mean())
        down.append(lo.mean())
        alive &= ~(hi | lo)
    return np.array(up), np.array(down)


@pytest.mark.parametrize("kind, lo, hi", [("paired", 1.15, 1.16), ("unpaired", 1.18, 1.195)])
def test_default_design_costs_16_to_19_percent_more_samples_by_monte_carlo(kind, lo, hi):
    """The defaults (alpha 0.05, beta 0.2, K = 4, OBF-type efficacy and futility, non-binding) inflate the
    maximum n by 1.1555 (paired) and 1.1886 (unpaired), not the 2-11% of alpha 0.025 / beta 0.1.

    Checked without the recursive integration: simulated Brownian paths at the design's information
    fractions must spend alpha (futility ignored) and beta (futility obeyed, at the design's drift)
    along the closed-form Lan-DeMets OBF curve 2 - 2 Phi(z_{1-e/2} / sqrt(t)), and give power 0.80 at
    that drift; those three properties fix the design, so its drift, hence the inflation
    (drift / (z_.95 + z_.8))^2, is confirmed. At the 11% inflation the power falls short."""
    from scipy.stats import norm

    rng = np.random.default_rng(20261126)
    info = EQ4 if kind == "paired" else [2 * s / (1 + s) for s in EQ4]  # unpaired: reference fixed on n
    d = gs.design(info, 0.05, 0.2, "obf", "obf")
    fixed = norm.isf(0.05) + norm.isf(0.2)  # 2.4865
    assert lo < (d.drift / fixed) ** 2 < hi
    reps = 400_000

    def tol(p: float) -> float:
        return 4 * math.sqrt(max(p * (1 - p), 1e-4) / reps)

    def obf(total: float, t: float) -> float:
        return 2 * norm.sf(norm.isf(total / 2) / math.sqrt(t))

    up0, _ = _brownian_exits(rng, d, 0.0, reps, futility=False)
    for k, t in enumerate(info):
        assert up0[: k + 1].sum() == pytest.approx(obf(0.05, t), abs=tol(obf(0.05, t)))
    up1, down1 = _brownian_exits(rng, d, d.drift, reps, futility=True)
    for k, t in enumerate(info[:-1]):
        assert down1[: k + 1].sum() == pytest.approx(obf(0.2, t), abs=tol(obf(0.2, t)))
    assert up1.sum() == pytest.approx(0.8, abs=tol(0.8))
    short, _ = _brownian_exits(rng, d, math.sqrt(1.11) * fixed, reps, futility=True)
    assert short.sum() < 0.8 - tol(0.8)


def test_stagewise_p_value_is_below_alpha_exactly_when_a_bound_was_crossed():
    d = gs.design(EQ4, 0.05, 0.2, "obf", "obf")
    for k in range(4):
        at = gs.stagewise_p(d.info, d.efficacy, d.futility, k, d.efficacy[k], False)
        assert at == pytest.approx(gs.spend("obf", d.info[k], 0.05), abs=1e-6)
        assert gs.stagewise_p(d.info, d.efficacy, d.futility, k, d.efficacy[k] - 0.05, False) > at
    assert gs.stagewise_p(d.info, d.efficacy, d.futility, 0, 0.0, False) == pytest.approx(0.5, abs=1e-9)


def test_look_sizes_are_prefixes_ending_at_n():
    assert look_sizes(EQ4, 37) == [10, 19, 28, 37]
    assert look_sizes([0.5, 1.0], 1) == [1]
    with pytest.raises(Exception, match="end at 1"):
        gs.look_fractions(cfg(fractions=[0.5, 0.9]))


# ------------------------------------------------------------------------------ simulation
def _simulate_unpaired(rng, d: gs.Design, sizes: list[int], p_ref: float, p_new: float, reps: int):
    """0/100 scores, sigma 50: a reference mean on n samples, the new run's running means at the looks."""
    n = sizes[-1]
    ref = rng.binomial(n, p_ref, reps) / n * 100
    counts = np.cumsum([rng.binomial(b - a, p_new, reps) for a, b in zip([0] + sizes[:-1], sizes)], axis=0)
    regress = np.zeros(reps, bool)
    alive = np.ones(reps, bool)
    used = np.full(reps, n, float)
    for k, nk in enumerate(sizes):
        zk = (ref - counts[k] / nk * 100) / math.sqrt(2500 * (1 / nk + 1 / n))
        hit = alive & (zk >= d.efficacy[k])
        stop = alive & (hit | (zk <= d.futility[k]))
        regress |= hit
        used[stop] = nk
        alive &= ~stop
    return regress.mean(), used.mean()


def test_unpaired_simulation_keeps_alpha_and_beta_and_saves_samples():
    rng = np.random.default_rng(7)
    sizes = [100, 200, 300, 400]
    d = gs.design(gs.unpaired_info([s / 400 for s in sizes]), 0.05, 0.2, "obf", "obf")
    theta = d.drift * math.sqrt(2 * 2500 / 400)  # points
    reps = 20000
    fa, n0 = _simulate_unpaired(rng, d, sizes, 0.6, 0.6, reps)
    power, n1 = _simulate_unpaired(rng, d, sizes, 0.6, 0.6 - theta / 100, reps)
    tol_a, tol_b = 3 * math.sqrt(0.05 * 0.95 / reps), 3 * math.sqrt(0.2 * 0.8 / reps)
    assert fa <= 0.05 + tol_a
    assert power >= 0.8 - tol_b
    assert n0 / 400 == pytest.approx(gs.expected_fraction(d, [0.25, 0.5, 0.75, 1.0], 0.0), abs=0.02)
    assert n1 / 400 == pytest.approx(gs.expected_fraction(d, [0.25, 0.5, 0.75, 1.0], d.drift), abs=0.02)
    assert n0 / 400 < 0.67  # a third or more saved on a passing gate


def test_paired_mcnemar_monitor_keeps_alpha_and_power(tmp_path):
    """The runtime monitor itself (bounds from observed discordant pairs) on simulated paired 0/100 data."""
    rng = np.random.default_rng(11)
    n, d0 = 400, 0.10
    mon = Monitor(cfg(), n, 0.05, 0.2, kind="mcnemar")
    sizes = mon.sizes
    theta = mon.design.drift * 100 * math.sqrt(d0 / n)  # points, discordance d0 held (split model)

    def run(delta: float, reps: int) -> tuple[float, float]:
        pb, pc = (d0 + delta) / 2, (d0 - delta) / 2
        regress, used = 0, 0
        for _ in range(reps):
            m = Monitor(cfg(), n, 0.05, 0.2)
            b = c = 0
            prev = 0
            for nk in sizes:
                draw = rng.multinomial(nk - prev, [pb, pc, 1 - pb - pc])
                b, c, prev = b + draw[0], c + draw[1], nk
                m.observe(_paired_decision(b, c, nk), nk)
                if m.stopped:
                    break
            regress += m.stopped == "regression"
            used += m.looks[-1].n
        return regress / reps, used / reps

    reps = 400  # the false-alarm side is also a cell of the calibration grid (runner/stats/rules/sequential.py)
    fa, n0 = run(0.0, reps)
    power, n1 = run(theta / 100, reps)
    assert fa <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
    assert power >= 0.8 - 3 * math.sqrt(0.2 * 0.8 / reps)
    assert n0 / n < 0.67 and n1 / n < 0.85


def test_the_paired_design_is_read_only_once_the_kind_is_known():
    """Before its first look a monitor does not know whether the test is paired: reading its design then
    gave the unpaired one (information 2s/(1+s)), so the paired simulation planned the wrong theta."""
    with pytest.raises(ValueError, match="kind"):
        Monitor(cfg(), 400, 0.05, 0.2).design  # noqa: B018
    paired = Monitor(cfg(), 400, 0.05, 0.2, kind="mcnemar").design
    assert paired.info == pytest.approx(EQ4)  # McNemar: information in discordant pairs ~ samples
    assert Monitor(cfg(), 400, 0.05, 0.2, kind="unpaired").design.info == pytest.approx([0.4, 2 / 3, 6 / 7, 1.0])


def _paired_decision(b: int, c: int, n: int):
    """The fields of runner.stats.decision.Decision the monitor reads, for a paired 0/100 result."""
    paired = SimpleNamespace(discordant=(b, c), mean_diff=100.0 * (c - b) / n)
    verdict = SimpleNamespace(params=SimpleNamespace(higher_is_better=True))
    return SimpleNamespace(rule="paired", verdict=verdict, paired=paired)


def test_a_last_look_without_new_discordant_pairs_retests_the_last_informative_look_with_the_alpha_left():
    """Looks at 25/50/75/100 with (b, c) = (3,0), (5,0), (5,0), (5,0): looks 3 and 4 add no discordant pair.

    Look 3 tests nothing and spends nothing; the last look spends what is left of alpha on the same
    statistic Z = 5 / sqrt(5) as look 2. Non-binding, the final bound c solves
    P(Z_1 >= b_1 or Z_2 >= c) = alpha (looks 2's own bound drops out), with Corr(Z_1, Z_2) = sqrt(3/5)
    and b_1 the OBF-type bound at t = 1/4: 1 - Phi(b_1) = 2 (1 - Phi(z_.975 / 0.5)), b_1 = 3.7496.
    scipy's bivariate normal (Genz), not the recursive integration: c = 1.6449, and the stage-wise
    p-value P(Z_1 >= b_1 or Z_2 >= sqrt(5)) = 0.01268. The fixed exact test at full alpha
    (p = 1/32) must not decide."""
    from scipy.optimize import brentq
    from scipy.stats import multivariate_normal, norm

    r = math.sqrt(3 / 5)
    joint = multivariate_normal(mean=[0.0, 0.0], cov=[[1.0, r], [r, 1.0]])
    b1 = norm.isf(2 * norm.sf(norm.isf(0.025) / 0.5))
    c_final = brentq(lambda c: joint.cdf([b1, c]) - 0.95, 1.0, 3.0)
    p_final = 1 - joint.cdf([b1, math.sqrt(5)])
    assert b1 == pytest.approx(3.7496, abs=1e-4) and c_final == pytest.approx(1.6449, abs=1e-3)
    assert p_final == pytest.approx(0.01268, abs=1e-4)

    mon = Monitor(cfg(), 100, 0.05, 0.2)
    assert mon.sizes == [25, 50, 75, 100]
    for (b, c), nk in zip([(3, 0), (5, 0), (5, 0), (5, 0)], mon.sizes):
        mon.observe(_paired_decision(b, c, nk), nk)
    looks = mon.looks
    assert looks[0].efficacy == pytest.approx(b1, abs=1e-4)
    assert looks[2].efficacy == math.inf  # no new information: no test, no alpha spent
    assert looks[3].efficacy == pytest.approx(c_final, abs=2e-3) == looks[3].futility
    assert mon.stopped == "regression"
    result = mon.result(False, 1 / 32)  # the fixed exact McNemar test's verdict on (5, 0), which must not be used
    assert result.reason == "regression" and not result.passed and result.stopped_at == 4
    assert result.p_value == pytest.approx(p_final, abs=2e-4) and result.p_value < 0.05
    low, high = result.rci  # estimate -5 points, se sqrt(5) points at n = 100: -5 +- c sqrt(5)
    assert high == pytest.approx(-5 + c_final * math.sqrt(5), abs=5e-3) and high < 0
    assert low == pytest.approx(-5 - c_final * math.sqrt(5), abs=5e-3)
    assert "stopped at look 4 of 4: regression shown" in result.render()


def test_a_monitor_that_never_saw_information_follows_the_fixed_rule_and_says_so():
    """No discordant pair at any look: nothing was tested, so the one fixed test decides, label included."""
    mon = Monitor(cfg(), 100, 0.05, 0.2)
    for nk in mon.sizes:
        mon.observe(_paired_decision(0, 0, nk), nk)
    result = mon.result(True, 1.0)
    assert result.reason == "pass" and result.passed and result.p_value == 1.0 and result.rci is None


# ------------------------------------------------------------------------------ monitor on real decisions
def test_monitor_on_real_paired_decisions_stops_a_clear_regression_at_the_first_look(tmp_path):
    from tests.stats.test_decision import decide, reference, stats

    ref = {f"s/{i:03d}": (100.0 if i % 2 else 0.0) for i in range(200)}
    new = {k: 0.0 for k in ref}  # loses every right answer: b = 25 of the first 50, c = 0
    r = reference(tmp_path, ref, 50.0)
    mon = Monitor(cfg(), 200, 0.05, 0.2)
    ids = list(ref)
    first = mon.sizes[0]
    d = decide(r, {k: new[k] for k in ids[:first]}, 0.0, tmp_path)
    look = mon.observe(d, first)
    assert d.rule == "paired" and d.paired.discordant == (25, 0) and mon.kind == "mcnemar"
    assert look.z == pytest.approx(5.0) and mon.stopped == "regression"
    result = mon.result(d.passed, d.p_value)
    assert not result.passed and result.p_value < 0.05 and result.n_used == 50
    assert result.rci[1] < 0  # the repeated interval for new - reference excludes 0


# ------------------------------------------------------------------------------ the job flow
def _ppl_reference(tmp_path: Path, value: float) -> Path:
    refs = tmp_path / "refs"
    refs.mkdir(exist_ok=True)
    (refs / "perplexity.yaml").write_text(
        "HuggingFaceTB/SmolLM2-135M-Instruct:\n"
        "  - extra_acc_spec: corpus=pydoc_topics-32e8236b,min_tokens=256,max_input_len=512\n"
        f"    perplexity: {value}\n    num_samples: 37\n")
    return refs


def _job(tmp_path: Path, name: str, refs: Path, *extra: str):
    from runner.job.flow import run
    from tests.conftest import compose

    cfg_ = compose(["backend=fake", "task=perplexity", "tracking=none", f"reference.dir={refs}",
                    f"output_dir={tmp_path / name}", f"cache.path={tmp_path / 'gen.sqlite'}", *extra])
    outcome = run(cfg_)
    samples = [json.loads(line)["sample_id"] for line in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
    return outcome, samples, json.loads((tmp_path / name / "report.json").read_text())


def test_a_sequential_run_reaching_its_last_look_evaluates_the_fixed_n_samples(tmp_path):
    refs = _ppl_reference(tmp_path, 1.0078)  # the fake backend's perplexity: no drop, no early regression
    fixed, fixed_ids, fixed_report = _job(tmp_path, "fixed", refs)
    seq, seq_ids, seq_report = _job(tmp_path, "seq", refs, "stats.sequential.enabled=true",
                                    "stats.sequential.futility=none")
    assert len(fixed_ids) == 37 and seq_ids == fixed_ids
    assert seq.score == fixed.score and seq.decision.passed == fixed.decision.passed
    s = seq_report["decision"]["sequential"]
    assert s["stopped_at_look"] == 4 and s["samples_used"] == 37 and s["look_sizes"] == [10, 19, 28, 37]
    assert fixed_report["decision"]["sequential"] is None


def test_a_clear_pass_stops_at_the_first_look_on_its_prefix(tmp_path):
    refs = _ppl_reference(tmp_path, 30.0)  # the new run is far better than the reference
    fixed, fixed_ids, _ = _job(tmp_path, "fixed", refs)
    seq, seq_ids, report = _job(tmp_path, "seq", refs, "stats.sequential.enabled=true")
    assert seq_ids == fixed_ids[:10]
    s = report["decision"]["sequential"]
    assert s["stopped_at_look"] == 1 and s["reason"] == "pass" and report["decision"]["passed"]
    assert report["decision"]["p_regression"] == pytest.approx(s["p_value"]) and s["p_value"] > 0.99
    # GO: the p-value the tables show is the GO claim's (runner/stats/decision_text.py)
    assert report["decision"]["claim"] == "GO" and report["decision"]["p_value"] == report["decision"]["p_within"]
    assert seq.decision.n == 10 and "Sequential gate" in (tmp_path / "seq" / "report.txt").read_text()


def test_config_mistakes_are_refused_with_a_message():
    from runner.contract.errors import ConfigError
    from runner.stats.settings import StatsConfig, validate

    with pytest.raises(ConfigError, match="alpha-spending"):
        validate(StatsConfig(sequential=cfg(efficacy="haybittle")))
    validate(StatsConfig(gate="noninferiority", sequential=cfg()))  # stats.gate only settles a both-shown verdict


def test_the_planning_cli_prints_both_designs(capsys):
    from runner.commands.plan import main

    assert main(["--sequential", "4", "--alpha", "0.025", "--beta", "0.1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    unpaired, paired = out["designs"]
    assert paired["efficacy_z"] == pytest.approx([4.3326, 2.9631, 2.3590, 2.0141], abs=2e-4)  # gsDesign sfLDOF
    assert unpaired["info_fractions"] == pytest.approx([0.4, 2 / 3, 6 / 7, 1.0])
    for d in (unpaired, paired):
        assert d["max_n"] > d["fixed_n"] > d["expected_n_theta"] > d["expected_n_h0"]
        assert d["futility_z"][-1] == d["efficacy_z"][-1]
