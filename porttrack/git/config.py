"""The git settings porttrack pins for every git process it starts (`git -c`, which outranks the
user's, global and system config and `GIT_CONFIG_*`).

The user's config otherwise stays in force: credentials, `url.*.insteadOf` mirrors, proxies,
`safe.directory`, identities. Pinned are only the settings that change the text porttrack parses
or the hunks it decides on, so that a maintainer's `~/.gitconfig` cannot change a verdict, a hunk
id or a patch. Measured on one PR (tests/git/test_config.py), unpinned: diff.noprefix made import
and verify-converged fail, so did color.diff=always (it outranks color.ui); diff.context, diff.interHunkContext, diff.orderFile and core.quotePath
each wrote another patch. The rest are pinned because git documents them as changing the output
parsed here (a histogram diff places hunks otherwise, a signature or a followed rename adds lines
or commits), even where that one PR did not show it:

  diff.noprefix, diff.mnemonicPrefix, diff.srcPrefix, diff.dstPrefix, diff.relative
      the `a/` `b/` paths every diff parser here reads (noprefix=true made verify-converged fail)
  diff.context, diff.interHunkContext, diff.algorithm, diff.indentHeuristic, diff.suppressBlankEmpty
      where hunks start and end, and so their ids, their separability and the patch files
  diff.orderFile
      the order of files in a diff, and so of hunks in a patch (/dev/null: git's own order)
  diff.submodule
      a submodule's entry in a diff: its commit ids, never a log
  log.follow, log.showSignature
      which commits a one-path `git log` lists, and nothing but the asked format on its stdout
  core.quotePath
      how a diff header spells a path that is not plain ASCII
  mailinfo.scissors
      a commit message cut at a "-- >8 --" line when a patch is built
  core.pager, color.ui, color.diff, color.status, color.branch
      no pager, no colour codes in parsed output (color.diff=always outranks color.ui=false)
  i18n.logOutputEncoding, i18n.commitEncoding
      commit messages as UTF-8, whatever the user reads or writes them in (commitEncoding=latin1
      made the staging commit's author Latin-1 beside a UTF-8 subject, and its SHA the user's)
  apply.whitespace, apply.ignoreWhitespace
      `git apply` takes a patch's whitespace as it is (=fix would rewrite the lines it applies;
      ignoreWhitespace=change applied a patch whose context the fork had re-spaced)
  diff.renames
      git's default, so `log -p` of the fork's history lists a rename as one (false split it)
  core.hooksPath
      no user hook runs inside porttrack's git (a post-checkout hook's exit status failed its
      temporary worktrees; a reference-transaction hook could refuse its refs)
"""

from __future__ import annotations

PINNED = {
    "core.pager": "cat",
    "color.ui": "false",
    "color.diff": "false",
    "color.status": "false",
    "color.branch": "false",
    "i18n.logOutputEncoding": "UTF-8",
    "i18n.commitEncoding": "UTF-8",
    "apply.whitespace": "nowarn",
    "apply.ignoreWhitespace": "no",
    "diff.renames": "true",
    "core.hooksPath": "/dev/null",
    "diff.noprefix": "false",
    "diff.mnemonicPrefix": "false",
    "diff.srcPrefix": "a/",
    "diff.dstPrefix": "b/",
    "diff.relative": "false",
    "diff.context": "3",
    "diff.interHunkContext": "0",
    "diff.algorithm": "myers",
    "diff.indentHeuristic": "true",
    "diff.suppressBlankEmpty": "false",
    "diff.orderFile": "/dev/null",
    "diff.submodule": "short",
    "log.follow": "false",
    "log.showSignature": "false",
    "core.quotePath": "true",
    "mailinfo.scissors": "false",
}

# `git <ARGS> command ...`: the pins as command-line options, for the one git door to put first.
ARGS: tuple[str, ...] = tuple(arg for key, value in PINNED.items() for arg in ("-c", f"{key}={value}"))

# For a command that promised to stay offline (`status --offline`, `report weekly --offline`): no
# transport at all, so that a partial clone (`init` makes the fork checkout blobless) cannot fetch a
# missing file's contents from GitHub behind the user's back. A git child (the on-demand fetch)
# inherits `git -c`, so it fails at once, locally; the read that needed it says so.
# protocol.<name>.allow outranks protocol.allow (a ~/.gitconfig may say `protocol.file.allow=always`).
OFFLINE = tuple(arg for name in ("", "file.", "git.", "ssh.", "http.", "https.", "ext.")
                for arg in ("-c", f"protocol.{name}allow=never"))
# ...and in the environment, which outranks config and reaches remote helpers too: no transport.
OFFLINE_ENV = {"GIT_ALLOW_PROTOCOL": ""}

# Environment variables of the user's shell that git would obey over both config and options:
# dropped from every git process porttrack starts (its scratch indexes set GIT_INDEX_FILE
# themselves, after this). GIT_DIFF_OPTS=--unified=9 turns even `git diff -U0` into a 9-line
# context diff (measured, git 2.39), which would move every hunk porttrack maps.
UNSET = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR", "GIT_NAMESPACE",
    "GIT_DIFF_OPTS", "GIT_EXTERNAL_DIFF",
    # pathspec magic for every path (GIT_ICASE_PATHSPECS widened a path-limited diff; with the
    # literal pathspecs porttrack asks for, every such `log` died)
    "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_LITERAL_PATHSPECS",
    # the allowed transports: it outranks every protocol.*.allow (OFFLINE sets it empty)
    "GIT_ALLOW_PROTOCOL",
)
