"""A scripted backend: canned answers, declared capabilities, no model. For pipeline tests and dry runs.

Generation: the scripted text of a prompt (``script``: a JSONL file of ``{"prompt", "text"}`` rows; a row
``{"prompt", "failed": true}`` is a server failure on that prompt),
else ``default_answer``, else the prompt's last ``max_input_len`` words echoed back (so a prompt cut
to its end answers as the end alone would); sampled requests (temperature > 0) answer ``default_answer`` followed by a
word drawn from their seed, and need one, as every backend does. Outputs are cut at stop strings and
at ``max_tokens`` words; each answer says whether its prompt was longer than ``max_input_len`` words and whether
the limit cut it (:class:`runner.contract.indicators.Generated`). Log-likelihood: the scripted ``logprob`` of a ``{"context", "continuation"}``
row, else a deterministic value derived from the texts (a rolling request's window changes neither: its tokens
are words, and ``rolling_windows=false`` refuses a text of more words than its window). ``info()`` reports the requested spec.
``delay_s`` makes entering the backend take that long, as a model load would: a job that is still
running when a test stops it (scancel, a signal). It changes no answer.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from runner.backends.configured import ConfiguredBackend
from runner.contract.backend import BackendInfo, Capabilities, ChatFormat, GpuNeeds, Perturbation, TaskLimits
from runner.contract.errors import ConfigError
from runner.contract.indicators import Generated, GenerationFacts
from runner.contract.requests import GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, cut_at_stop
from runner.contract.spec import AccuracySpec
from runner.contract import top_tokens


@dataclass
class FakeBackendConfig:
    """A scripted backend (runner/backends/fake.py)."""

    _target_: str = "runner.backends.fake.FakeBackend"
    name: str = "fake"
    script: Optional[str] = None  # JSONL of {"prompt", "text"} and {"context", "continuation", "logprob"} rows
    default_answer: str = ""
    loglikelihood: bool = True  # declare log-likelihood scoring (off: refused up front, as TensorRT-LLM's backends)
    # declare rolling windows (off: a rolling text longer than its window is refused before any request)
    rolling_windows: bool = True
    delay_s: float = 0.0  # seconds entering the backend takes, as a model load would (answers unchanged)
    # another numeric path, as another host or batch would take: every log-likelihood moves by ``shift`` plus a
    # deterministic per-text amount in [-jitter, +jitter]
    shift: float = 0.0
    jitter: float = 0.0
    # the A/A replicate's perturbation this backend declares (reference.noise=replicate): these shift and jitter
    replicate_shift: float = 0.0
    replicate_jitter: float = 0.0


class FakeBackend(ConfiguredBackend):
    name = "fake"

    def __init__(self, config: Any, model: Any, quant: Any, limits: TaskLimits,
                 chat: ChatFormat = ChatFormat(), progress: bool = True) -> None:
        super().__init__(config, model, quant, limits, chat, progress)
        # scripted answers: no chat template to take keyword arguments
        self.capabilities = Capabilities(loglikelihood=config.loglikelihood, token_counter=True, per_request_seeds=True,
                                         chat_template_kwargs=False, rolling_windows=config.rolling_windows)
        self.texts: dict[str, str] = {}
        self.failing: set[str] = set()  # prompts the scripted server fails on (an error instead of an answer)
        self.logprobs: dict[tuple[str, str], float] = {}
        self.calls: list[tuple[str, int]] = []  # (kind, number of requests) per call
        if config.script:
            path = Path(config.script)
            if not path.is_file():
                raise ConfigError("the fake backend's script file does not exist", where="backend.script", given=str(path))
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    if "prompt" in row and row.get("failed"):
                        self.failing.add(row["prompt"])
                    elif "prompt" in row:
                        self.texts[row["prompt"]] = row["text"]
                    else:
                        self.logprobs[(row["context"], row["continuation"])] = float(row["logprob"])

    @classmethod
    def gpu_needs(cls, config: Any) -> GpuNeeds:
        return GpuNeeds(per_job=0)

    def __enter__(self) -> "FakeBackend":
        if self.config.delay_s > 0:
            time.sleep(self.config.delay_s)
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def host_fields(self) -> dict[str, str]:
        """The numeric path (shift and jitter) stands for the compute dtype."""
        return {"compute_dtype": f"shift {self.config.shift:g}, jitter {self.config.jitter:g}"}

    def perturbations(self) -> list[Perturbation]:
        """The scripted numeric path (``replicate_shift``/``replicate_jitter``), when one is set."""
        shift, jitter = self.config.replicate_shift, self.config.replicate_jitter
        if not shift and not jitter:
            return []
        return [Perturbation(f"shift={shift:g},jitter={jitter:g}", (("shift", shift), ("jitter", jitter)))]

    def info(self) -> BackendInfo:
        spec = AccuracySpec(quant_algo=self.quant.quant_algo, kv_cache_quant_algo=self.quant.kv_cache_quant_algo)
        return BackendInfo(self.name, spec, "none", self.model_config.path or self.model_config.hf_id,
                           {"fake": "1"}, {"model_source": "scripted"})

    def generate(self, requests: Sequence[GenerationRequest]) -> list[str]:
        self.calls.append(("generate", len(requests)))
        out = []
        for r in requests:
            if r.greedy:
                seen = " ".join((r.prompt + r.suffix).split(" ")[-self.limits.max_input_len:])
                text = self.texts.get(r.prompt, self.config.default_answer or seen)
            else:
                if r.seed is None:
                    raise ConfigError("a sampled request needs an explicit seed", where="GenerationRequest.seed",
                                      given="None", fix="set the task's seed")
                word = random.Random(f"{r.seed}:{r.prompt}").choice(["alpha", "beta", "gamma", "delta"])
                text = f"{self.config.default_answer} {word}".strip()
            if r.prompt in self.failing:
                out.append(Generated("", GenerationFacts(failed=True)))
                continue
            words, limit = text.split(" "), min(r.max_tokens, self.limits.max_output_len)
            kept = cut_at_stop(" ".join(words[:limit]), r.stop)
            cut = len((r.prompt + r.suffix).split(" ")) > self.limits.max_input_len
            out.append(Generated(kept, GenerationFacts(input_cut=cut, hit_limit=len(words) > limit
                                                       and kept == " ".join(words[:limit]))))
        self._answered(len(out))
        return out

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        if not self.capabilities.loglikelihood:
            raise ConfigError("this backend cannot score log-likelihood requests", where="backend=fake",
                              fix="use task.scoring=generate")
        self.calls.append(("loglikelihood", len(requests)))
        out = []
        for r in requests:
            if r.rolling_window is not None and not self.capabilities.rolling_windows \
                    and len(r.continuation.split()) > r.rolling_window:
                raise ConfigError("this backend cannot score a rolling text longer than its window",
                                  where="backend.rolling_windows", given=f"false ({len(r.continuation.split())} words, "
                                  f"window {r.rolling_window})", fix="set backend.rolling_windows=true")
            lp = self.logprobs.get((r.context, r.continuation))
            if lp is None:
                digest = hashlib.sha256(f"{r.context}\x00{r.continuation}".encode()).digest()
                lp = -1.0 - digest[0] / 32.0
            if self.config.shift or self.config.jitter:
                noise = hashlib.sha256(f"jitter\x00{r.context}\x00{r.continuation}".encode()).digest()
                lp += self.config.shift + self.config.jitter * (noise[0] / 127.5 - 1.0)
            record = self._top_record(r.continuation, r.top_tokens) if r.top_tokens else None
            out.append(LoglikelihoodResult(lp, False, max(1, len(r.continuation.split())), record))
        self._answered(len(out))
        return out

    def _top_record(self, text: str, k: int) -> str:
        """A scripted top-``k`` record, one position per word: ids and log-probabilities derived from the word and
        its place, each log-probability moved by this backend's ``jitter`` (at most that much), best first."""
        import numpy as np

        ids, lps = [], []
        for j, word in enumerate(text.split() or [""]):
            digest = hashlib.sha256(f"{j}\x00{word}".encode()).digest()
            noise = hashlib.sha256(f"top\x00{self.config.jitter}\x00{j}\x00{word}".encode()).digest()
            base = int.from_bytes(digest[:2], "big")
            lp = [-1.0 - i * (0.6 + digest[2] / 255) + self.config.jitter * (noise[i] / 127.5 - 1.0) for i in range(k)]
            order = sorted(range(k), key=lambda i: -lp[i])
            ids.append([base + i for i in order])
            lps.append([min(lp[i], 0.0) for i in order])
        return top_tokens.encode(np.array(ids), np.array(lps))

    def _answered(self, n: int) -> None:
        """Advance the job's progress bar (a scripted backend answers at once: no bar of its own)."""
        if self.job_progress is not None:
            self.job_progress.update(n)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def tokenizer_counter(self) -> Any:
        return self.count_tokens  # words: no model to load
