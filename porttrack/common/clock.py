"""porttrack's one clock: the time now, how a moment is written, and how one is read.

Every record porttrack writes stamps times as UTC `YYYY-MM-DDTHH:MM:SSZ`, so two stamps compare
as strings in time order; weeks are ISO weeks (`2026-W49`), the unit of the weekly report.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from porttrack.common.errors import InputError


def now() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(timezone.utc)


def stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> str:
    """The current time as a stamp."""
    return stamp(now())


def iso_week(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def parse_moment(text: str, what: str = "time") -> datetime:
    """A date (`2026-11-23`, midnight UTC) or an ISO 8601 time; naive times are UTC."""
    value = (text or "").strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=timezone.utc)
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{what}: expected a date (2026-11-23) or an ISO 8601 time (2026-11-23T08:00:00Z), got {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
