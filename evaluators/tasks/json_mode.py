"""JSON mode eval (NousResearch/json-mode-eval) as TensorRT-LLM's accuracy suite runs it
(tensorrt_llm/evaluate/json_mode_eval.py with the arguments of accuracy_core.py's ``JsonModeEval``;
the same in TensorRT-LLM 1.0-1.2 and main).

Data: the ``train`` split (100 rows) in the Hub's row order; each row is a chat whose system turn
(the dataset's own text) holds the JSON Schema, plus the schema and the expected object. Subset: the
first n rows after ``Dataset.shuffle(seed)`` (upstream: seed 0, n = 100, i.e. every row).

Request: the row's chat through the model's chat template (required, as upstream); upstream passes
no system prompt, and a ``task.system_prompt`` is put in front of the row's own system turn, as
upstream's ``do_apply_chat_template`` does (a deviation, keyed). Generation is greedy up to
``max_output_len`` (512) tokens, the prompt cut to its last ``max_input_len`` (1024) tokens, and
constrained to the row's schema (``task.guided_decoding``; TensorRT-LLM: ``GuidedDecodingParams(json=
schema)``, xgrammar or llguidance; hf: lm-format-enforcer).

Score: 100 when ``json.loads`` of the output text succeeds, the value validates against the schema
(``jsonschema.validate``) and equals ``json.loads`` of the expected completion under Python's ``==``
(so 1 == 1.0 == True, a quirk kept); 0 otherwise. Metric: the mean (accuracy %). The aggregate also
reports the parse rate and the schema-valid rate (upstream's logged "grammar accuracy").

Free generation (``guided_decoding=none``, or hf without a constraint library) is another protocol:
the runner says so in the log and keys references with ``extra_acc_spec`` ``guided_decoding=none``.
There, outputs wrapped in a Markdown code fence are unwrapped before parsing
(``task.strip_code_fences``); under constrained decoding no fence can occur.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from evaluators.base import Evaluator
from evaluators.data.hub import check_source, load_rows
from evaluators.data.shuffle import shuffled_rows
from evaluators.deviations import chat_deviation, limit_and_data_deviations
from evaluators.metrics import mean, rate
from evaluators.responses import only_text
from runner.contract.errors import ConfigError, DataError
from runner.contract.evaluator import Sample, ScoredSample
from runner.contract.requests import Request, Response, GenerationRequest
from runner.contract.task_config import TaskConfig

log = logging.getLogger("runner")
# Upstream's fixed settings (accuracy_core.py JsonModeEval, json_mode_eval.py): deviations go into the key.
UPSTREAM = {"max_input_len": 1024, "max_output_len": 512, "hub_config": None, "split": "train"}
FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)


@dataclass
class JsonModeTaskConfig(TaskConfig):
    chance_level: Optional[float] = 0.0  # exact match of a JSON object
    # Schema-constrained decoding: auto (the backend's library; free generation on hf when none is
    # installed) | none (free generation, validated afterwards) | a library: lm-format-enforcer (hf),
    # xgrammar or llguidance (TensorRT-LLM)
    guided_decoding: str = "auto"
    strip_code_fences: bool = True  # free generation only: unwrap a Markdown code block before parsing


CONFIG = JsonModeTaskConfig
"""The task's schema, registered as ``schema_task_json_mode``."""


@dataclass(frozen=True)
class Judgement:
    """What one output achieved: parsed as JSON, valid against the schema, equal to the expected object."""

    parsed: bool
    valid: bool
    correct: bool


def unfence(text: str) -> str:
    """The output without surrounding whitespace and, if it is one Markdown code block, without the fence."""
    stripped = text.strip()
    match = FENCE.match(stripped)
    return match.group(1).strip() if match else stripped


def judge(output: str, schema: dict, expected: Any, strip_code_fences: bool) -> Judgement:
    """Parse, validate, compare (upstream's order: a value that does not validate is wrong)."""
    import jsonschema

    text = unfence(output) if strip_code_fences else output
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return Judgement(False, False, False)
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return Judgement(True, False, False)
    return Judgement(True, True, value == expected)


class JsonModeEvaluator(Evaluator):
    """Builds json-mode-eval samples (chat + schema) and scores them (100 or 0; metric = accuracy %)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        check_source(config.dataset)
        if not config.apply_chat_template:
            raise ConfigError("json_mode_eval needs the chat template: its rows are conversations",
                              where="task.apply_chat_template", given=False, allowed="true (as upstream)")
        self.guided_used: str | None = None  # the backend's effective mode, once bound

    # ------------------------------------------------------------------ protocol settings
    def bind_backend(self, info: Any) -> None:
        """Learn which guided decoding the backend actually applies (it decides the protocol)."""
        self.guided_used = info.details.get("guided_decoding", "none")
        if self.guided_used == "none":
            log.warning("json_mode_eval: free generation (no schema-constrained decoding on backend=%s); outputs are "
                        "validated afterwards. This is not upstream's protocol: extra_acc_spec=%s",
                        info.name, self.extra_acc_spec())
        else:
            log.info("json_mode_eval: schema-constrained decoding with %s on backend=%s", self.guided_used, info.name)

    def _free(self) -> bool:
        mode = self.guided_used if self.guided_used is not None else self.config.guided_decoding
        return mode == "none"

    def extra_acc_spec(self) -> str | None:
        c = self.config
        parts = []
        if self._free():
            parts.append("guided_decoding=none")
            if not c.strip_code_fences:
                parts.append("strip_code_fences=false")
        parts += limit_and_data_deviations(c, UPSTREAM)
        parts += chat_deviation(c, upstream_chat=True)  # the template is required: the system prompt at most
        return ",".join(parts) or None

    # ------------------------------------------------------------------ data
    def samples(self, num_samples: int, seed: int) -> list[Sample]:
        ds, source, self.source_used = load_rows(self.config.dataset, "json-mode-eval",
                                                 "'prompt' (chat messages), 'completion' and 'schema' columns")
        missing = {"prompt", "completion", "schema"} - set(ds.column_names)
        if missing:
            raise DataError("the dataset does not have json-mode-eval's columns", where=source,
                            given=sorted(ds.column_names),
                            allowed="prompt (list of {role, content}), completion (JSON text), schema (JSON text)")
        out = []
        for row in shuffled_rows(len(ds), seed, num_samples):
            item = ds[row]
            where = f"{source}, row {row}"
            messages = _messages(item["prompt"], where)
            schema = _json_field(item["schema"], "schema", where)
            _check_schema(schema, where)
            _json_field(item["completion"], "completion", where)
            rendered = "\n\n".join(f"[{role}]\n{content}" for role, content in messages)
            out.append(Sample(id=f"{self.config.dataset.split}/{row}", prompt=rendered, target=item["completion"],
                              meta={"messages": [list(m) for m in messages], "schema": item["schema"]}))
        return out

    # ------------------------------------------------------------------ requests and scoring
    def requests(self, sample: Sample) -> list[Request]:
        """The row's chat, after ``task.system_prompt`` when one is set (upstream prepends it even
        though every row opens with its own system turn)."""
        messages = tuple((role, content) for role, content in sample.meta["messages"])
        if self.config.system_prompt:
            messages = (("system", self.config.system_prompt),) + messages
        return [GenerationRequest(prompt=messages[-1][1], messages=messages, json_schema=sample.meta["schema"],
                                  max_tokens=self.config.max_output_len)]

    def score(self, sample: Sample, responses: Sequence[Response]) -> ScoredSample:
        output = only_text(responses)
        verdict = judge(output, json.loads(sample.meta["schema"]), json.loads(sample.target),
                        self.config.strip_code_fences and self._free())
        meta = {"parsed": verdict.parsed, "schema_valid": verdict.valid}
        return ScoredSample(sample.id, sample.prompt, output, sample.target, 100.0 if verdict.correct else 0.0, meta)

    def aggregate(self, scored: Sequence[ScoredSample]) -> dict[str, float]:
        """Accuracy (the metric), plus the share of outputs that parse and that validate (both %)."""
        if not scored:
            return {self.metric: float("nan")}
        return {
            self.metric: mean(s.score for s in scored),
            "parse_rate": rate(s.meta["parsed"] for s in scored),
            "schema_valid_rate": rate(s.meta["schema_valid"] for s in scored),
        }


def _bad(what: str, where: str, value: Any) -> DataError:
    return DataError(f"malformed json-mode-eval row: {what}", where=where, given=repr(value)[:200],
                     fix="fix or drop the row in the source data")


def _messages(prompt: Any, where: str) -> tuple[tuple[str, str], ...]:
    """The row's chat as (role, content) pairs; a plain string is one user turn."""
    if isinstance(prompt, str) and prompt.strip():
        return (("user", prompt),)
    if not isinstance(prompt, list) or not prompt:
        raise _bad("'prompt' must be a non-empty list of {role, content} messages", where, prompt)
    turns = []
    for message in prompt:
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)):
            raise _bad("every message needs a 'role' and a 'content' string", where, message)
        turns.append((message["role"], message["content"]))
    return tuple(turns)


def _json_field(text: Any, name: str, where: str) -> Any:
    if not isinstance(text, str):
        raise _bad(f"'{name}' must be JSON text", where, text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise _bad(f"'{name}' is not valid JSON ({err.msg} at char {err.pos})", where, text) from None


def _check_schema(schema: Any, where: str) -> None:
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except (jsonschema.SchemaError, TypeError, AttributeError) as err:
        raise _bad(f"'schema' is not a valid JSON Schema ({str(err).splitlines()[0]})", where, schema) from None
