"""CNN/DailyMail: ROUGE on hand-computed cases, upstream's aggregation (re-derived through the `evaluate`
library's seeding and rouge-score's BootstrapAggregator), upstream's subset and literal prompts,
truncation, data errors, end to end."""

from __future__ import annotations

import hashlib
import json

import pytest

from runner.contract.evaluator import Sample, ScoredSample
from evaluators.scoring.rouge import ROUGE_TYPES, RougeScorer
from evaluators.tasks.cnn_dailymail import CUE, CNNDailyMailEvaluator, prompt_body
from runner.contract.backend import ChatFormat
from runner.contract.requests import GenerationRequest
from runner.backends.prompting import encode_request
from runner.contract.errors import ConfigError, DataError
from runner.contract.task_config import DatasetConfig
from evaluators.tasks.cnn_dailymail import CNNDailyMailTaskConfig
from tests.conftest import ROOT, compose

FIXTURE = ROOT / "tests" / "data" / "cnn_dailymail"


def task(**kw) -> CNNDailyMailTaskConfig:
    dataset = kw.pop("dataset", DatasetConfig(source="local", local_path=str(FIXTURE), hub_config="3.0.0"))
    base = dict(_target_="evaluators.tasks.cnn_dailymail.CNNDailyMailEvaluator", name="cnn_dailymail", metric="rouge1",
                alpha=0.002, sigma=11.06, num_samples=512, max_input_len=924, max_output_len=100, dataset=dataset)
    return CNNDailyMailTaskConfig(**(base | kw))


# ------------------------------------------------------------------------------ ROUGE
def test_identical_texts_score_100_and_disjoint_texts_0():
    rouge = RougeScorer()
    same = rouge("The council approved the new cycling path.", "The council approved the new cycling path.")
    assert same == {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0, "rougeLsum": 100.0}
    assert rouge("seals on a sandbank", "museum reopens friday") == {
        "rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0, "rougeLsum": 0.0}
    # rouge-score's tokenizer lower-cases and drops punctuation
    assert rouge("THE Cat, sat!", "the cat sat")["rouge1"] == 100.0


def test_partial_overlap_matches_a_hand_count():
    # prediction: the cat sat on the mat / reference: the cat lay on the rug
    # unigrams: the x2, cat, on match -> 4 of 6 each way -> F = 2/3
    # bigrams: "the cat", "on the" match -> 2 of 5 each way -> F = 2/5
    # LCS: the cat on the -> 4 of 6 -> F = 2/3
    scores = RougeScorer()("the cat sat on the mat", "the cat lay on the rug")
    assert scores["rouge1"] == pytest.approx(200 / 3)
    assert scores["rouge2"] == pytest.approx(40.0)
    assert scores["rougeL"] == pytest.approx(200 / 3)
    # precision 2/2, recall 2/5 -> F = 2 * 1 * 0.4 / 1.4
    assert RougeScorer()("cat sat", "the cat sat down today")["rouge1"] == pytest.approx(100 * 0.8 / 1.4)


def test_lsum_splits_summaries_on_newlines_and_stemming_is_optional():
    # Lsum: union LCS per reference sentence; "b a" against lines "a" / "b" recovers both words
    rouge = RougeScorer()
    assert rouge("b a", "a\nb")["rougeLsum"] == pytest.approx(100.0)
    assert rouge("b a", "a\nb")["rougeL"] == pytest.approx(50.0)
    assert rouge("running dogs", "run dog")["rouge1"] == 0.0
    assert RougeScorer(use_stemmer=True)("running dogs", "run dog")["rouge1"] == 100.0


def test_mean_aggregation_is_the_plain_mean_of_per_sample_f_measures():
    ev = CNNDailyMailEvaluator(task(aggregation="mean"))
    a = ev.score(Sample("test/0", "x" + CUE, "the cat lay on the rug"), ["the cat sat on the mat"])
    b = ev.score(Sample("test/1", "y" + CUE, "museum reopens"), ["museum reopens"])
    assert a.score == pytest.approx(200 / 3) and b.score == 100.0
    metrics = ev.aggregate([a, b])
    assert metrics["rouge1"] == pytest.approx((200 / 3 + 100) / 2)
    assert metrics["rouge2"] == pytest.approx((40 + 100) / 2)
    assert set(metrics) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
    rouge2 = CNNDailyMailEvaluator(task(metric="rouge2"))
    assert rouge2.score(Sample("test/0", "x" + CUE, "the cat lay on the rug"), ["the cat sat on the mat"]).score == \
        pytest.approx(40.0)


def upstream_rouge(predictions: list[str], references: list[str], random_seed: int) -> dict[str, float]:
    """What TensorRT-LLM's CnnDailymail.compute_score returns (x 100), re-derived through the libraries it uses.

    Its Evaluator.__init__ calls np.random.seed(random_seed); evaluate.load then creates the rouge
    metric, an `evaluate.Metric` whose seed comes from numpy's state and which compute() sets before
    _compute; that _compute (the Hub's evaluate-metric/rouge, defaults: all four types, no stemmer,
    aggregator on) scores (reference, prediction) pairs with rouge-score and returns each type's
    BootstrapAggregator mid F-measure. The metric script itself is fetched from the Hub, so its
    _compute is restated here; the seeding is evaluate's own code.
    """
    import datasets
    import evaluate
    import numpy as np
    from rouge_score import rouge_scorer, scoring

    class Rouge(evaluate.Metric):
        def _info(self):
            return evaluate.MetricInfo(description="", citation="", inputs_description="", features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}))

        def _compute(self, predictions, references):
            scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=False)
            aggregator = scoring.BootstrapAggregator()
            for ref, pred in zip(references, predictions):
                aggregator.add_scores(scorer.score(ref, pred))
            return {k: v.mid.fmeasure for k, v in aggregator.aggregate().items()}

    state = np.random.get_state()
    try:
        np.random.seed(random_seed)
        metric = Rouge(keep_in_memory=True)
        return {k: 100 * float(v) for k, v in metric.compute(predictions=predictions, references=references).items()}
    finally:
        np.random.set_state(state)


# canned outputs for the fixture's six articles and one more; per-sample F-measures spread widely
CANNED = [
    ("Ellsworth bakery wins a prize for rye bread .", "Ellsworth bakery wins regional prize for its rye bread .\n"
     "Owner Mara Lind plans to buy a second oven with the award ."),
    ("Flooding cut off residents", "Flooding cut off about 400 residents of two mountain villages .\n"
     "Rescue teams delivered food and medicine by boat ."),
    ("The council approved a cycling path on the old railway line", "Council votes to convert unused railway line "
     "into a twelve kilometre cycling path .\nConstruction starts next spring ."),
    ("chess", "Teenage chess player beats three grandmasters at open tournament .\n"
     "She will play at the junior championship in August ."),
    ("Seals counted on a sandbank , a record", "Record count of more than two thousand seals on northern sandbank .\n"
     "Researchers credit cleaner water and fewer fishing nets ."),
    ("The museum reopens with a new wing", "Museum reopens after two year renovation with new modern art wing .\n"
     "Entry is free on the first Sunday of each month ."),
    ("nothing relevant here at all", "Museum reopens after two year renovation ."),
]


@pytest.mark.parametrize("seed", [0, 7])
def test_bootstrap_aggregation_is_upstreams_evaluate_rouge_score(seed):
    ev = CNNDailyMailEvaluator(task())
    ev.samples(3, seed)  # the run seed reaches the aggregation as it does upstream (random_seed)
    scored = [ev.score(Sample(f"test/{i}", "x" + CUE, ref), [pred]) for i, (pred, ref) in enumerate(CANNED)]
    expected = upstream_rouge([p for p, _ in CANNED], [r for _, r in CANNED], seed)
    metrics = ev.aggregate(scored)
    assert set(metrics) == set(ROUGE_TYPES)
    for name in ROUGE_TYPES:
        assert metrics[name] == pytest.approx(expected[name], abs=1e-9)
    mean = sum(s.score for s in scored) / len(scored)
    if seed == 7:  # the bootstrap median is not the mean: the probe tells the two rules apart
        assert abs(metrics["rouge1"] - mean) > 0.5
    # order matters upstream (the resampled indices refer to positions): the samples' order is kept
    assert ev.aggregate(scored[::-1])["rouge1"] == pytest.approx(
        upstream_rouge([p for p, _ in CANNED][::-1], [r for _, r in CANNED][::-1], seed)["rouge1"], abs=1e-9)


def test_bootstrap_aggregation_on_hand_derived_cases():
    ev = CNNDailyMailEvaluator(task())
    one = ev.score(Sample("test/0", "x" + CUE, "the cat lay on the rug"), ["the cat sat on the mat"])
    # one sample: every resample is that sample, so every mean (and their median) is its F = 2/3
    assert ev.aggregate([one])["rouge1"] == pytest.approx(200 / 3)
    assert ev.aggregate([one, one, one])["rouge1"] == pytest.approx(200 / 3)
    hit = ev.score(Sample("test/1", "y" + CUE, "museum reopens"), ["museum reopens"])
    miss = ev.score(Sample("test/2", "z" + CUE, "museum reopens"), ["seals counted"])
    # F of 100 and 0: a resample's mean is 0, 50 or 100 with odds 1:2:1, so the median of 1000 is 50
    assert ev.aggregate([hit, miss]) == {"rouge1": 50.0, "rouge2": 50.0, "rougeL": 50.0, "rougeLsum": 50.0}


# ------------------------------------------------------------------------------ prompt, subset, data
def test_prompt_is_the_article_then_the_cue_as_upstream():
    assert prompt_body("  He did n't go .") == "He didn't go ."
    ev = CNNDailyMailEvaluator(task())
    samples = ev.samples(512, seed=0)
    assert len(samples) == 6 and ev.source_used == "local"
    first_row = json.loads((FIXTURE / "3.0.0" / "test.jsonl").read_text().splitlines()[0])
    s0 = next(s for s in samples if s.id == "test/0")
    assert s0.prompt == first_row["article"] + " TL;DR:" and s0.target == first_row["highlights"]
    (req,) = ev.requests(s0)
    assert req.prompt == s0.prompt and req.greedy and req.max_tokens == 100 and req.truncation == "left"
    assert req.stop == () and req.messages is None and req.suffix == ""


def test_prompts_are_upstreams_literal_strings(tmp_path):
    # upstream: (article + " TL;DR:").strip().replace(" n't", "n't"); expected strings written out by hand
    articles = ["  The mayor said they do n't agree .\n",
                "\tIt is n't over , she could n't say more .",
                " n't at the start stays ; so does a trailing space ",
                "Plain text."]
    expected = ["The mayor said they don't agree .\n TL;DR:",
                "It isn't over , she couldn't say more . TL;DR:",
                "n't at the start stays ; so does a trailing space  TL;DR:",
                "Plain text. TL;DR:"]
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps({"article": a, "highlights": "h", "id": f"r{i}"}) + "\n"
                            for i, a in enumerate(articles)))
    ev = CNNDailyMailEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(path))))
    by_row = {s.id: s.prompt for s in ev.samples(4, seed=0)}
    assert [by_row[f"test/{i}"] for i in range(4)] == expected


def test_subset_is_upstreams_seeded_shuffle():
    import datasets

    rows = [json.loads(line) for line in (FIXTURE / "3.0.0" / "test.jsonl").read_text().splitlines()]
    for seed, n in ((0, 3), (7, 3), (0, 512)):
        upstream = datasets.Dataset.from_list(rows).shuffle(seed)  # TensorRT-LLM: self.data.shuffle(random_seed)
        expected = [r["id"] for i, r in enumerate(upstream) if i < n]  # its generate_samples: the first n
        got = [s.meta["article_id"] for s in CNNDailyMailEvaluator(task()).samples(n, seed)]
        assert got == expected


def test_a_seed_numpy_cannot_take_is_a_config_error():
    with pytest.raises(ConfigError, match="seed"):
        CNNDailyMailEvaluator(task()).samples(3, 2**32)


def test_malformed_rows_and_missing_columns_name_the_source(tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_text(json.dumps({"article": "Some text.", "highlights": "x"}) + "\n"
                   + json.dumps({"article": "", "highlights": "y"}) + "\n")
    dataset = DatasetConfig(source="local", local_path=str(bad))
    with pytest.raises(DataError, match="row 1") as err:
        CNNDailyMailEvaluator(task(dataset=dataset)).samples(2, 0)
    assert "article" in str(err.value) and str(bad) in str(err.value)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"document": "a", "summary": "b"}) + "\n")
    with pytest.raises(DataError, match="CNN/DailyMail's columns"):
        CNNDailyMailEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(other)))).samples(1, 0)


def test_unreachable_hub_names_the_local_alternative(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    ev = CNNDailyMailEvaluator(task(dataset=DatasetConfig(source="auto", hub_id="ccdv/cnn_dailymail", hub_config="3.0.0")))
    with pytest.raises(DataError) as err:
        ev.samples(4, 0)
    message = str(err.value)
    assert "ccdv/cnn_dailymail" in message and "task.dataset.local_path" in message
    assert "cannot be reached" in message and "no offline copy" in message


@pytest.mark.parametrize("field,value,where", [("truncation", "middle", "task.truncation"),
                                                ("metric", "bleu", "task.metric"),
                                                ("aggregation", "median", "task.aggregation")])
def test_bad_settings_are_config_errors(field, value, where):
    with pytest.raises(ConfigError, match=where):
        CNNDailyMailEvaluator(task(**{field: value}))


def test_protocol_deviations_go_into_extra_acc_spec():
    assert CNNDailyMailEvaluator(task()).extra_acc_spec() is None
    assert CNNDailyMailEvaluator(task(system_prompt="Be brief.")).extra_acc_spec() is None  # unused without the template
    spec = CNNDailyMailEvaluator(task(truncation="article_end", use_stemmer=True, aggregation="mean",
                                      max_input_len=2048, max_output_len=64, apply_chat_template=True,
                                      system_prompt="Be brief.")).extra_acc_spec()
    assert spec == ("truncation=article_end,use_stemmer=true,aggregation=mean,max_input_len=2048,max_output_len=64,"
                    "chat_template=true,system_prompt=" + hashlib.sha256(b"Be brief.").hexdigest()[:8])
    other = DatasetConfig(source="local", local_path=str(FIXTURE), hub_config="1.0.0", split="validation")
    assert CNNDailyMailEvaluator(task(dataset=other)).extra_acc_spec() == "config=1.0.0,split=validation"


def test_task_config_carries_upstreams_parameters():
    cfg = compose(["task=cnn_dailymail"]).task
    assert (cfg.metric, cfg.alpha, cfg.beta, cfg.sigma, cfg.num_samples) == ("rouge1", 0.002, 0.2, 11.06, 512)
    assert (cfg.max_input_len, cfg.max_output_len, cfg.max_batch_size) == (924, 100, 128)
    assert (cfg.dataset.hub_id, cfg.dataset.hub_config, cfg.dataset.split) == ("ccdv/cnn_dailymail", "3.0.0", "test")
    assert cfg.truncation == "article_start" and cfg.apply_chat_template is False and cfg.system_prompt is None
    assert cfg.aggregation == "bootstrap" and cfg.use_stemmer is False


# ------------------------------------------------------------------------------ truncation keeps the cue
@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from runner.backends.models import resolve_model_source

    source = resolve_model_source("smollm2_135m", "HuggingFaceTB/SmolLM2-135M-Instruct", None, "smollm2_135m_gguf")
    return AutoTokenizer.from_pretrained(source.location)


def long_sample() -> Sample:
    article = "FIRSTWORDS open the story. " + " ".join(f"Paragraph {i} adds detail." for i in range(300)) + " LASTWORDS end it."
    return Sample("test/9", prompt_body(article) + CUE, "x")


@pytest.mark.parametrize("truncation,kept,dropped", [("article_start", "LASTWORDS", "FIRSTWORDS"),
                                                     ("article_end", "FIRSTWORDS", "LASTWORDS")])
def test_truncation_cuts_the_article_never_the_cue(tokenizer, truncation, kept, dropped):
    ev = CNNDailyMailEvaluator(task(truncation=truncation))
    (req,) = ev.requests(long_sample())
    for chat in (ChatFormat(), ChatFormat(apply_chat_template=True)):
        ids = encode_request(tokenizer, chat, req, 120)
        text = tokenizer.decode(ids)
        assert len(ids) <= 120 and kept in text and dropped not in text
        if chat.apply_chat_template and truncation == "article_end":
            assert text.endswith(" TL;DR:<|im_end|>\n<|im_start|>assistant\n") and len(ids) >= 117
        elif not chat.apply_chat_template:
            assert text.endswith(" TL;DR:") and len(ids) >= 117  # the budget is used, give or take a boundary token


def test_left_truncation_keeps_the_bos_the_tokenizer_adds():
    from tests.backends.test_trtllm_backend import FakeTokenizer  # adds BOS (id 1) like Llama's tokenizer

    tok = FakeTokenizer()
    req = GenerationRequest("a b c d e f" + CUE, max_tokens=1)
    ids = encode_request(tok, ChatFormat(), req, 4)
    assert ids[0] == 1 and tok.decode(ids[1:]) == "e f TL;DR:"


# ------------------------------------------------------------------------------ end to end
@pytest.mark.e2e
def test_runs_end_to_end_on_the_fixture_and_logs_to_mlflow(tmp_path, mlflow_server, monkeypatch):
    from mlflow.tracking import MlflowClient

    from runner.job.flow import run

    monkeypatch.chdir(tmp_path)
    outcome = run(compose(["task=cnn_dailymail", "task.num_samples=3", "task.max_output_len=16",
                           f"task.dataset.local_path={FIXTURE}", "reference.mode=skip", "cache.enabled=false",
                           f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e-cnn",
                           f"output_dir={tmp_path / 'out'}"]))
    assert outcome.exit_status in (0, 4) and 0.0 <= outcome.score <= 100.0
    rows = [json.loads(line) for line in (outcome.output_dir / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["prompt"].endswith(" TL;DR:") for r in rows)
    expected = upstream_rouge([r["prediction"] for r in rows], [r["target"] for r in rows], 0)
    assert outcome.score == pytest.approx(expected["rouge1"], abs=1e-9)
    assert outcome.spec.extra_acc_spec == "max_output_len=16"
    metrics = MlflowClient(tracking_uri=mlflow_server).get_run(outcome.run_id).data.metrics
    assert metrics["rouge1"] == pytest.approx(outcome.score)
    assert {"rouge2", "rougeL", "rougeLsum", "score"} <= set(metrics)
