"""Fixtures of the actor tests."""

from __future__ import annotations

import pytest
from member_threads import PollingMember


@pytest.fixture
def members():
    """PollingMembers a test starts (it appends them); all are closed at the end of the test."""
    started: list[PollingMember] = []
    yield started
    for m in started:
        m.close()
