"""A tiny LongBench v1 copy in THUDM/LongBench's layout (``<subset>.jsonl``, rows with ``input``, ``context``,
``answers``, ``all_classes``...), our own short texts: one row per subset, three for ``passage_count``, so the
installed lm-eval definitions run over it offline (``task.local_dir``)."""

from __future__ import annotations

import json
from pathlib import Path

EN_QA = ("The lighthouse keeper's cat is called Pepper and sleeps on the lamp room stairs.",
         "What is the cat called?", ["Pepper"])
ROWS: dict[str, list[tuple[str, str, list[str]]]] = {
    **{name: [EN_QA] for name in ("narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique",
                                  "triviaqa")},
    "multifieldqa_zh": [("小船在夏天被漆成了蓝色。", "小船是什么颜色？", ["蓝色"])],
    "dureader": [("市场每周六早上开门，下午关门。", "市场什么时候开门？", ["每周六早上"])],
    "vcsum": [("会议决定下个月修好北边的桥。", "", ["会议决定修桥"])],
    "gov_report": [("The council spent its road budget on two new bridges.", "", ["The council built two bridges."])],
    "qmsum": [("Ann asked for more chairs; Ben agreed to order ten.", "What was decided?", ["Ben will order chairs."])],
    "multi_news": [("A storm closed the harbour. Boats stayed in port.", "", ["A storm closed the harbour."])],
    "samsum": [("Ann: lunch at noon?\nBen: yes", "Dialogue: Ann: tea?\nBen: sure\nSummary: ", ["They will have tea."])],
    "trec": [("Question: Where is the river?\nType: Location", "Question: Who built the bridge?\nType:", ["Human"])],
    "lsht": [("新闻：球队赢了比赛。\n类别：体育", "新闻：股市上涨。\n类别：", ["财经"])],
    "passage_count": [("Paragraph 1: Rain fell. Paragraph 2: Rain fell.", "", ["2"]),
                      ("Paragraph 1: A hill. Paragraph 2: A lake.", "", ["5"]),
                      ("Paragraph 1: A bell rang.", "", ["7"])],
    "passage_retrieval_en": [("Paragraph 1: Bees make honey. Paragraph 2: Owls hunt at night.",
                              "Owls are active after dark.", ["Paragraph 2"])],
    "passage_retrieval_zh": [("段落1：蜜蜂酿蜜。段落2：猫头鹰夜里捕猎。段落3：鱼在水里游。", "鱼生活在水中。", ["段落3"])],
    "lcc": [("def add(a, b):\n", "", ["    return a + b"])],
    "repobench-p": [("# file: math.py\ndef double(x):\n", "", ["    return 2 * x"])],
}
CLASSES = {"trec": ["Human", "Location", "Number"], "lsht": ["体育", "财经"]}
ZH = ("multifieldqa_zh", "dureader", "vcsum", "lsht", "passage_retrieval_zh")


def write_copy(root: Path, only: tuple[str, ...] | None = None) -> Path:
    """The copy in ``root`` (one ``<subset>.jsonl`` per subset, ``only`` those when given)."""
    root.mkdir(parents=True, exist_ok=True)
    for subset, rows in ROWS.items():
        if only is not None and subset not in only:
            continue
        with (root / f"{subset}.jsonl").open("w", encoding="utf-8") as f:
            for i, (context, question, answers) in enumerate(rows):
                row = {"input": question, "context": context, "answers": answers, "length": len(context.split()),
                       "dataset": subset, "language": "zh" if subset in ZH else "en",
                       "all_classes": CLASSES.get(subset), "_id": f"{subset}-{i}"}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return root
