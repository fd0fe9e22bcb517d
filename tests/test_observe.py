import pytest

from porttrack.observe import stacked_from_text

REPO = "vllm-project/vllm"


@pytest.mark.parametrize(
    "title, body, expected",
    [
        ("[Attention] thing (stacked on #41481)", "", [41481]),
        ("x", "Earlier revisions stacked on #46076; all of that has since landed in main via #46076", [46076]),
        ("x", "Depends on #12 and builds on vllm-project/vllm#34", [12, 34]),
        ("x", "Stacked on top of https://github.com/vllm-project/vllm/pull/77", [77]),
        ("x", "depends on other/repo#5 (another repository)", []),
        ("x", "mentions #99 without any stacking words", []),
        ("x", "stacked on #8, then depends on #8 again", [8]),
    ],
)
def test_stacking_is_read_from_pr_text(title, body, expected):
    assert stacked_from_text(title, body, REPO) == expected


def test_huge_hostile_body_is_scanned_quickly():
    import time

    body = ("stacked on " + " " * 50) * 20000 + "#1"
    started = time.monotonic()
    stacked_from_text("t", body, REPO)
    assert time.monotonic() - started < 1.0
