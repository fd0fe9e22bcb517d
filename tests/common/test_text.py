from porttrack.common.text import for_terminal


def test_escape_sequences_controls_and_bidi_overrides_are_removed():
    hostile = "\x1b[31mred\x1b[0m \x1b]0;title\x07ok\u202egnp.exe\r\nnext\x00"
    assert for_terminal(hostile) == "red okgnp.exe next"


def test_long_text_is_cut_with_an_ellipsis():
    assert for_terminal("x" * 500, limit=10) == "x" * 9 + "…"
