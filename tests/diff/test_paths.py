"""porttrack.diff.paths: hostile paths in untrusted diffs are refused; glob rules."""

from __future__ import annotations

import os

import pytest

from porttrack.common.errors import UnsafeInput
from porttrack.diff.hunks import parse_diff
from porttrack.diff.paths import (
    check_diff_paths,
    check_file_name,
    check_no_symlinked_parent,
    check_repo_path,
    check_symlink_targets,
    path_matches,
    resolve_inside,
)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty path"),
        ("/etc/passwd", "is absolute"),
        ("C:/Windows/x", "is absolute"),
        ("..", "'..' component"),
        ("../outside", "'..' component"),
        ("a/../../outside", "'..' component"),
        ("a/b/..", "'..' component"),
        ("./a", "'.' component"),
        ("a//b", "empty component"),
        ("a/", "empty component"),
        (".git/config", "reaches into the .git directory"),
        ("sub/.GIT/hooks/pre-commit", "reaches into the .git directory"),
        (".git./hooks/x", "reaches into the .git directory"),
        (".git /hooks/x", "reaches into the .git directory"),
        ("GIT~1/config", "reaches into the .git directory"),
        (".g\u200cit/config", "reaches into the .git directory"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("a\x1b[31mb", "control character"),
        ("a\\..\\b", "backslash"),
    ],
)
def test_hostile_paths_are_refused_with_a_reason(path, reason):
    with pytest.raises(UnsafeInput, match=reason) as err:
        check_repo_path(path)
    if path:
        assert repr(path) in str(err.value)


@pytest.mark.parametrize(
    "path",
    ["a/b.py", "dir with space/f.txt", "café.txt", ".github/workflows/ci.yml", ".gitignore",
     ".gitmodules", "a/.git-blame-ignore-revs", "x..y", "...", "caf\udce9.txt"],
)
def test_ordinary_paths_are_accepted(path):
    assert check_repo_path(path) == path


def entry(old: str, new: str, extra: str = "") -> bytes:
    return (f"diff --git a/{old} b/{new}\n{extra}--- a/{old}\n+++ b/{new}\n"
            "@@ -1 +1 @@\n-a\n+b\n").encode()


def test_diff_paths_are_checked_on_both_sides():
    check_diff_paths(parse_diff(entry("ok.txt", "ok.txt")))
    with pytest.raises(UnsafeInput, match=r"'\.\./evil' has a '\.\.' component"):
        check_diff_paths(parse_diff(entry("../evil", "../evil")))
    rename = (b"diff --git a/x b/.git/hooks/pre-commit\nsimilarity index 100%\n"
              b"rename from x\nrename to .git/hooks/pre-commit\n")
    with pytest.raises(UnsafeInput, match="reaches into the .git directory"):
        check_diff_paths(parse_diff(rename))
    quoted = b'diff --git "a/\\001x" "b/\\001x"\n--- "a/\\001x"\n+++ "b/\\001x"\n@@ -1 +1 @@\n-a\n+b\n'
    with pytest.raises(UnsafeInput, match="control character"):
        check_diff_paths(parse_diff(quoted))


def symlink(path: str, target: str) -> bytes:
    return (f"diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n"
            "\\ No newline at end of file\n").encode()


@pytest.mark.parametrize(
    ("link", "target", "reason"),
    [
        ("link", "/etc/passwd", "is absolute"),
        ("a/link", "../../outside", "outside the work tree"),
        ("link", "..", "outside the work tree"),
        ("a/link", "x/../../..", "'..' after a directory name"),
        ("link", ".git/config", "points into .git"),
        ("a/link", "../.git", "points into .git"),
    ],
)
def test_escaping_symlinks_are_refused(link, target, reason):
    with pytest.raises(UnsafeInput, match=reason):
        check_symlink_targets(parse_diff(symlink(link, target)))


@pytest.mark.parametrize(("link", "target"), [("link", "two.txt"), ("a/link", "../sibling"),
                                              ("a/b/link", "../../top/file"), ("a/link", "./here")])
def test_contained_symlinks_are_accepted(link, target):
    check_symlink_targets(parse_diff(symlink(link, target)))


def test_retargeted_symlink_is_checked_and_mode_only_link_is_refused():
    retarget = (b"diff --git a/l b/l\nindex 1111111..2222222 120000\n--- a/l\n+++ b/l\n"
                b"@@ -1 +1 @@\n-inside\n\\ No newline at end of file\n+/etc/shadow\n"
                b"\\ No newline at end of file\n")
    with pytest.raises(UnsafeInput, match="is absolute"):
        check_symlink_targets(parse_diff(retarget))
    becomes_link = b"diff --git a/f b/f\nold mode 100644\nnew mode 120000\n"
    with pytest.raises(UnsafeInput, match="without a target"):
        check_symlink_targets(parse_diff(becomes_link))


def test_writing_through_a_symlinked_directory_is_refused(tmp_path):
    root, outside = tmp_path / "work", tmp_path / "outside"
    (root / "inside" / "deep").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, root / "evil")
    os.symlink("inside", root / "alias")
    os.symlink("../..", root / "inside" / "up")
    os.symlink(".git", root / "gitlink")
    (root / ".git").mkdir()

    check_no_symlinked_parent(root, "inside/deep/file.py")
    check_no_symlinked_parent(root, "alias/deep/file.py")  # a link that stays inside is fine
    check_no_symlinked_parent(root, "not/yet/there.py")
    check_no_symlinked_parent(root, "evil")  # the link itself may be replaced by a patch
    with pytest.raises(UnsafeInput, match=r"'evil' is a symlink to .*outside the work tree"):
        check_no_symlinked_parent(root, "evil/file.py")
    with pytest.raises(UnsafeInput, match="outside the work tree"):
        check_no_symlinked_parent(root, "inside/up/x.py")
    with pytest.raises(UnsafeInput, match="symlink into .git"):
        check_no_symlinked_parent(root, "gitlink/hooks/pre-commit")
    with pytest.raises(UnsafeInput, match="'..' component"):
        check_no_symlinked_parent(root, "../x")


@pytest.mark.parametrize(
    ("path", "include", "exclude", "expected"),
    [
        ("vllm/attention/mla.py", [], [], True),
        ("vllm/attention/mla.py", ["vllm/**"], [], True),
        ("vllm/attention/mla.py", ["vllm/"], [], True),
        ("vllm", ["vllm/**"], [], False),
        ("vllm/attention/mla.py", ["vllm/*.py"], [], False),
        ("vllm/mla.py", ["vllm/*.py"], [], True),
        ("vllm/attention/mla.py", ["**/*.py"], [], True),
        ("setup.py", ["**/*.py"], [], True),
        ("setup.py", ["*.py"], [], True),
        ("vllm/setup.py", ["*.py"], [], False),
        ("vllm/a/b/c/mla.py", ["vllm/**/mla.py"], [], True),
        ("vllm/mla.py", ["vllm/**/mla.py"], [], True),
        ("vllm/attention/mla.py", ["**"], ["**/attention/**"], False),
        ("tests/test_x.py", ["**"], ["tests/"], False),
        ("docs/a.md", ["/docs/*.md"], [], True),
        ("csrc/k1.cu", ["csrc/k[0-9].cu"], [], True),
        ("csrc/kx.cu", ["csrc/k[!0-9].cu"], [], True),
        ("csrc/k1.cu", ["csrc/k[!0-9].cu"], [], False),
        ("a/b", ["a?b"], [], False),
        ("a/b", ["a[/]b"], [], False),
        ("file.tar.gz", ["file.tar.gz"], [], True),
        ("fileXtarYgz", ["file.tar.gz"], [], False),
        ("a/.hidden", ["a/*"], [], True),
    ],
)
def test_path_matches(path, include, exclude, expected):
    assert path_matches(path, include, exclude) is expected


# -- paths read from the workspace ----------------------------------------------------------------


@pytest.mark.parametrize("rel", ["../secret.txt", "a/../../secret.txt", "/etc/passwd", "", "a//b", ".git/config"])
def test_resolve_inside_refuses_a_path_that_is_not_plain(tmp_path, rel):
    (tmp_path / "patches").mkdir()
    with pytest.raises(UnsafeInput, match="the manifest: .*refusing to read or write outside"):
        resolve_inside(tmp_path / "patches", rel, "the manifest")


def test_resolve_inside_refuses_a_symlink_on_the_way_out_and_allows_one_within(tmp_path):
    folder = tmp_path / "patches"
    (folder / "real").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (folder / "retired").symlink_to(tmp_path / "outside", target_is_directory=True)
    (folder / "within").symlink_to("real", target_is_directory=True)
    (folder / "file.patch").symlink_to(tmp_path / "outside" / "secret.txt")  # dangling: still refused
    for rel in ("retired/x.patch", "retired", "file.patch"):
        with pytest.raises(UnsafeInput, match="outside .*patches .*committed symlink"):
            resolve_inside(folder, rel, "the queue")
    assert resolve_inside(folder, "within/x.patch", "the queue") == folder / "within" / "x.patch"


@pytest.mark.parametrize("name", ["a/b.patch", ".hidden", "..", "", ".git"])
def test_check_file_name_refuses_anything_but_one_plain_name(name):
    with pytest.raises(UnsafeInput, match="manifest"):
        check_file_name(name, "manifest")
    assert check_file_name("0001-pr1-x.abc.patch", "manifest") == "0001-pr1-x.abc.patch"
