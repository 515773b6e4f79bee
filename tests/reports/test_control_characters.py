"""Well-formed outputs whatever the input holds: a sample id with an ESC, a carriage return, a NUL or a
bidirectional override reaches neither the terminal nor the reports raw, and junit.xml stays XML."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from runner.contract.printable import printable
from runner.reports.cases import Case
from runner.reports.junit import junit_xml
from tests.commands.test_compare import compare, run_dir

RAW = ("\x1b", "\r", "\x00", "\x07", "\u202e")


def test_printable_escapes_control_characters_and_keeps_lines_and_text():
    assert printable("a\x1b[31mb\rc\x00d\u202ee") == "a\\x1b[31mb\\rc\\x00d\\u202ee"
    assert printable("line 1\n\tline 2 é ✓") == "line 1\n\tline 2 é ✓"


def test_a_junit_case_named_with_control_characters_is_well_formed_xml():
    case = Case("job\x1b[2J\x00", "no-go", "drop \x07 shown", "details\x1b]0;title\x07", 1.0, 2.0, -1.0, 0.01, 10)
    root = ET.fromstring(junit_xml([case], "suite\x0b"))
    assert root.find("testsuite/testcase").get("name") == "job\\x1b[2J\\x00"


def test_compare_with_control_characters_in_sample_ids_prints_and_writes_them_escaped(tmp_path, capsys):
    ids = [f"q{i:02d}" for i in range(30)] + [f"evil\x1b[31m{i}\r\x00\u202e" for i in range(10)]
    a = run_dir(tmp_path / "a", {i: 100.0 for i in ids})
    b = run_dir(tmp_path / "b", {i: 0.0 if i.startswith("evil") else 100.0 for i in ids})
    markdown = tmp_path / "summary.md"
    code, out, err, report = compare(tmp_path, str(a), str(b), "--markdown", str(markdown), "--tolerance", "2",
                                    capsys=capsys)
    assert code != 1, err
    assert not any(c in out + err for c in RAW), repr(out)
    assert "evil\\x1b[31m" in out  # shown, escaped
    out_dir = next(tmp_path.glob("cmp-*"))
    ET.parse(out_dir / "junit.xml")  # well-formed
    for written in (out_dir / "junit.xml", out_dir / "report.txt", markdown):
        assert not any(c in written.read_text() for c in RAW), written


def test_an_error_message_quoting_the_input_prints_its_control_characters_escaped():
    from runner.contract.errors import ConfigError

    text = ConfigError("unknown sample", where="a\x1b[2J", given="id\r\x00").render()
    assert not any(c in text for c in RAW) and "a\\x1b[2J" in text and "id\\r\\x00" in text
