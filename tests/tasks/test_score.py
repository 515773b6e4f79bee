"""SCORE robustness tasks: extraction, variants, option identity, consistency rate, the consistency
gate, and equality with lm-evaluation-harness's own SCORE functions on the project's fixtures."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

import pytest

from evaluators.tasks.score import extract, upstream
from evaluators.tasks.score.data import AGIEVAL_SUBSETS, MATH_SUBSETS
from evaluators.tasks.score.evaluator import ScoreEvaluator
from evaluators.tasks.score.gate import ConsistencyGate
from evaluators.tasks.score.metrics import bootstrap_ratio
from runner.contract.errors import ConfigError, UserError
from evaluators.tasks.score import ScoreTaskConfig
from runner.contract.task_config import DatasetConfig
from tests.conftest import ROOT, compose

DATA = ROOT / "tests" / "data" / "score"
SUBSETS = {"agieval": list(AGIEVAL_SUBSETS), "math": list(MATH_SUBSETS)}  # the fixtures hold every subset
GENERATIONS = json.loads((DATA / "generations.json").read_text())


def evaluator(family: str, kind: str, **kw) -> ScoreEvaluator:
    base = dict(_target_="evaluators.tasks.score.evaluator.ScoreEvaluator", name=f"score_{kind}_{family}", num_samples=100,
                max_input_len=3072, max_output_len=1024, apply_chat_template=True, family=family, robustness=kind,
                dataset=DatasetConfig(local_path=str(DATA / family)), subsets=SUBSETS.get(family))
    return ScoreEvaluator(ScoreTaskConfig(**(base | kw)))


def canned(family: str, q: int, v: int) -> str:
    pool = GENERATIONS["math" if family == "math" else "mcq"]
    return pool[(q * 7 + v * 3) % len(pool)]


def run_canned(ev: ScoreEvaluator, answer=None):
    """Score every fixture question with canned generations (or ``answer(sample, variant)``)."""
    samples = ev.samples(100, 0)
    scored = []
    for qi, s in enumerate(samples):
        n = len(ev.requests(s))
        outs = [answer(s, s.meta["variants"][v]) if answer else canned(ev.family, qi, v) for v in range(n)]
        scored.append(ev.score(s, outs))
    return samples, scored


# ---------------------------------------------------------------------------------------------- extraction
@pytest.mark.parametrize("text,faithful,fixed", [
    ("The best answer is B", "B", "B"),
    ("B", "B", "B"),                                   # no marker: the whole reply
    ("b", "B", "B"),
    ("Let me think.\nThe best answer is (C).", "C", "C"),
    ("The best answer is: E", "THE", "E"),             # "is:" quirk
    ("Reasoning.\nThe best answer is\nD", "REASONING", "D"),  # "is\n" quirk: first word of the whole reply
    ("The best answer is A. Wait, the best answer is **C**", "C", "C"),  # the last marker wins
    ("The best answer is \nB", "", "B"),
    ("I am not sure", "I AM NOT SURE", "I AM NOT SURE"),
])
def test_choice_extraction_both_modes(text, faithful, fixed):
    assert extract.extract_choice(text, faithful=True) == faithful
    assert extract.extract_choice(text, faithful=False) == fixed


def test_choice_extraction_equals_upstream_postprocess():
    from lm_eval.tasks.score import utils

    post = getattr(utils, "__postprocess_pred")
    for text in [*GENERATIONS["mcq"], "The best answer is: E", "the best answer is\n\nB", "THE BEST ANSWER IS c)", "x"]:
        assert extract.extract_choice(text, True) == utils.translate_model_answer_to_labels(post(text), list("ABCDE"), "\n{letter}: {option}")


def test_consistency_rate_by_hand():
    assert extract.pair_agreement(["A", "A", "C"]) == (1, 3)
    assert extract.consistency_rate([extract.pair_agreement(["A", "A", "C"])]) == pytest.approx(1 / 3)
    # pooled over questions: (1 + 6) / (3 + 6)
    assert extract.consistency_rate([(1, 3), extract.pair_agreement(["B"] * 4)]) == pytest.approx(7 / 9)
    assert extract.consistency_rate([]) == 0.0


# ---------------------------------------------------------------------------------------------- option identity
@pytest.mark.parametrize("faithful,expected", [(True, ["C", "C", "C", "C"]), (False, ["A", "B", "C", "D"])])
def test_identity_of_a_model_that_always_answers_the_original_gold_letter(faithful, expected):
    # gold C (index 2); variant k swaps C's content with position k; the model always says "C"
    assert [extract.option_identity("C", k, 2, "ABCD", faithful) for k in range(4)] == expected


def test_identity_fixed_mode_follows_the_content():
    # gold B moved to D: D shows the correct option (B), B shows the old D, A is untouched
    assert extract.option_identity("D", 3, 1, "ABCD", False) == "B"
    assert extract.option_identity("B", 3, 1, "ABCD", False) == "D"
    assert extract.option_identity("A", 3, 1, "ABCD", False) == "A"
    assert extract.option_identity("THE", 3, 1, "ABCD", False) == "THE"


@pytest.mark.parametrize("family", ["mmlu_pro", "agieval"])
def test_same_position_model_consistency_faithful_one_fixed_zero(family):
    """The issue's example: answering the original gold position every time is consistent upstream."""
    for faithful, cr in ((True, 100.0), (False, 0.0)):
        ev = evaluator(family, "option_order", faithful=faithful)
        _, scored = run_canned(ev, lambda s, v: f"The best answer is {'ABCDEFGHIJ'[s.meta['answer_index']]}")
        assert ev.aggregate(scored)["options_consistency_rate"] == pytest.approx(cr)


# ---------------------------------------------------------------------------------------------- variants
def test_option_order_variants_faithful_duplicates_and_fixed():
    faithful = evaluator("mmlu_pro", "option_order").samples(100, 0)
    four = next(s for s in faithful if s.id == "biology/102")  # 4 options, gold B
    golds = [v["gold"] for v in four.meta["variants"]]
    assert golds == ["A", "B", "C", "D"] + ["B"] * 6  # positions E-J: unchanged copies, gold stays B
    assert len({v["prompt"] for v in four.meta["variants"]}) == 4
    a_variant = four.meta["variants"][0]["prompt"]
    assert "\nA: Mitochondrion\nB: Ribosome\nC: Golgi apparatus" in a_variant
    fixed = evaluator("mmlu_pro", "option_order", faithful=False).samples(100, 0)
    four = next(s for s in fixed if s.id == "biology/102")
    assert [v["key"] for v in four.meta["variants"]] == ["option_A", "option_B", "option_C", "option_D"]


def test_agieval_position_e_only_in_fixed_mode(caplog):
    faithful = evaluator("agieval", "option_order").samples(100, 0)
    five = next(s for s in faithful if s.id == "aqua_rat/0")
    assert [v["key"] for v in five.meta["variants"]] == ["option_A", "option_B", "option_C", "option_D"]
    assert "DEVIATION" not in caplog.text
    with caplog.at_level("WARNING", logger="runner"):
        fixed = evaluator("agieval", "option_order", faithful=False)
    assert "DEVIATION from upstream SCORE" in caplog.text and "AGIEval position E" in caplog.text
    five = next(s for s in fixed.samples(100, 0) if s.id == "aqua_rat/0")
    assert [v["gold"] for v in five.meta["variants"]] == list("ABCDE")
    assert "\nE: $8" in five.meta["variants"][4]["prompt"]
    assert fixed.extra_acc_spec() == "faithful=false"
    assert evaluator("agieval", "prompt", subsets=["sat_math"], max_output_len=8).extra_acc_spec() == \
        "max_output_len=8,subsets=sat_math"


def test_a_system_prompt_enters_the_key_when_the_chat_template_carries_it():
    brief = "system_prompt=" + hashlib.sha256(b"Be brief.").hexdigest()[:8]
    assert evaluator("math", "prompt", system_prompt="Be brief.").extra_acc_spec() == brief
    assert evaluator("math", "prompt", system_prompt="Be brief.", apply_chat_template=False).extra_acc_spec() == \
        "chat_template=false"  # without the template the backends never send it


def test_agieval_rows_prepared_as_upstream():
    s = evaluator("agieval", "prompt").samples(100, 0)[0]
    assert s.meta["variants"][0]["prompt"].startswith("A shop sells pens at 3 for $2. How much do 12 pens cost?\nA: $6\nB: $8")


def test_non_greedy_requests_carry_seed_and_temperature():
    ev = evaluator("math", "non_greedy")
    reqs = ev.requests(ev.samples(100, 0)[0])
    assert [(r.seed, r.temperature) for r in reqs] == [(s, 0.7) for s in (1, 2, 3, 4, 5)]
    assert len({r.prompt for r in reqs}) == 1 and reqs[0].max_tokens == 1024 and reqs[0].stop == ()


def test_prompt_requests_are_greedy_and_ten_templates():
    ev = evaluator("mmlu_pro", "prompt")
    reqs = ev.requests(ev.samples(100, 0)[0])
    assert len(reqs) == 10 and all(r.greedy and r.seed is None for r in reqs)
    assert len({r.prompt for r in reqs}) == 10


def test_seeded_subset_keeps_whole_questions():
    ev = evaluator("agieval", "option_order")
    a, b, c = ev.samples(2, 0), ev.samples(2, 0), ev.samples(2, 1)
    assert [s.id for s in a] == [s.id for s in b] and len(a) == 2
    assert [s.id for s in a] != [s.id for s in c]  # the seed picks the subset
    assert all(len(s.meta["variants"]) == 4 for s in a + c)
    all_ids = [s.id for s in ev.samples(100, 0)]
    assert all_ids == ["aqua_rat/0", "aqua_rat/1", "logiqa_en/0", "lsat_ar/0", "lsat_lr/0", "lsat_rc/0", "sat_en/0", "sat_math/0"]


# ---------------------------------------------------------------------------------------------- metrics
def test_mmlu_pro_accuracy_is_macro_over_categories_and_gate_is_micro():
    ev = evaluator("mmlu_pro", "prompt")
    # right on every math question (2) and wrong on every biology question (2)
    _, scored = run_canned(ev, lambda s, v: f"The best answer is {v['gold'] if s.meta['group'] == 'math' else 'Z'}")
    m = ev.aggregate(scored)
    assert m["0_macro_accuracy"] == 50.0 and m["accuracy"] == 50.0
    _, scored = run_canned(ev, lambda s, v: f"The best answer is {v['gold'] if s.id == 'math/101' else 'Z'}")
    m = ev.aggregate(scored)
    assert m["0_macro_accuracy"] == pytest.approx(25.0)  # (1/2 + 0) / 2 categories
    assert m["accuracy"] == pytest.approx(25.0)  # 1 of 4 questions
    assert m["consistency_rate"] == 100.0 and m["accuracy_range"] == 0.0


def test_macro_and_micro_differ_with_unequal_categories_and_nonzero_accuracies():
    """math: 1 of 2 right; biology: 1 of 1 right (the other biology question left out).
    Macro over categories = (50 + 100) / 2 = 75; micro over questions = 2 / 3 = 66.67."""
    ev = evaluator("mmlu_pro", "prompt")
    right = {"math/101", "biology/102"}
    _, scored = run_canned(ev, lambda s, v: f"The best answer is {v['gold'] if s.id in right else 'Z'}")
    kept = [s for s in scored if s.sample_id != "biology/104"]
    m = ev.aggregate(kept)
    assert m["0_macro_accuracy"] == pytest.approx(75.0)
    assert m["accuracy"] == pytest.approx(200.0 / 3)


def test_chance_level_follows_the_option_counts():
    """AGIEval: aqua_rat and the LSAT subsets have 5 options, logiqa_en and the SAT subsets 4; the
    fixture holds 5 questions of the first kind and 3 of the second: (5 x 20 + 3 x 25) / 8."""
    ev = evaluator("agieval", "prompt")
    assert ev.chance_level(ev.samples(100, 0)) == pytest.approx(175 / 8)
    math_ev = evaluator("math", "prompt")
    assert math_ev.chance_level(math_ev.samples(100, 0)) == 0.0


def test_bootstrap_se_matches_an_independent_computation():
    """The question-level bootstrap of the consistency rate, recomputed here from its definition with the
    same seeded generator: resample question indices, ratio of sums, sample standard deviation."""
    import numpy as np

    agree, pairs = [45, 0, 20, 45, 10, 30, 7], [45, 45, 45, 45, 45, 45, 10]
    got = bootstrap_ratio(agree, pairs, 4000, 11, 0.9)
    rng = np.random.default_rng(11)
    ratios = []
    for row in rng.integers(0, len(agree), size=(4000, len(agree))):
        ratios.append(100.0 * sum(agree[i] for i in row) / sum(pairs[i] for i in row))
    assert got.se == pytest.approx(float(np.std(ratios, ddof=1)), rel=1e-12)
    assert (got.low, got.high) == pytest.approx((np.quantile(ratios, 0.05), np.quantile(ratios, 0.95)), rel=1e-12)
    # and the delta-method standard error of a ratio estimator agrees to within the bootstrap's noise
    a, p = np.array(agree, float), np.array(pairs, float)
    r = a.sum() / p.sum()
    delta_se = 100.0 * np.sqrt(np.sum((a - r * p) ** 2) / (len(a) - 1) * len(a)) / p.sum()
    assert got.se == pytest.approx(delta_se, rel=0.15)


def test_bootstrap_is_seeded_and_brackets_the_value():
    agree, pairs = [45, 0, 20, 45, 10, 30], [45] * 6
    a = bootstrap_ratio(agree, pairs, 500, 3, 0.95)
    assert a == bootstrap_ratio(agree, pairs, 500, 3, 0.95)
    assert a.value == pytest.approx(100 * 150 / 270)
    assert a.low < a.value < a.high and a.se > 0
    same = bootstrap_ratio([45] * 5, [45] * 5, 200, 0, 0.95)
    assert same.se == 0 and same.low == same.high == 100.0


def test_consistency_gate_threshold_by_hand():
    # s = sqrt(2^2 + 1.5^2) = 2.5; z(0.05) = -1.6449 -> threshold = 80 - 4.112
    gate = ConsistencyGate("consistency_rate", 76.0, 80.0, 2.0, 1.5, 0.05, 0.2)
    assert gate.threshold == pytest.approx(80 - 1.644854 * 2.5, abs=1e-5) and gate.passed
    assert gate.theta == pytest.approx((1.644854 + 0.841621) * 2.5, abs=1e-5)
    assert not ConsistencyGate("consistency_rate", 75.8, 80.0, 2.0, 1.5, 0.05, 0.2).passed
    # no se recorded: the reference is taken to spread like this run
    assert ConsistencyGate("c", 0.0, 80.0, 2.0, None, 0.05, 0.2).spread == pytest.approx(2 * 2 ** 0.5)
    unchecked = ConsistencyGate("c", 10.0, None, 2.0, None, 0.05, 0.2)
    assert unchecked.passed and "not checked" in unchecked.render()


# ---------------------------------------------------------------------------------------------- errors
def test_config_errors_are_user_errors():
    with pytest.raises(ConfigError, match="MATH has none"):
        evaluator("math", "option_order")
    with pytest.raises(ConfigError, match="unknown agieval subset"):
        evaluator("agieval", "prompt", subsets=["lsat_xx"])
    with pytest.raises(ConfigError, match="unknown SCORE family"):
        evaluator("mmlu", "prompt")


def test_missing_lm_eval_says_how_to_install(monkeypatch):
    import importlib.util

    upstream.score_dir.cache_clear()
    upstream.templates.cache_clear()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a))
    try:
        with pytest.raises(UserError, match="lm-evaluation-harness") as err:
            evaluator("mmlu_pro", "prompt").samples(10, 0)
        assert "pip install" in err.value.render()
    finally:
        upstream.score_dir.cache_clear()
        upstream.templates.cache_clear()


def test_tasks_compose_with_dataset_in_the_name():
    cfg = compose(["task=score_option_order", "task.family=agieval"])
    assert cfg.task.name == "score_option_order_agieval" and cfg.task.robustness == "option_order"
    assert compose(["task=score_non_greedy", "task.family=math"]).task.seeds == [1, 2, 3, 4, 5]


# ---------------------------------------------------------------------------------------------- equality with upstream
UPSTREAM_MODULES = {"mmlu_pro": "mmlu_pro.utils_mmlu_pro", "agieval": "agi_eval.utils_agieval", "math": "math.utils_math"}
CASES = [("mmlu_pro", "prompt"), ("mmlu_pro", "option_order"), ("mmlu_pro", "non_greedy"),
         ("agieval", "prompt"), ("agieval", "option_order"), ("agieval", "non_greedy"),
         ("math", "prompt"), ("math", "non_greedy")]


def _upstream_docs(family, kind, mod):
    """Upstream's processed docs per subset, built by its own process_docs from the fixture files."""
    import datasets

    parts = SUBSETS.get(family, [None])
    out = []
    for subset in parts:
        path = DATA / family / (subset or "") / "test.jsonl"
        ds = datasets.load_dataset("json", data_files={"test": str(path)}, split="test")
        fn = {"prompt": "prompt_robustness_process_docs", "option_order": "option_order_robustness_process_docs",
              "non_greedy": "non_greedy_robustness_process_docs"}[kind]
        out.append((subset, list(getattr(mod, fn)(ds))))
    return out


def _weighted(per_subset):
    """lm-eval's group aggregation: subset values weighted by the subset's number of docs."""
    total = sum(n for _, n in per_subset)
    return sum(v * n for v, n in per_subset) / total


@pytest.mark.parametrize("family,kind", CASES)
def test_equal_to_lm_eval_score_functions(family, kind, monkeypatch):
    import importlib

    from lm_eval.tasks.score import utils

    if family == "math":  # upstream's grader insists on antlr 4.11; these fixtures never reach its LaTeX parser
        from lm_eval.tasks.score.math import math_grader

        monkeypatch.setattr(math_grader, "_check_antlr_version", lambda: None)
    mod = importlib.import_module(f"lm_eval.tasks.score.{UPSTREAM_MODULES[family]}")
    ev = evaluator(family, kind)
    samples, scored = run_canned(ev)
    ours = ev.aggregate(scored)

    # the same prompts, in the same order, and the same extracted answers
    our_prompts = [v["prompt"] for s in samples for v in s.meta["variants"]]
    our_answers = [r["answer"] for s in scored for r in s.meta["variants"]]
    docs = _upstream_docs(family, kind, mod)
    flat_docs = [d for _, ds in docs for d in ds]
    per_q = 1 if kind == "non_greedy" else len(samples[0].meta["variants"])
    if kind != "non_greedy":
        assert [utils.robustness_doc_to_text(d) for d in flat_docs] == our_prompts
    else:
        assert [utils.robustness_doc_to_text(d) for d in flat_docs] == our_prompts[::5]
    if family == "math":
        assert [d["answer"] for _, ds in docs for d in ds][::per_q] == [s.target for s in samples]

    expected: dict[str, float] = {}
    if kind == "non_greedy":
        from lm_eval.tasks.score import non_greedy_summarizer as summ

        rows = defaultdict(list)  # seed -> (question, final answer, gt)
        for qi, doc in enumerate(flat_docs):
            for si, seed in enumerate((1, 2, 3, 4, 5)):
                (value,) = mod.non_greedy_robustness_process_results(doc, [canned(family, qi, si)]).values()
                rows[seed].append(value)
        answers = [[rows[seed][qi][1] for seed in (1, 2, 3, 4, 5)] for qi in range(len(flat_docs))]
        assert [a for q in answers for a in q] == our_answers
        cr = summ.calculate_math_consistency_rate if family == "math" else summ.calculate_consistency_rate
        expected["consistency_rate"] = cr(answers)
        for seed in (1, 2, 3, 4, 5):
            same = (lambda a, g: mod.math_equal(a, g)) if family == "math" else (lambda a, g: a == g)
            expected[f"seed_{seed}_accuracy"] = sum(same(q, gt) for _, q, gt, _ in rows[seed]) / len(rows[seed])
    else:
        per_subset = defaultdict(list)
        q_offset = 0
        upstream_answers = []
        for subset, ds in docs:
            results = defaultdict(list)
            for di, doc in enumerate(ds):
                qi, vi = q_offset + di // per_q, di % per_q
                out = mod.process_results(doc, [canned(family, qi, vi)]) if family == "math" else \
                    getattr(mod, f"{kind}_robustness_process_results")(doc, [canned(family, qi, vi)])
                for metric, value in out.items():
                    results[metric].append(value)
                if family != "math":
                    upstream_answers.append(next(iter(out.values()))[2])
            q_offset += len(ds) // per_q
            for metric, values in results.items():
                per_subset[metric].append((_aggregate(family, mod, metric, values), len(ds)))
        if family != "math":
            assert upstream_answers == our_answers
        expected = {m: _weighted(v) for m, v in per_subset.items()}
    assert expected, "no upstream metric computed"
    for metric, value in expected.items():
        assert ours[metric] / 100 == pytest.approx(float(value), abs=6e-5), metric
    names = [m for m in ours if m in expected]
    assert len(names) == len(expected)


def _aggregate(family, mod, metric, values):
    if metric == "consistency_rate":
        name = {"mmlu_pro": "mmlu_pro_prompt_consistency_rate", "agieval": "agi_eval_prompt_consistency_rate",
                "math": "math_prompt_consistency_rate"}[family]
        return getattr(mod, name)(values)
    if metric == "options_consistency_rate":
        return mod.options_consistency_rate(values)
    if metric.startswith("per_option"):
        return getattr(mod, metric[:-1] + metric[-1].lower())(values)
    return getattr(mod, f"per_prompt_accuracy_{metric.split('_')[0]}")(values)


# ---------------------------------------------------------------------------------------------- the job's second gate
def test_job_records_both_references_and_fails_on_consistency(tmp_path, monkeypatch):
    from ruamel.yaml import YAML

    import runner.job.flow as job
    from runner.contract.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION

    refs = tmp_path / "refs"
    # the scripted backend stands in for a model: it always replies "The best answer is A"
    common = ["backend=fake", "backend.default_answer='The best answer is A'",
              "task=score_option_order", "task.family=agieval", f"task.dataset.local_path={DATA}",
              "task.subsets=[aqua_rat,logiqa_en,sat_math]", "tracking=none", "cache=off", f"reference.dir={refs}"]
    rec = job.run(compose([*common, "reference.mode=record", f"output_dir={tmp_path / 'rec'}"]))
    assert rec.exit_status == EXIT_OK
    # always "A": identities per question (faithful mapping) -> CR by hand
    # aqua_rat/0 gold B: k=A: A->B; k=B: A unchanged; k=C: A; k=D: A -> [B,A,A,A] 3 of 6 pairs
    # aqua_rat/1 gold C, logiqa_en/0 gold B, sat_math/0 gold C: the same pattern -> CR = 12/24 = 50
    assert rec.metrics["options_consistency_rate"] == pytest.approx(50.0)
    assert rec.metrics["accuracy"] == pytest.approx(25.0) and rec.metrics["per_option_accuracy_A"] == 100.0
    path = refs / "score_option_order_agieval.yaml"
    entry = YAML(typ="safe").load(path.read_text())["HuggingFaceTB/SmolLM2-135M-Instruct"][0]
    assert entry["accuracy"] == 25.0 and entry["options_consistency_rate"] == 50.0
    assert entry["extra_acc_spec"] == "subsets=aqua_rat+logiqa_en+sat_math"

    same = job.run(compose([*common, f"output_dir={tmp_path / 'same'}"]))
    # identical answers on a handful of samples: no difference is seen, but so few unchanged samples cannot show a
    # drop smaller than the tolerance (the betting test of the bounded scores): no regression, not yet GO
    assert same.exit_status == EXIT_INCONCLUSIVE and same.decision.rule == "paired"
    assert same.decision.outcome == "INCONCLUSIVE" and same.decision.passed
    assert "consistency gate: no regression shown" in (tmp_path / "same" / "report.txt").read_text()

    text = path.read_text().replace("options_consistency_rate: 50.0", "options_consistency_rate: 70.0")
    path.write_text(text.replace(f"options_consistency_rate_se: {entry['options_consistency_rate_se']}",
                                 "options_consistency_rate_se: 1.0"))
    worse = job.run(compose([*common, f"output_dir={tmp_path / 'worse'}"]))
    assert worse.exit_status == EXIT_REGRESSION and worse.decision.rule == "paired"
    assert worse.decision.passed and not worse.decision.all_passed  # the accuracy gate alone passes
    assert [g.metric for g in worse.decision.gates if not g.passed] == ["options_consistency_rate"]
    report = json.loads((tmp_path / "worse" / "report.json").read_text())
    assert report["passed"] is False


def test_suite_preset_lists_every_valid_job():
    from ruamel.yaml import YAML

    preset = YAML(typ="safe").load((ROOT / "conf" / "experiment" / "score.yaml").read_text())
    jobs = preset["hydra"]["sweeper"]["params"]["task"].split(",")
    variants = [p.stem for p in (ROOT / "conf" / "task").glob("score_*.yaml") if p.stem.endswith(("_mmlu_pro", "_agieval", "_math"))]
    assert sorted(jobs) == sorted(variants) and len(jobs) == 8
    for name in jobs:
        task = compose([f"task={name}"]).task
        assert task.name == name and ScoreEvaluator(ScoreTaskConfig(**{k: v for k, v in task.items()}))


# ---------------------------------------------------------------------------------------------- MATH grading
@pytest.mark.parametrize("a,b,same", [
    ("5", "5.00", True), ("x+11", "11+x", True), ("(1,2)", "(1, 2)", True), ("1,000", "1000", True),
    ("5\\text{ cm}", "5", True), ("\\frac12", "\\frac{1}{2}", True), ("7", "5", False), ("\\pi", "3.14159", False),
    # where math-verify's verdict differs from upstream's math_equal (README, "MATH grading")
    ("50", "0.5", False),            # upstream also accepts x100 and /100 (percentages)
    ("10.0001", "10", False),        # upstream: relative tolerance 1e-4
    ("1,2", "2,1", True),            # math-verify compares comma lists as sets; upstream in order
    ("x=5", "5", True),              # math-verify compares an equation's right-hand side
    ("\\dfrac{1}{2}", "0.5", True),  # upstream needs its LaTeX parser (antlr 4.11) for this
])
def test_math_equivalence(a, b, same):
    from evaluators.tasks.score.mathgrade import math_equivalent

    assert math_equivalent(a, b) is same
    assert math_equivalent(None, None) is False and math_equivalent(None, "5") is False


def test_math_reference_answers_come_from_upstream():
    samples = evaluator("math", "prompt").samples(100, 0)
    by_id = {s.id: s.target for s in samples}
    assert by_id["algebra/0"] == "5" and by_id["algebra/1"] == "x+11" and by_id["geometry/0"] == "(1,2)"
