"""The vocabulary every layer shares; it imports nothing else of porttrack.

  errors     the one error hierarchy and the published exit-code table
  secrets    tokens: where one is found, and redaction (never print, log or store one)
  text       untrusted text made safe for a terminal; short SHAs
  markdown   untrusted text made safe for GitHub-flavoured Markdown
  clock      the one clock (UTC, parsed and printed one way)
  trace      -v/--verbose: each git command and GitHub request, timed, to stderr
  commitgraph  git's commit-graph files read as bytes (no process; the git door asks it)
  gitconfig  the git settings pinned for every git process (a user's config cannot change a verdict)
"""
