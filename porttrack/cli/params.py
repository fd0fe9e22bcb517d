"""Argument types the commands share: a PR number as people write it, `48407` or `#48407` (as
GitHub shows it, and as porttrack's own messages say it)."""

from __future__ import annotations

import click


class PrNumber(click.ParamType):
    """A positive PR number, with or without one leading `#`: `1234`, `#1234`, ` #1234 `."""

    name = "PR"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        text = str(value).strip()
        digits = text[1:] if text.startswith("#") else text
        if not (digits.isascii() and digits.isdigit()) or int(digits) <= 0:
            self.fail(f"{value!r} is not a pull request number (write 1234 or #1234)", param, ctx)
        return int(digits)


PR_NUMBER = PrNumber()
