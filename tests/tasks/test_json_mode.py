"""json_mode_eval: scoring on hand-written outputs, data, guided-decoding modes, the TensorRT-LLM translation
(test double), schema-constrained generation on the embedded model, and end to end."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

from runner.contract.evaluator import Sample
from evaluators.tasks.json_mode import JsonModeEvaluator, judge, unfence
from runner.backends.hf import guided
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.requests import GenerationRequest
from runner.contract.errors import ConfigError, DataError
from runner.contract.task_config import DatasetConfig
from evaluators.tasks.json_mode import JsonModeTaskConfig
from tests.conftest import ROOT, compose
from tests.backends.test_trtllm_backend import FakeTokenizer, engine_backend, fake, model_dir  # noqa: F401

FIXTURE = ROOT / "tests" / "data" / "json_mode_eval"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
CLOSED = PERSON | {"additionalProperties": False}


def task(**kw) -> JsonModeTaskConfig:
    dataset = kw.pop("dataset", DatasetConfig(source="local", local_path=str(FIXTURE), split="train"))
    base = dict(_target_="evaluators.tasks.json_mode.JsonModeEvaluator", name="json_mode_eval", num_samples=100,
                max_input_len=1024, max_output_len=512, apply_chat_template=True, dataset=dataset)
    return JsonModeTaskConfig(**(base | kw))


# ------------------------------------------------------------------------------ scoring
@pytest.mark.parametrize("output,schema,parsed,valid,correct", [
    ('{"name": "Ada", "age": 36}', PERSON, True, True, True),
    ('  {"age": 36, "name": "Ada"}\n', PERSON, True, True, True),  # key order and whitespace do not matter
    ('{"name": "Ada", "age": 36, "city": "London"}', PERSON, True, True, False),  # extra key: valid, not equal
    ('{"name": "Ada", "age": 36, "city": "London"}', CLOSED, True, False, False),  # extra key forbidden
    ('{"name": "Ada", "age": "36"}', PERSON, True, False, False),  # wrong type
    ('{"name": "Ada"}', PERSON, True, False, False),  # missing required key
    ('{"name": "Ada", "age": 36', PERSON, False, False, False),  # truncated: not JSON
    ("name: Ada, age: 36", PERSON, False, False, False),
    ('```json\n{"name": "Ada", "age": 36}\n```', PERSON, True, True, True),  # fenced, unwrapped
    ('{"name": "Ada", "age": 37}', PERSON, True, True, False),  # valid, wrong value
    ('{"name": "Ada", "age": 36.0}', PERSON, True, True, True),  # 36.0 is an integer to jsonschema, == 36 in Python
])
def test_judge_parses_validates_and_compares(output, schema, parsed, valid, correct):
    verdict = judge(output, schema, {"name": "Ada", "age": 36}, strip_code_fences=True)
    assert (verdict.parsed, verdict.valid, verdict.correct) == (parsed, valid, correct)


def test_fences_are_kept_when_stripping_is_off_and_only_whole_blocks_unwrap():
    fenced = '```\n{"name": "Ada", "age": 36}\n```'
    assert not judge(fenced, PERSON, {"name": "Ada", "age": 36}, strip_code_fences=False).parsed
    assert unfence(fenced) == '{"name": "Ada", "age": 36}'
    assert unfence('Here it is: ```json\n{}\n```') == 'Here it is: ```json\n{}\n```'  # prose around: left alone


def test_score_and_aggregate_report_parse_and_valid_rates():
    ev = JsonModeEvaluator(task())
    meta = {"messages": [["user", "x"]], "schema": json.dumps(CLOSED)}
    sample = Sample("train/0", "x", json.dumps({"name": "Ada", "age": 36}), meta)
    outputs = ['{"name": "Ada", "age": 36}', '{"name": "Ada", "age": 36, "x": 1}', "not json", '{"name": "Bo", "age": 1}']
    scored = [ev.score(sample, [o]) for o in outputs]
    assert [s.score for s in scored] == [100.0, 0.0, 0.0, 0.0]
    assert ev.aggregate(scored) == {"accuracy": 25.0, "parse_rate": 75.0, "schema_valid_rate": 50.0}


def upstream_json_mode_score(outputs: list[str], completions: list[str], schemas: list[str]) -> tuple[float, float]:
    """TensorRT-LLM's JsonModeEval.compute_score restated: (accuracy, grammar accuracy), both in %.

    An output counts when json.loads succeeds, jsonschema.validate passes with the row's schema, and
    the value == json.loads(completion); "grammar" counts parse-and-validate alone.
    """
    import jsonschema

    correct, grammar = [], []
    for output, ref, schema in zip(outputs, completions, schemas):
        try:
            value = json.loads(output)
            jsonschema.validate(value, json.loads(schema))
        except (json.JSONDecodeError, jsonschema.ValidationError):
            correct.append(False)
            grammar.append(False)
            continue
        correct.append(value == json.loads(ref))
        grammar.append(True)
    return 100 * sum(correct) / len(correct), 100 * sum(grammar) / len(grammar)


def test_constrained_scoring_follows_upstreams_rule_on_canned_outputs():
    ev = JsonModeEvaluator(task())
    ev.bind_backend(SimpleNamespace(name="trtllm", details={"guided_decoding": "xgrammar"}))
    samples = ev.samples(6, seed=0)
    rows = {s.id: s for s in samples}
    canned = {  # row -> output; fixture rows' expected objects are in tests/data/json_mode_eval/train.jsonl
        "train/0": ' {"population": 8200, "city": "Ellsworth"}\n',  # other key order, surrounding whitespace
        "train/1": '{"title": "Harbour Lights", "year": 1998, "available": 1}',  # 1 is not a boolean: invalid
        "train/2": '{"name": "river path", "tags": ["parks", "cycling"]}',  # list order differs: valid, unequal
        "train/3": '{"temperature": 21.5, "unit": "C"}',
        "train/4": '{"order_id": "A-17", "items": 0}',  # below the schema's minimum
        "train/5": '```json\n{"player": "Mira", "wins": 4}\n```',  # a fence is not JSON under constrained decoding
    }
    scored = [ev.score(rows[i], [out]) for i, out in canned.items()]
    assert [s.score for s in scored] == [100.0, 0.0, 0.0, 100.0, 0.0, 0.0]
    accuracy, grammar = upstream_json_mode_score(list(canned.values()), [rows[i].target for i in canned],
                                                 [rows[i].meta["schema"] for i in canned])
    metrics = ev.aggregate(scored)
    assert metrics["accuracy"] == pytest.approx(accuracy) == pytest.approx(200 / 6)
    assert metrics["schema_valid_rate"] == pytest.approx(grammar) == pytest.approx(300 / 6)


# ------------------------------------------------------------------------------ data and requests
def test_fixture_rows_become_chats_with_their_schema():
    ev = JsonModeEvaluator(task())
    samples = ev.samples(100, seed=0)
    assert len(samples) == 6 and ev.source_used == "local"
    rows = [json.loads(line) for line in (FIXTURE / "train.jsonl").read_text().splitlines()]
    s = next(x for x in samples if x.id == "train/2")
    assert s.target == rows[2]["completion"] and s.meta["schema"] == rows[2]["schema"]
    (req,) = ev.requests(s)
    assert req.messages == tuple((m["role"], m["content"]) for m in rows[2]["prompt"])
    assert req.messages[0][0] == "system" and "<schema>" in req.messages[0][1]
    assert req.json_schema == rows[2]["schema"] and req.max_tokens == 512 and req.greedy


def test_subset_is_upstreams_seeded_shuffle():
    import datasets

    rows = [json.loads(line) for line in (FIXTURE / "train.jsonl").read_text().splitlines()]
    for seed, n in ((0, 100), (0, 4), (3, 4)):
        upstream = datasets.Dataset.from_list(rows).shuffle(seed)  # TensorRT-LLM: self.data.shuffle(random_seed)
        expected = [r["completion"] for i, r in enumerate(upstream) if i < n]  # its generate_samples: the first n
        assert [s.target for s in JsonModeEvaluator(task()).samples(n, seed)] == expected


def test_the_chat_goes_through_the_template_as_upstream_renders_it():
    from runner.backends.prompting import encode_request

    # what do_apply_chat_template renders for fixture row 0 on a ChatML template (SmolLM2's), by hand
    expected = ("<|im_start|>system\nYou are a helpful assistant that answers in JSON. Here's the json schema you must "
                'adhere to:\n<schema>\n{"type": "object", "properties": {"city": {"type": "string"}, "population": '
                '{"type": "integer"}}, "required": ["city", "population"]}\n</schema>\n<|im_end|>\n'
                "<|im_start|>user\nGive the city and population for: Ellsworth has 8200 inhabitants.<|im_end|>\n"
                "<|im_start|>assistant\n")
    tokenizer = smollm2_tokenizer()
    ev = JsonModeEvaluator(task())
    (req,) = ev.requests(next(s for s in ev.samples(100, 0) if s.id == "train/0"))
    ids = encode_request(tokenizer, ChatFormat(apply_chat_template=True), req, 1024)
    assert tokenizer.decode(ids) == expected


def test_a_system_prompt_goes_before_the_rows_own_system_turn():
    ev = JsonModeEvaluator(task(system_prompt="Answer tersely."))
    s = next(x for x in ev.samples(100, 0) if x.id == "train/0")
    (req,) = ev.requests(s)
    assert [role for role, _ in req.messages] == ["system", "system", "user"]
    assert req.messages[0] == ("system", "Answer tersely.") and req.messages[1:] == tuple(map(tuple, s.meta["messages"]))
    from runner.backends.prompting import render_prompt

    text, _ = render_prompt(FakeTokenizer(), ChatFormat(True, "Answer tersely."), req.prompt, req.messages)
    assert text.startswith("<s> [system] Answer tersely. [system] You are a helpful assistant")  # not added twice
    assert text.count("Answer tersely.") == 1


def smollm2_tokenizer():
    from transformers import AutoTokenizer

    from runner.backends.models import resolve_model_source

    source = resolve_model_source("smollm2_135m", "HuggingFaceTB/SmolLM2-135M-Instruct", None, "smollm2_135m_gguf")
    return AutoTokenizer.from_pretrained(source.location)


@pytest.mark.parametrize("row,fragment", [
    ({"prompt": [{"role": "user"}], "completion": "{}", "schema": "{}"}, "'role' and a 'content'"),
    ({"prompt": [{"role": "user", "content": "x"}], "completion": "{", "schema": "{}"}, "'completion' is not valid JSON"),
    ({"prompt": [{"role": "user", "content": "x"}], "completion": "{}", "schema": '{"type": 5}'}, "not a valid JSON Schema"),
])
def test_malformed_rows_name_source_and_row(tmp_path, row, fragment):
    good = {"prompt": [{"role": "user", "content": "x"}], "completion": "{}", "schema": "{}"}
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DataError, match=fragment) as err:
        JsonModeEvaluator(task(dataset=DatasetConfig(source="local", local_path=str(tmp_path), split="train"))).samples(2, 0)
    assert "row 1" in str(err.value)


def test_unreachable_hub_names_the_local_alternative():
    ev = JsonModeEvaluator(task(dataset=DatasetConfig(source="hub", hub_id="NousResearch/json-mode-eval", split="train")))
    with pytest.raises(DataError) as err:
        ev.samples(4, 0)
    assert "NousResearch/json-mode-eval" in str(err.value) and "task.dataset.local_path" in str(err.value)


def test_the_chat_template_is_required():
    with pytest.raises(ConfigError, match="task.apply_chat_template"):
        JsonModeEvaluator(task(apply_chat_template=False))


def test_task_config_carries_upstreams_parameters():
    cfg = compose(["task=json_mode_eval"]).task
    assert (cfg.metric, cfg.alpha, cfg.beta, cfg.sigma, cfg.num_samples) == ("accuracy", 0.05, 0.2, 50.0, 100)
    assert (cfg.max_input_len, cfg.max_output_len, cfg.apply_chat_template) == (1024, 512, True)
    assert (cfg.dataset.hub_id, cfg.dataset.split, cfg.guided_decoding) == ("NousResearch/json-mode-eval", "train", "auto")
    assert cfg.dataset.hub_config is None and cfg.system_prompt is None


# ------------------------------------------------------------------------------ guided decoding modes
def test_free_generation_is_a_different_protocol(caplog):
    ev = JsonModeEvaluator(task())
    assert ev.extra_acc_spec() is None  # auto: constrained until the backend says otherwise
    ev.bind_backend(SimpleNamespace(name="hf", details={"guided_decoding": "lm-format-enforcer"}))
    assert ev.extra_acc_spec() is None
    with caplog.at_level("WARNING", logger="runner"):
        ev.bind_backend(SimpleNamespace(name="hf", details={"guided_decoding": "none"}))
    assert ev.extra_acc_spec() == "guided_decoding=none"
    assert "free generation" in caplog.text and "guided_decoding=none" in caplog.text
    assert JsonModeEvaluator(task(guided_decoding="none", strip_code_fences=False)).extra_acc_spec() == \
        "guided_decoding=none,strip_code_fences=false"
    # under constrained decoding a fence cannot occur, so it is not unwrapped
    deviations = JsonModeEvaluator(task(max_input_len=2048, max_output_len=96, system_prompt="Answer tersely.",
                                        dataset=DatasetConfig(source="local", local_path=str(FIXTURE), split="test")))
    assert deviations.extra_acc_spec() == ("max_input_len=2048,max_output_len=96,split=test,system_prompt="
                                           + hashlib.sha256(b"Answer tersely.").hexdigest()[:8])
    constrained = JsonModeEvaluator(task())
    constrained.bind_backend(SimpleNamespace(name="trtllm", details={"guided_decoding": "xgrammar"}))
    sample = Sample("train/0", "x", "{}", {"messages": [["user", "x"]], "schema": "{}"})
    assert constrained.score(sample, ["```\n{}\n```"]).score == 0.0
    assert ev.score(sample, ["```\n{}\n```"]).score == 100.0


def test_modes_resolve_per_backend(monkeypatch):
    assert guided.resolve_trtllm("auto", "trtllm") == "xgrammar"
    assert guided.resolve_trtllm("llguidance", "trtllm_pytorch") == "llguidance"
    assert guided.resolve_trtllm("none", "trtllm") == "none"
    with pytest.raises(ConfigError, match="task.guided_decoding"):
        guided.resolve_trtllm("lm-format-enforcer", "trtllm")
    with pytest.raises(ConfigError, match="task.guided_decoding"):
        guided.resolve_hf("xgrammar")
    assert guided.resolve_hf("auto") == "lm-format-enforcer" and guided.resolve_hf("none") == "none"
    monkeypatch.setattr(guided, "lmfe_installed", lambda: False)
    assert guided.resolve_hf("auto") == "none"  # falls back to free generation, with a warning
    from runner.contract.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="pip install"):
        guided.resolve_hf("lm-format-enforcer")


# ------------------------------------------------------------------------------ TensorRT-LLM translation (double)
SCHEMA_TEXT = json.dumps(PERSON)
CHAT = (("system", "Answer in JSON."), ("user", "Ada is 36."))


@pytest.mark.parametrize("make", ["engine", "torch"])
def test_trtllm_passes_guided_decoding_params_and_the_backend(fake, model_dir, make):  # noqa: F811
    limits = TaskLimits(max_input_len=64, max_output_len=16, max_batch_size=4, guided_decoding="auto")
    chat = ChatFormat(apply_chat_template=True)
    if make == "engine":
        be = engine_backend(model_dir, limits=limits, chat=chat, max_num_tokens=64)
    else:
        from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend
        from runner.contract.task_config import ModelConfig, QuantConfig
        from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackendConfig

        be = TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(max_num_tokens=64),
                                  model=ModelConfig(name="tiny", hf_id="org/tiny", path=str(model_dir)),
                                  quant=QuantConfig(name="none"), limits=limits, chat=chat, progress=False)
    with be:
        assert be.info().details["guided_decoding"] == "xgrammar"
        be.generate([GenerationRequest("Ada is 36.", 16, messages=CHAT, json_schema=SCHEMA_TEXT),
                     GenerationRequest("plain", 16)])
    (llm,) = fake.named("LLM")
    assert llm["guided_decoding_backend"] == "xgrammar"
    assert fake.named("GuidedDecodingParams") == [{"json": SCHEMA_TEXT}]
    params = fake.named("SamplingParams")
    assert params[0]["guided_decoding"].json == SCHEMA_TEXT and "guided_decoding" not in params[1]
    (call,) = fake.named("generate")
    # the tokenizer's BOS on top of the template's, as TensorRT-LLM encodes templated text
    assert FakeTokenizer().decode(call["inputs"][0]) == "<s> <s> [system] Answer in JSON. [user] Ada is 36. [assistant]"


def test_trtllm_without_guided_decoding_sets_nothing(fake, model_dir):  # noqa: F811
    limits = TaskLimits(max_input_len=64, max_output_len=16, max_batch_size=4, guided_decoding="none")
    with engine_backend(model_dir, limits=limits, max_num_tokens=64) as be:
        assert be.info().details["guided_decoding"] == "none"
        be.generate([GenerationRequest("Ada is 36.", 16, json_schema=SCHEMA_TEXT)])
    (llm,) = fake.named("LLM")
    assert "guided_decoding_backend" not in llm
    assert fake.named("GuidedDecodingParams") == [] and "guided_decoding" not in fake.named("SamplingParams")[0]
    with pytest.raises(ConfigError, match="task.guided_decoding"):
        engine_backend(model_dir, limits=TaskLimits(64, 16, 4, guided_decoding="lm-format-enforcer"), max_num_tokens=64)


@pytest.mark.trtllm
@pytest.mark.gpu
@pytest.mark.parametrize("backend_name", ["trtllm", "trtllm_pytorch"])
def test_real_tensorrt_llm_constrains_output_to_the_schema(tmp_path, monkeypatch, backend_name):
    """On a GPU host with TensorRT-LLM: RUNNER_TRTLLM_TEST_MODEL=/path/to/hf/model pytest -m trtllm tests/tasks/test_json_mode.py"""
    import os

    import jsonschema

    pytest.importorskip("tensorrt_llm")
    path = os.environ.get("RUNNER_TRTLLM_TEST_MODEL")
    if not path:
        pytest.skip("set RUNNER_TRTLLM_TEST_MODEL to a local Hugging Face model directory")
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    from runner.backends.trtllm.engine import TRTLLMEngineBackend
    from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackend
    from runner.contract.task_config import ModelConfig, QuantConfig
    from runner.backends.trtllm.engine import TRTLLMBackendConfig
    from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackendConfig

    model = ModelConfig(name="trtllm-test", hf_id="trtllm-test", path=path)
    limits = TaskLimits(max_input_len=256, max_output_len=48, max_batch_size=4, guided_decoding="auto")
    if backend_name == "trtllm":
        be = TRTLLMEngineBackend(TRTLLMBackendConfig(max_num_tokens=1024), model, QuantConfig(name="none"), limits,
                                 progress=False)
    else:
        be = TRTLLMPyTorchBackend(TRTLLMPyTorchBackendConfig(max_num_tokens=1024), model, QuantConfig(name="none"),
                                  limits, progress=False)
    with be:
        (out,) = be.generate([GenerationRequest("Ada is 36 years old. As JSON:", 48, json_schema=SCHEMA_TEXT)])
        assert be.info().details["guided_decoding"] == "xgrammar"
    jsonschema.validate(json.loads(out), PERSON)


# ------------------------------------------------------------------------------ the embedded model
@pytest.mark.e2e
def test_hf_guided_decoding_yields_schema_valid_json():
    import jsonschema

    from runner.backends.hf.backend import HFBackend
    from runner.contract.task_config import ModelConfig, QuantConfig
    from runner.backends.hf.backend import HFBackendConfig

    schema = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]},
                                               "count": {"type": "integer"}},
              "required": ["colour", "count"], "additionalProperties": False}
    model = ModelConfig(name="smollm2_135m", hf_id="HuggingFaceTB/SmolLM2-135M-Instruct", embedded="smollm2_135m_gguf")
    chat = ChatFormat(apply_chat_template=True)
    requests = [GenerationRequest("x", 40, messages=(("user", "Describe three green apples as JSON."),),
                                  json_schema=json.dumps(schema)),
                GenerationRequest("Name a colour of the sky.", 12)]
    limits = TaskLimits(256, 40, guided_decoding="auto")
    with HFBackend(HFBackendConfig(device="cpu"), model, QuantConfig(name="none"), limits, chat=chat,
                   progress=False) as be:
        assert be.info().details["guided_decoding"] == "lm-format-enforcer"
        constrained, free = be.generate(requests)
        (alone,) = be.generate(requests[1:])
        filters = be._held.json_constraints
    jsonschema.validate(json.loads(constrained), schema)
    assert free == alone  # a row without a schema is not touched by its neighbour's constraint
    # the next job on the same model reuses it and the filters built over its vocabulary (seconds of CPU each)
    with HFBackend(HFBackendConfig(device="cpu"), model, QuantConfig(name="none"), limits, chat=chat,
                   progress=False) as again:
        assert again.info().details["loaded"] == "reused" and again._held.json_constraints is filters
        assert len(filters) == 1


@pytest.mark.e2e
def test_runs_end_to_end_on_the_fixture_and_logs_to_mlflow(tmp_path, mlflow_server, monkeypatch):
    from mlflow.tracking import MlflowClient

    from runner.job.flow import run

    monkeypatch.chdir(tmp_path)
    outcome = run(compose(["task=json_mode_eval", "task.num_samples=2", "task.max_output_len=96",
                           f"task.dataset.local_path={FIXTURE}", "reference.mode=skip", "cache.enabled=false",
                           f"tracking.tracking_uri={mlflow_server}", "tracking.experiment=e2e-json",
                           f"output_dir={tmp_path / 'out'}"]))
    assert outcome.exit_status in (0, 4) and outcome.spec.extra_acc_spec == "max_output_len=96"  # constrained, shorter
    rows = [json.loads(line) for line in (outcome.output_dir / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["meta"]["parsed"] and r["meta"]["schema_valid"] for r in rows)
    run_data = MlflowClient(tracking_uri=mlflow_server).get_run(outcome.run_id).data
    assert run_data.metrics["parse_rate"] == 100.0 and run_data.metrics["schema_valid_rate"] == 100.0
    assert run_data.metrics["accuracy"] == pytest.approx(outcome.score)
    assert run_data.tags["extra_acc_spec"] == "max_output_len=96"
