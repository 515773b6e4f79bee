"""Teacher-forced fidelity from per-position top-k records (runner/stats/numerics/token_fidelity.py): golden values
worked by hand, and the KL on the shared top-k plus a tail cell shown to be a lower bound on the full KL by
enumeration over random distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runner.contract import top_tokens
from runner.stats.data.noise import Replicate, TokenFidelity
from runner.stats.numerics.token_fidelity import position_kl, spread, token_fidelity


def test_the_kl_on_shared_tokens_and_a_tail_cell_by_hand():
    # A lists 10, 20, 30 (0.5, 0.3, 0.1); B lists 10, 30, 40 (0.4, 0.2, 0.2). Shared: 10 and 30; the tail cell holds
    # 1 - 0.6 = 0.4 of A and 1 - 0.6 = 0.4 of B. KL = 0.5 ln(0.5/0.4) + 0.1 ln(0.1/0.2) + 0.4 ln(0.4/0.4)
    #                                                = 0.111572 - 0.069315 + 0 = 0.042257
    a_ids, a_lp = [[10, 20, 30]], np.log([[0.5, 0.3, 0.1]])
    b_ids, b_lp = [[10, 30, 40]], np.log([[0.4, 0.2, 0.2]])
    (kl,) = position_kl(a_ids, a_lp, b_ids, b_lp)
    assert kl == pytest.approx(0.042257, abs=1e-6)
    # completed to full distributions (A: 40 and 50 hold 0.05 each; B: 20 holds 0.1, 50 holds 0.1), the full KL is
    # 0.5 ln 1.25 + 0.3 ln 3 + 0.1 ln 0.5 + 0.05 ln 0.25 + 0.05 ln 0.5 = 0.267869: the bound is below it
    assert 0.5 * math.log(1.25) + 0.3 * math.log(3) + 0.1 * math.log(0.5) + 0.05 * math.log(0.25) \
        + 0.05 * math.log(0.5) == pytest.approx(0.267869, abs=1e-6)
    assert kl < 0.267869
    # through the float16 record: the same figure within the format's rounding
    ra, rb = top_tokens.encode(a_ids, a_lp), top_tokens.encode(b_ids, b_lp)
    (kl16,) = position_kl(*top_tokens.decode(ra), *top_tokens.decode(rb))
    assert kl16 == pytest.approx(0.042257, abs=5e-4)
    # identical records: 0
    assert position_kl(a_ids, a_lp, a_ids, a_lp)[0] == pytest.approx(0.0, abs=1e-12)


def test_the_bound_never_exceeds_the_full_kl_over_random_distributions():
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(500):
        vocab, k = int(rng.integers(3, 12)), int(rng.integers(1, 5))
        p = rng.dirichlet(np.full(vocab, 0.5))
        q = np.clip(p * np.exp(rng.normal(0, 0.8, vocab)), 1e-9, None)
        q /= q.sum()
        full = float(np.sum(p * np.log(p / q)))
        k = min(k, vocab)
        a, b = np.argsort(-p)[:k], np.argsort(-q)[:k]
        bound = position_kl([a], [np.log(p[a])], [b], [np.log(q[b])])[0]
        assert bound <= full + 1e-9
        worst = max(worst, bound - full)
    assert worst <= 1e-9


def test_top1_agreement_nll_change_and_intervals_on_a_made_up_pair_of_texts():
    # text 1: five positions, the top-1 ids 1 2 3 4 5 (A) and 1 2 9 4 7 (B): 3 of 5 agree; NLL -10 -> -11 over 5
    # tokens: +0.2 per token. Text 2: four positions, all agree; log-probability -8 both: 0.
    def record(pairs):
        return top_tokens.encode(pairs, [[-0.1, -3.0]] * len(pairs))

    same = [[t, 100 + t] for t in (6, 7, 8, 9)]
    found = token_fidelity([record([[1, 101], [2, 102], [3, 9], [4, 104], [5, 7]]), record(same)],
                           [record([[1, 101], [2, 102], [9, 3], [4, 104], [7, 5]]), record(same)],
                           [-10.0, -8.0], [-11.0, -8.0])
    assert (found.n, found.tokens) == (2, 9)
    # per-text agreement 0.6 and 1.0: mean 0.8, sd 0.28284, se 0.2; t(0.975, 1 df) = 12.7062 -> half-width 2.54124
    assert found.agreement.mean == pytest.approx(0.8)
    assert (found.agreement.lower, found.agreement.upper) == pytest.approx((0.8 - 2.54124, 0.8 + 2.54124), abs=1e-4)
    assert found.nll.mean == pytest.approx(0.1)  # (0.2 + 0) / 2
    # where the two swap their first two tokens, both cells are shared and the tails equal (1 - e^-0.1 - e^-3 each):
    # KL = e^-0.1 (-0.1 + 3) + e^-3 (-3 + 0.1) = 2.9 (0.904837 - 0.049787) = 2.479645; text 1's mean over its 5
    # positions 0.991858, text 2's 0: mean 0.495929
    assert found.kl.mean == pytest.approx(0.495929, abs=2e-3)
    # a pair of records that share no token says nothing of the KL: the bound is 0 there
    assert position_kl([[3, 103]], [[-0.1, -3.0]], [[9, 109]], [[-0.1, -3.0]])[0] == 0.0
    # a pair cut differently (another number of positions) is left out; no pair at all: None
    assert token_fidelity([record([[1, 2]])], [record([[1, 2], [3, 4]])], [-1.0], [-1.0]) is None
    assert spread([0.5]).lower == spread([0.5]).upper == 0.5


def test_the_record_round_trips_and_stays_small():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 49152, size=(511, 4))
    lp = -np.sort(rng.exponential(2.0, size=(511, 4)), axis=1)
    text = top_tokens.encode(ids, lp)
    back_ids, back_lp = top_tokens.decode(text)
    assert (back_ids == ids).all() and np.allclose(back_lp, lp, rtol=1e-3, atol=1e-3)
    # 511 positions x 4 x (4 + 2) bytes = 12264 bytes before compression and base64
    assert len(text) < 12264 * 4 / 3 + 64
    for bad in ("t1:2:2:!!", "t2:1:1:eJwDAAAAAAE=", "no colons", ""):
        with pytest.raises(ValueError):
            top_tokens.decode(bad)


def test_the_replicate_stores_and_reads_back_its_token_fidelity():
    def record(top1):
        return top_tokens.encode([[t, 50 + t] for t in top1], [[-0.2, -2.0]] * len(top1))

    from runner.stats.numerics.noise import replicate

    rep = replicate("batch_size=1", [10.0, 12.0], [10.1, 12.1], 2, [[-20.0], [-30.0]], [[-20.5], [-30.5]],
                    a_tokens=[record([1, 2, 3]), record([4, 5])], b_tokens=[record([1, 2, 7]), record([4, 5])])
    assert rep.tokens is not None and rep.tokens.tokens == 5
    assert rep.tokens.nll.mean == pytest.approx((0.5 / 3 + 0.5 / 2) / 2)
    back = Replicate.from_dict(rep.to_dict())
    assert back.tokens == rep.tokens and isinstance(back.tokens, TokenFidelity)
    assert "top-1 agreement 0.8333" in rep.describe()
    with pytest.raises(ValueError, match="tokens.token_kl.mean"):
        Replicate.from_dict(rep.to_dict() | {"tokens": rep.tokens.to_dict() | {"token_kl": {"mean": "x"}}})
