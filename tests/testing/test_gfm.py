"""The GFM renderer the report and markdown tests check with (testing/gfm.py) sees what those
tests look for: it would show a broken table, a link, a strikethrough, a task list and raw HTML,
so their assertions can fail."""

from __future__ import annotations

import re

import pytest

from testing.gfm import cmark


def test_a_bar_in_a_cell_breaks_the_row_and_an_escaped_one_does_not():
    broken = cmark("| a | b |\n|---|---|\n| x | y | z |\n")
    kept = cmark("| a | b |\n|---|---|\n| x \\| y | z |\n")
    assert broken.count("<table>") == 1 and len(re.findall(r"<td[ >]", broken)) == 2  # the extra cell is dropped
    assert len(re.findall(r"<td[ >]", kept)) == 2 and "x | y" in kept


def test_autolinks_strikethrough_and_task_lists_render():
    html = cmark("www.example.com and https://x.example ~~gone~~\n\n- [ ] todo\n- [x] done\n")
    assert '<a href="http://www.example.com">' in html and '<a href="https://x.example">' in html
    assert "<del>gone</del>" in html
    assert html.count('type="checkbox"') == 2 and 'checked=""' in html


def test_raw_html_is_omitted_unless_unsafe():
    source = "<script>alert(1)</script> <img src=x>\n"
    assert "<script" not in cmark(source) and "raw HTML omitted" in cmark(source)
    unsafe = cmark(source, "--unsafe")
    assert "<script>alert(1)</script>" in unsafe and "<img src=x>" in unsafe  # no tag filter hides it


def test_an_unknown_flag_is_refused():
    with pytest.raises(ValueError, match="--smart"):
        cmark("x", "--smart")
