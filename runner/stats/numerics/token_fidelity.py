"""Teacher-forced fidelity of one scoring of texts to another, from per-position top-k records
(:mod:`runner.contract.top_tokens`): top-1 agreement, a KL divergence and the change in NLL per token.

The full next-token distributions are not kept, so the KL divergence is computed on a partition of the vocabulary:
each token both records list at the position is a cell of its own, every other token falls into one tail cell whose
probability is what the listed cells leave. By the data-processing inequality a KL divergence between two
distributions never grows when cells are merged, so this is a lower bound on the true per-position KL(A || B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from runner.contract import top_tokens
from runner.stats.data.noise import CONFIDENCE, Spread, TokenFidelity

TAIL_FLOOR = 1e-7
"""The smallest tail probability used: float16 log-probabilities can make the listed cells sum a rounding above 1."""


def position_kl(a_ids: object, a_logprobs: object, b_ids: object, b_logprobs: object) -> object:
    """Per-position KL(A || B) on the shared top-k tokens plus a tail cell (arrays of shape (positions, k))."""
    import numpy as np

    ai, al = np.asarray(a_ids), np.asarray(a_logprobs, dtype=float)
    bi, bl = np.asarray(b_ids), np.asarray(b_logprobs, dtype=float)
    out = np.zeros(len(ai))
    for t in range(len(ai)):
        b_at = dict(zip(bi[t].tolist(), bl[t].tolist()))
        shared = [(p, b_at[i]) for i, p in zip(ai[t].tolist(), al[t].tolist()) if i in b_at]
        kl, p_rest, q_rest = 0.0, 1.0, 1.0
        for lp, lq in shared:
            kl += math.exp(lp) * (lp - lq)
            p_rest -= math.exp(lp)
            q_rest -= math.exp(lq)
        p_rest = max(p_rest, 0.0)
        if p_rest > 0:
            kl += p_rest * math.log(p_rest / max(q_rest, TAIL_FLOOR))
        out[t] = max(kl, 0.0)
    return out


def spread(values: Sequence[float], confidence: float = CONFIDENCE) -> Spread:
    """The mean of per-document ``values`` and its two-sided t interval (zero width for one document)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    half = 0.0
    if len(x) > 1 and float(x.std(ddof=1)) > 0:
        half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return Spread(mean, mean - half, mean + half)


def token_fidelity(a_records: Sequence[str], b_records: Sequence[str], a_logprobs: Sequence[float],
                   b_logprobs: Sequence[float], confidence: float = CONFIDENCE) -> TokenFidelity | None:
    """B's fidelity to A on the same texts: each text's encoded records and total log-probabilities, paired in
    order. A pair whose records cover different numbers of positions (another cut) is left out; None: no pair."""
    import numpy as np

    agree, kls, nlls, tokens = [], [], [], 0
    for ra, rb, la, lb in zip(a_records, b_records, a_logprobs, b_logprobs):
        (ai, al), (bi, bl) = top_tokens.decode(ra), top_tokens.decode(rb)
        if len(ai) != len(bi) or not len(ai):
            continue
        agree.append(float(np.mean(ai[:, 0] == bi[:, 0])))
        kls.append(float(np.mean(position_kl(ai, al, bi, bl))))
        nlls.append((la - lb) / len(ai))  # NLL per token, B - A
        tokens += len(ai)
    if not agree:
        return None
    return TokenFidelity(len(agree), tokens, spread(agree, confidence), spread(kls, confidence),
                         spread(nlls, confidence), confidence)
