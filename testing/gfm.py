"""GitHub Flavored Markdown, rendered by GitHub's own renderer (cmark-gfm) through its Python
binding `cmarkgfm` (the `[test]` extra), so the tests need no system binary.

`cmark(markdown)` renders as the `cmark-gfm` command line did with `--extension table
--extension autolink --extension strikethrough --extension tasklist`; `cmark(markdown, "--unsafe")`
also passes raw HTML through. The `tagfilter` extension is left out on purpose: it would turn a
raw `<script>` into text by itself, so a test asserting "no raw HTML reached the page" in the
unsafe rendering could no longer fail because of porttrack's own escaping.
"""

from __future__ import annotations

EXTENSIONS = ("table", "autolink", "strikethrough", "tasklist")
FLAGS = ("--unsafe",)


def cmark(markdown: str, *flags: str) -> str:
    """The HTML GitHub's renderer makes of `markdown`; `flags` as the binary spells them."""
    # imported here: a compiled extension only the tests need
    import cmarkgfm
    from cmarkgfm.cmark import Options

    unknown = [f for f in flags if f not in FLAGS]
    if unknown:
        raise ValueError(f"unsupported renderer flags {unknown}; known: {list(FLAGS)}")
    options = Options.CMARK_OPT_UNSAFE if "--unsafe" in flags else Options.CMARK_OPT_DEFAULT
    return cmarkgfm.cmark.markdown_to_html_with_extensions(markdown, options, list(EXTENSIONS))
