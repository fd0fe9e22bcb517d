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


# GitHub's issue look, near enough to judge a rendered issue by eye (tables, code blocks, links)
_CSS = """body{font-family:-apple-system,"Segoe UI","Noto Sans",Helvetica,Arial,sans-serif,"Noto Color Emoji";
max-width:980px;margin:24px auto;font-size:14px;line-height:1.5;color:#1f2328}
table{border-collapse:collapse}td,th{border:1px solid #d1d9e0;padding:6px 13px}
pre{background:#f6f8fa;padding:16px;border-radius:6px}code{background:#eff1f3;padding:.2em .4em;border-radius:6px;font-size:85%}
pre code{background:none;padding:0}a{color:#0969da;text-decoration:none}h1,h2{border-bottom:1px solid #d1d9e0;padding-bottom:.3em}"""


def page(markdown: str) -> str:
    """A whole HTML page of `markdown` as GitHub's renderer makes it, for a browser to show."""
    return f"<!doctype html><meta charset=utf-8><style>{_CSS}</style><body>{cmark(markdown)}</body>"


def screenshot(markdown: str, png: str, *, width: int = 1100, height: int = 2000) -> None:
    """`markdown` rendered by cmark-gfm and photographed by headless Chromium (a real browser),
    to look at what the team will see. Chromium must be installed (`apt-get install chromium`)."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        raise RuntimeError("no chromium on PATH: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "issue.html"
        html.write_text(page(markdown), encoding="utf-8")
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--window-size={width},{height}", f"--screenshot={Path(png).resolve()}", html.as_uri()],
                       check=True, capture_output=True, timeout=120, cwd=tmp)


if __name__ == "__main__":  # python -m testing.gfm ISSUE.md OUT.png
    import sys

    screenshot(open(sys.argv[1], encoding="utf-8").read(), sys.argv[2])
