"""The vocabulary every layer shares; it imports nothing else of porttrack.

  errors     the one error hierarchy and the published exit-code table
  secrets    tokens: where one is found, and redaction (never print, log or store one)
  text       untrusted text made safe for a terminal; short SHAs
  markdown   untrusted text made safe for GitHub-flavoured Markdown
  clock      the one clock (UTC, parsed and printed one way)
  trace      -v/--verbose: each git command and GitHub request, timed, to stderr
"""
