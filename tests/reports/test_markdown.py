"""The markdown summary keeps what users and models wrote inert: no HTML, no broken table, no escaped fence."""

from __future__ import annotations

from runner.reports.cases import Case
from runner.reports.markdown import markdown, release_markdown

HOSTILE = "<img src=x onerror=alert(1)>"


def test_names_and_messages_are_escaped_in_the_table_and_the_details_line():
    case = Case(name=f"evil/{HOSTILE}|x", verdict="failed", message=f"ModelError: bad hf_id {HOSTILE}\nsecond line",
                details="error text ``` with a fence ```` and more")
    text = markdown([case], "accuracy", "FAILED")
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "| evil/&lt;img src=x onerror=alert(1)&gt;&#124;x |" in text  # the pipe cannot open a new column
    assert "<details><summary>" in text and "second line</summary>" in text  # one line
    body = text.split("<summary>", 1)[1]
    assert "\n`````\nerror text ``` with a fence ```` and more\n`````\n" in body  # a fence longer than any run inside


def test_release_rows_are_escaped():
    case = Case(name=HOSTILE, verdict="no-go", message="a|b <b>", tier="critical", blocking=True)
    text = release_markdown("release", "NO-GO", "reason <script>", [case])
    assert "<script>" not in text and "<img" not in text and "a&#124;b &lt;b&gt;" in text
