"""Diffs and what can be said of them without opening a door: bytes in, records out.

  hunks      parse a diff into files and hunks, hunk ids (a content hash that survives line shifts),
             build a patch back
  relations  which hunks travel together (overlap, adjacency, names), revisions compared
  presence   is a hunk's post-image (or its pre-image) in a file, at its own location
  pycheck    Python names a hunk uses or binds; a file's compile errors and undefined names (pyflakes),
             bounded, cached by blob id
  pyimports  what a Python module imports and binds at module level
  pymodules  names across the project's modules: hunks tied by imports, imports that no longer resolve
  paths      the paths a diff names, refused when unsafe (absolute, `..`, symlinks out)

May import: common.
"""
