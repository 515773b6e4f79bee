"""The flipped-samples table names the row a person looks up (an lm-eval doc's own id, or says it is the doc
index) and shows target and prediction in the same form."""

from __future__ import annotations

from runner.contract.evaluator import ScoredSample, row_label
from runner.tracking.tables import flipped_table


def test_row_label_is_the_docs_own_id_else_the_doc_index():
    assert row_label({"id": "Mercury_7175875", "question": "q"}, 12) == "id=Mercury_7175875"
    assert row_label({"idx": 0, "question": "q"}, 3) == "idx=0"  # BoolQ's 0 is an id, not a missing one
    assert row_label({"id": True, "ind": 41}, 3) == "ind=41"  # a flag is no id
    assert row_label({"question": "q"}, 7) == row_label(None, 7) == "doc index 7"


def test_the_flipped_table_carries_the_row_beside_the_pairing_id():
    new = [ScoredSample("arc/0", "p0", "oxygen", "carbon dioxide", 0.0, {"row": "id=Q1"}),
           ScoredSample("arc/1", "p1", "ice", "ice", 100.0, {"row": "doc index 1"}),
           ScoredSample("arc/2", "p2", "fog", "steam", 0.0, {"row": "id=Q3"})]
    table = flipped_table({"arc/0": 100.0, "arc/1": 0.0, "arc/2": 0.0}, new, higher_is_better=True)
    assert table is not None
    assert table["sample_id"] == ["arc/0", "arc/1"] and table["row"] == ["id=Q1", "doc index 1"]
    assert table["change"] == ["worse", "better"] and table["target"] == ["carbon dioxide", "ice"]
    plain = flipped_table({"q": 100.0}, [ScoredSample("q", "p", "a", "b", 0.0)], True)
    assert plain is not None and "row" not in plain  # a task whose sample id is its row id: no extra column
