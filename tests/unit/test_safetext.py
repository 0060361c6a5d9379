"""Text safe to show (`ductline.safetext`): terminal control characters come out
escaped, printable text of any script comes out as it went in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ductline.safetext import printable, printable_value

FORBIDDEN = set(range(0x00, 0x09)) | set(range(0x0B, 0x20)) | set(range(0x7F, 0xA0)) | {0x2028, 0x2029} \
    | set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def test_escapes_are_shown_as_python_writes_them():
    assert printable("\x1b]0;title\x07") == "\\x1b]0;title\\x07"
    assert printable("\x1b]52;c;ZXZpbA==\x07") == "\\x1b]52;c;ZXZpbA==\\x07"  # OSC 52: the clipboard
    assert printable("done\r\x1b[Kforged") == "done\\r\\x1b[Kforged"
    assert printable("\x9b31m") == "\\x9b31m"  # a one-byte CSI
    assert printable("\u202egnp.exe") == "\\u202egnp.exe"
    assert printable("a\x00b") == "a\\x00b" and printable("\ud800") == "\\ud800"


def test_lines_and_tabs_stay_unless_asked_for_one_line():
    assert printable("Traceback:\n\tline") == "Traceback:\n\tline"
    assert printable("a\nb\tc", newlines=False) == "a\\nb\\tc"


def test_text_of_any_script_is_unchanged():
    for text in ("plain", "é ü 中文 🙂", "ąčę — “quoted”", ""):
        assert printable(text) is text or printable(text) == text


@given(st.text(st.characters(exclude_categories=())))
def test_nothing_forbidden_survives_and_the_result_is_utf8(text):
    shown = printable(text)
    assert not any(ord(c) in FORBIDDEN for c in shown)
    shown.encode("utf-8")
    assert "\n" not in printable(text, newlines=False)


def test_values_are_walked_keys_included():
    assert printable_value({"k\x1b": ["\r", 1, None]}) == {"k\\x1b": ["\\r", 1, None]}
