"""porttrack.common.clock: how moments are read, written and grouped into weeks."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from porttrack.common import clock
from porttrack.common.errors import InputError
from porttrack.workspace import state


def test_a_date_is_midnight_utc_and_a_naive_time_is_utc():
    assert clock.parse_moment("2026-11-23") == datetime(2026, 11, 23, tzinfo=timezone.utc)
    assert clock.parse_moment("2026-11-23T08:30:00") == datetime(2026, 11, 23, 8, 30, tzinfo=timezone.utc)
    assert clock.stamp(clock.parse_moment("2026-11-23T10:30:00+02:00")) == "2026-11-23T08:30:00Z"


def test_a_bad_moment_names_what_was_given():
    with pytest.raises(InputError, match=r"--now: expected a date .* got 'next tuesday'"):
        clock.parse_moment("next tuesday", "--now")


def test_weeks_are_iso_weeks_across_the_year_boundary():
    assert clock.iso_week(datetime(2026, 12, 31, tzinfo=timezone.utc)) == "2026-W53"
    assert clock.iso_week(datetime(2027, 1, 4, tzinfo=timezone.utc)) == "2027-W01"


def test_now_is_utc_and_stamps_like_the_state_records():
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    assert clock.now().tzinfo is not None and clock.now() >= before
    for text in (clock.utcnow(), state.utcnow()):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", text)
    assert abs(clock.parse_moment(clock.utcnow()) - clock.parse_moment(state.utcnow())) < timedelta(seconds=5)
