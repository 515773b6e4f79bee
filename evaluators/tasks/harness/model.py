"""An lm-eval model (``lm_eval.api.model.LM``) over the runner's answerer: a backend, or the generation
cache's view of one. lm-eval's own ``evaluate()`` can then run any task on any runner backend, and every
request type goes to the answerer in ONE bulk call, through the cache (resume and pairing as our tasks).

The runner's job does not go through lm-eval's evaluation loop (it builds requests per sample, see
``evaluator``), but both use the same translation (``translate``), so a task scores the same either way."""

from __future__ import annotations

from typing import Any

from evaluators.tasks.harness.translate import loglikelihood_fix, needs_loglikelihood, to_lm_eval, to_request
from runner.contract.backend import Answerer, Capabilities
from runner.contract.errors import ConfigError


def check_capabilities(output_types: list[str], capabilities: Capabilities, task: str) -> None:
    """Refuse, before any request, a task whose output type the backend cannot answer."""
    if needs_loglikelihood(output_types) and not capabilities.loglikelihood:
        raise ConfigError("this backend cannot score log-likelihood requests", where="backend",
                          given=f"lm-eval task {task} ({', '.join(sorted(set(output_types)))})",
                          fix="; or ".join(f for f in (loglikelihood_fix(output_types, task),
                                                        capabilities.loglikelihood_fix) if f))


def answerer_lm(answerer: Answerer, max_output_len: int, seed: int = 0,
                capabilities: Capabilities = Capabilities(), rolling_window: int | None = None) -> Any:
    """An ``lm_eval.api.model.LM`` answering through ``answerer`` (built here: lm_eval is imported lazily).

    ``capabilities``: the backend's declared ones; log-likelihood requests to a backend without them are refused
    before any is sent (call :func:`check_capabilities` with the tasks' output types to refuse before the run).
    ``rolling_window``: lm-eval's ``max_length`` for rolling texts (each scored whole, in windows of that many
    tokens, as HFLM does); None: a rolling text is one sequence, cut to the backend's input length."""
    from lm_eval.api.model import LM

    class AnswererLM(LM):
        """lm-eval's three request types, each sent to the answerer in one call."""

        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, int]] = []

        def _send(self, kind: str, instances: list[Any]) -> list[Any]:
            if kind != "generate_until" and instances:
                check_capabilities([kind], capabilities, str(instances[0].task_name))
            requests = [to_request(inst, max_output_len, seed, rolling_window) for inst in instances]
            self.calls.append((kind, len(requests)))
            if kind == "generate_until":
                answers: list[Any] = answerer.generate(requests)  # type: ignore[arg-type]
            else:
                answers = answerer.loglikelihood(requests)  # type: ignore[arg-type]
            return [to_lm_eval(kind, a) for a in answers]

        def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
            return self._send("loglikelihood", requests)

        def loglikelihood_rolling(self, requests: list[Any]) -> list[float]:
            return self._send("loglikelihood_rolling", requests)

        def generate_until(self, requests: list[Any]) -> list[str]:
            return self._send("generate_until", requests)

    return AnswererLM()
