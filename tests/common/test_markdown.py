"""Untrusted text in a GitHub issue: every rule of porttrack.common.markdown, checked in the source and,
where rendering matters, through GitHub's own GFM renderer
(cmark-gfm, through its Python binding: testing/gfm.py)."""

from __future__ import annotations

import re

import pytest

from porttrack.common import markdown as md
from testing.gfm import cmark


def visible(html: str) -> str:
    """The text a reader sees: tags removed, entities and the zero-width space resolved."""
    import html as html_mod

    return html_mod.unescape(re.sub(r"<[^>]+>", "", html)).replace("\u200b", "").strip()


@pytest.mark.parametrize(
    "title",
    [
        "Fix @alice's kernel, cc @vllm-project/maintainers",
        "<script>alert(1)</script> and <img src=x onerror=alert(1)>",
        "a | b | c",
        "![pixel](https://tracker.example/p.gif) [docs](https://evil.example) <https://evil.example>",
        "see http://evil.example and www.evil.example and mail me@evil.example",
        "fixes #123, GH-45 and other/repo#6",
        "**bold** _it_ ~~gone~~ `code` $x^2$ [^1]",
        "# not a heading",
        "1. not a list",
        "- not a list either",
        "&#64;bob &lt;b&gt; &amp;",
        "\\ trailing backslash \\",
    ],
)
def test_text_renders_as_exactly_the_text(title):
    source = md.text(title)
    html = cmark(f"| title |\n|---|\n| {source} |\n\n{source}\n")
    assert "<a " not in html and "<img" not in html and "<script" not in html
    assert "<em>" not in html and "<strong>" not in html and "<del>" not in html and "<code>" not in html
    assert "<h1>" not in html and "<ol>" not in html and "<ul>" not in html
    assert html.count("<td>") == 1  # the cell stayed one cell
    cell = re.search(r"<td>(.*?)</td>", html, re.S).group(1)
    assert visible(cell) == title.strip()  # what was written is what a reader sees


def test_no_mention_reference_or_autolink_survives_in_the_source():
    source = md.text("@alice #12 GH-3 https://x.example www.x.example a@b.example")
    assert not re.search(r"@[A-Za-z0-9]", source)
    assert not re.search(r"(?<!&)#\d", source) and not re.search(r"GH-\d", source, re.I)  # "&#8203;" is ours
    assert not re.search(r"[A-Za-z]://", source) and "www." not in source


def test_no_raw_html_in_the_source():
    source = md.text("<b>x</b> <!-- c --> <?php ?> <![CDATA[x]]>")
    assert "<" not in source and ">" not in source
    assert "<" not in cmark(source, "--unsafe").replace("<p>", "").replace("</p>", "")


def test_bidi_overrides_and_invisible_characters_are_removed():
    assert md.text("abc\u202edcba\u2066x\u2069\u200b\u200d\ufeff") == "abcdcbax"
    assert md.clean("a\x1b[31mred\x07") == "a[31mred"


def test_newlines_collapse_to_one_line_and_length_is_capped():
    assert md.text("a\n\nb\r\n\tc") == "a b c"
    long = md.text("x" * 500, limit=50)
    assert len(long) == 50 and long.endswith("…")


def test_link_only_to_github():
    assert md.link("https://github.com/o/r/pull/1", "#1") == "[\\#&#8203;1](https://github.com/o/r/pull/1)"
    assert md.link("https://evil.example/x", "label") == "label"
    assert md.link("javascript:alert(1)", "label") == "label"
    assert md.link("https://github.com.evil.example/", "label") == "label"
    assert md.pr_link("vllm-project/vllm", 48407) == "[#48407](https://redirect.github.com/vllm-project/vllm/pull/48407)"
    assert md.pr_link("not a repo", 1) == "#1"


def test_upstream_links_leave_no_back_reference():
    # redirect.github.com is GitHub's documented way to link without a cross-reference.
    assert md.pr_url("vllm-project/vllm", 1).startswith("https://redirect.github.com/")
    assert md.pr_url("randomvariable/vllm", 1, same_repo=True).startswith("https://github.com/")


def test_code_spans_only_for_safe_identifiers():
    assert md.code("vllm/v1/worker/utils.py") == "`vllm/v1/worker/utils.py`"
    assert md.code("a|b") == "a\\|b"
    assert md.code("<x>") == "&lt;x&gt;"
    assert md.code("tick`tick") == "tick\\`tick"


def test_ours_links_references_and_quotes_commands():
    out = md.ours("#48407 merged -> run `porttrack verify-converged 48407`", "vllm-project/vllm")
    assert out == ("[#48407](https://redirect.github.com/vllm-project/vllm/pull/48407) merged → run "
                   "`porttrack verify-converged 48407`")
    assert md.ours("#1 without a repository") == "\\#&#8203;1 without a repository"
    # A value quoted inside porttrack's sentence is still neutralised.
    assert "@&#8203;x" in md.ours("gate says `@x` and @x")


def test_marker_is_ours_and_found_only_on_the_first_line():
    assert md.marker("2026-W49") == "<!-- porttrack:weekly:2026-W49 -->"
    with pytest.raises(ValueError):
        md.marker("2026-W49 --><script>")
    assert md.find_marker("<!-- porttrack:weekly:2026-W49 -->\n# t") == "2026-W49"
    assert md.find_marker("quoted: <!-- porttrack:weekly:2026-W49 -->") is None
    # Untrusted text cannot forge a marker: it has no "<" left.
    assert md.find_marker(md.text("<!-- porttrack:weekly:2026-W49 -->")) is None


def test_join_neutralises_what_is_not_already_safe():
    assert md.join([md.Md("**a**"), "*b*"]) == "**a**, \\*b\\*"


def test_a_reference_that_names_its_repository_is_linked_whole_and_only_to_that_repository() -> None:
    """"moved to vllm-project/vllm#46849" rendered as "vllm-project/vllm" glued to a "#46849" link;
    "other/repo#12" was linked to upstream's #12, a PR that has nothing to do with it."""

    html = cmark(str(md.ours("moved to vllm-project/vllm#46849; not other/repo#12; plain #48407", "vllm-project/vllm")))
    assert '<a href="https://redirect.github.com/vllm-project/vllm/pull/46849">vllm-project/vllm#46849</a>' in html, html
    assert '<a href="https://redirect.github.com/vllm-project/vllm/pull/48407">#48407</a>' in html, html
    assert "pull/12" not in html and "other/repo" in html, html
