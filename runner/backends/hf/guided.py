"""Schema-constrained (guided) decoding: which library constrains a backend, and the hf side of it.

A request that carries a ``json_schema`` asks for output that follows that JSON Schema. The task
says how to honour it (``task.guided_decoding``, passed to backends as ``TaskLimits.guided_decoding``):
- ``none``: free generation; the evaluator validates the output afterwards;
- ``auto``: the backend's library (TensorRT-LLM: xgrammar, its default; hf: lm-format-enforcer
  when it is installed, otherwise free generation with a warning);
- a library name, which must be one the backend supports (and installed).

The mode that was actually used is reported in ``BackendInfo.details["guided_decoding"]``, so the
evaluator can key references on it: constrained and free decoding are different protocols.

On ``hf`` the constraint is lm-format-enforcer's token filter, applied as a per-row logits mask
inside the backend's own decode loop (:class:`JsonConstraints`).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Sequence

from runner.contract.errors import BackendUnavailable, ConfigError

log = logging.getLogger("runner")

NONE = "none"
AUTO = "auto"
LMFE = "lm-format-enforcer"
HF_LIBRARIES = (LMFE,)
TRTLLM_LIBRARIES = ("xgrammar", "llguidance")  # LLM(guided_decoding_backend=...) in TensorRT-LLM 1.0-1.2
LMFE_REQUIREMENT = "lm-format-enforcer==0.11.3"


def validate(mode: str, backend: str, libraries: Sequence[str]) -> None:
    """Reject a mode the backend cannot honour, in its constructor (before anything is loaded)."""
    allowed = (NONE, AUTO, *libraries)
    if mode not in allowed:
        raise ConfigError(f"guided decoding library not available on backend={backend}",
                          where="task.guided_decoding", given=mode, allowed=", ".join(allowed))


def lmfe_installed() -> bool:
    try:
        import lmformatenforcer  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_hf(mode: str) -> str:
    """The mode backend=hf uses: lm-format-enforcer when asked for (or auto and installed), else none."""
    validate(mode, "hf", HF_LIBRARIES)
    if mode == NONE:
        return NONE
    if lmfe_installed():
        return LMFE
    if mode == LMFE:
        raise BackendUnavailable(
            "task.guided_decoding=lm-format-enforcer, but the package is not installed",
            where="task.guided_decoding", given=mode,
            fix=f"pip install '{LMFE_REQUIREMENT}' (or pip install -e '.[guided]'), or use task.guided_decoding=none",
        )
    log.warning("guided decoding: lm-format-enforcer is not installed, so backend=hf generates freely and the "
                "outputs are validated afterwards (a different protocol: extra_acc_spec says guided_decoding=none); "
                "install it with pip install '%s'", LMFE_REQUIREMENT)
    return NONE


def resolve_trtllm(mode: str, backend: str) -> str:
    """The ``guided_decoding_backend`` TensorRT-LLM is created with (auto means its default, xgrammar)."""
    validate(mode, backend, TRTLLM_LIBRARIES)
    return "xgrammar" if mode == AUTO else mode


class JsonConstraints:
    """lm-format-enforcer token filters for backend=hf, one per schema, sharing the tokenizer's prefix tree.

    ``eos_ids`` are the tokens that end a row in the decode loop; the filter allows them once the
    JSON value is complete. ``vocab_size`` is the width of the model's logits.
    """

    def __init__(self, tokenizer: Any, eos_ids: Sequence[int], vocab_size: int) -> None:
        self._tokenizer = tokenizer
        self._eos = sorted(eos_ids)
        self._vocab_size = vocab_size
        self._data: Any = None

    def _tokenizer_data(self) -> Any:
        """The vocabulary as lm-format-enforcer needs it, built once per loaded model (kept with it for the
        jobs that reuse it).

        Built here rather than with the package's transformers integration, which imports
        modules that transformers 5 no longer has. Each regular token is decoded after an anchor
        token ("0"), which shows whether it starts a new word (a leading space).
        """
        if self._data is None:
            from lmformatenforcer import TokenEnforcerTokenizerData

            tok = self._tokenizer
            special = set(tok.all_special_ids)
            ids = [i for i in range(min(self._vocab_size, len(tok))) if i not in special]
            anchor = tok.encode("0", add_special_tokens=False)[-1]
            skip = len(tok.decode([anchor]))
            after_anchor = tok.batch_decode([[anchor, i] for i in ids])
            alone = tok.batch_decode([[i] for i in ids])
            regular = [(i, joined[skip:], len(joined) - skip > len(single))
                       for i, joined, single in zip(ids, after_anchor, alone)]
            self._data = TokenEnforcerTokenizerData(regular, lambda tokens: tok.decode(tokens).rstrip("\ufffd"),
                                                    list(self._eos), False, self._vocab_size)
        return self._data

    def enforcer(self, schema: str) -> Any:
        """A fresh filter for one row (it keeps the state of that row's output).

        None, with a warning, for a schema the library cannot compile: that row is generated
        freely and still validated afterwards, rather than stopping the whole run.
        """
        from lmformatenforcer import JsonSchemaParser, TokenEnforcer

        try:
            parser = JsonSchemaParser(json.loads(schema))
        except Exception as err:  # the library raises assorted errors for schema features it lacks
            log.warning("guided decoding: lm-format-enforcer cannot compile a schema (%s: %s); that request is "
                        "generated without constraint: %.200s", type(err).__name__, err, schema)
            return None
        return TokenEnforcer(self._tokenizer_data(), parser)


def mask_logits(logits: Any, enforcers: Sequence[Any], produced: Sequence[Sequence[int]], done: Sequence[bool]) -> Any:
    """``logits`` [rows, vocab] with every token the row's filter forbids set to -inf (rows without one untouched)."""
    import torch

    masked = logits.clone()
    for i, enforcer in enumerate(enforcers):
        if enforcer is None or done[i]:
            continue
        allowed = enforcer.get_allowed_tokens(list(produced[i])).allowed_tokens
        forbid = torch.ones(masked.shape[-1], dtype=torch.bool, device=masked.device)
        forbid[torch.tensor([t for t in allowed if t < masked.shape[-1]], dtype=torch.long, device=masked.device)] = False
        masked[i].masked_fill_(forbid, float("-inf"))
    return masked
