"""The door to GitHub: the only package that speaks HTTP (through requests).

  client     every request porttrack sends: deadline, retries, conditional cache, endpoints
  records    the frozen records the client returns (never a library's objects)
  policy     token and rate-limit policy, the cache of ETags in .porttrack/
  graphql    batched GraphQL reads
  budget     the requests one command may spend, and what they cost

May import: common, workspace.
"""
