"""A served model's failed requests through the whole job, by default (``backend.on_failure=answer``): each is left
out of both arms up to ``stats.max_failed_share`` and the rest decides; above the cap the verdict is INCONCLUSIVE
with the counts; every answer, the failed ones too, is in samples.jsonl. The server is the hostile test server
(tests/helpers/hostile_server.py) answering " 4" to every GSM8K question, one request failing with HTTP 500 where
the test says; requests go one at a time, so the failing request is the third question's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.job.flow import run
from runner.stats.data.verdicts import INCONCLUSIVE
from tests.conftest import compose
from tests.helpers.hostile_server import MODEL, HostileServer

N = 8  # the local GSM8K copy's test split


@pytest.fixture()
def served(tmp_path):
    server = HostileServer()
    base = ["backend=openai", f"backend.base_url={server.url}/v1", f"backend.served_model={MODEL}",
            "backend.max_retries=0", "backend.max_concurrency=1", "task=gsm8k", "task.dataset.source=local",
            f"task.dataset.local_path={Path(__file__).parents[1] / 'data' / 'gsm8k_local'}", f"task.num_samples={N}",
            "task.max_input_len=512", "task.max_output_len=16", "tracking=none", "cache=off",
            f"reference.dir={tmp_path / 'refs'}"]
    run(compose([*base, "reference.mode=record", f"output_dir={tmp_path / 'record'}"]))
    yield server, base
    server.close()


def test_a_failed_request_is_left_out_of_both_arms_by_default_up_to_the_cap(served, tmp_path):
    server, base = served
    server.sequence = ["ok", "ok", "error_500", "ok"]  # the third request fails, every other is answered
    under = run(compose([*base, "stats.max_failed_share=0.2", f"output_dir={tmp_path / 'under'}"]))
    d = under.decision
    assert d is not None and d.n == N - 1 and d.paired is not None and d.paired.n == N - 1
    f = d.indicators.failures
    assert (f.n, f.run, f.reference, f.excluded, f.cap) == (N, 1, 0, 1, 0.2) and not d.indicators.blocks
    report = (tmp_path / "under" / "report.txt").read_text()
    assert "backend failures: 1 of 8 samples left out of both arms (run 1, reference 0; cap " \
           "stats.max_failed_share=0.2)" in report
    rows = [json.loads(line) for line in (tmp_path / "under" / "samples.jsonl").read_text().splitlines()]
    assert [r["meta"]["indicators"]["failed"] for r in rows] == [False, False, True] + [False] * (N - 3)

    server.posts, server.sequence = 0, ["ok", "ok", "error_500", "ok"]
    over = run(compose([*base, f"output_dir={tmp_path / 'over'}"]))  # 1 of 8 is over the default cap of 2%
    d = over.decision
    assert d.outcome == INCONCLUSIVE and d.indicators.over_cap and over.exit_status == 4
    report = (tmp_path / "over" / "report.txt").read_text()
    assert "INCONCLUSIVE: the backend failed on more than stats.max_failed_share of the samples (backend " \
           "failures: 1 of 8 samples left out of both arms" in report
    assert len((tmp_path / "over" / "samples.jsonl").read_text().splitlines()) == N  # nothing lost
    payload = json.loads((tmp_path / "over" / "report.json").read_text())
    assert payload["indicators"]["failures"] == {"n": N, "run": 1, "reference": 0, "excluded": 1, "cap": 0.02,
                                                 "over_cap": True}
