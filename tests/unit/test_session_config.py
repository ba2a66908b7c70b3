"""A session's settings (hosts/session_config.py): one dataclass holds them and their
defaults; Session and Agent take it, or its fields as keywords laid over it."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

import pytest

from p4hub.hosts.agent import Agent
from p4hub.hosts.errors import SessionError
from p4hub.hosts.session import Session
from p4hub.hosts.session_config import SessionConfig, SessionSettings, with_settings

JOB = 7


def test_the_keywords_are_the_fields():
    hints = get_type_hints(SessionConfig)
    assert set(SessionSettings.__annotations__) == {f.name for f in fields(SessionConfig)}
    assert get_type_hints(SessionSettings) == {name: hints[name] for name in hints}


def test_keywords_lay_over_a_config():
    base = SessionConfig(lanes=256, rto=0.5)
    assert with_settings(None, {}) == SessionConfig()
    assert with_settings(base, {}) is base
    assert with_settings(base, {"rto": 0.1}) == SessionConfig(lanes=256, rto=0.1)


def test_a_session_runs_with_its_config_or_its_keywords():
    config = SessionConfig(window=4, lanes=256, classes=2, credit=3, congestion=False)
    by_config = Session(JOB, 0, 2, 0, 8, config=config)
    by_keywords = Session(JOB, 0, 2, 0, 8, 4, lanes=256, classes=2, credit=3, congestion=False)
    for s in (by_config, by_keywords):
        assert s.config == config
        assert (s.window, s.lanes, s.classes, s.credit) == (4, 256, 2, 3)
        assert s._cwnd is None
    assert Session(JOB, 0, 2, 0, 8, 2, config=config).window == 2  # the positional window wins
    defaults = Session(JOB, 0, 2, 0, 8)
    assert (defaults.window, defaults.credit, defaults.deadline) == (8, 8, 10.0)


@pytest.mark.parametrize("bad", [dict(lanes=32), dict(classes=0), dict(classes=65),
                                 dict(credit=0), dict(deadline=0.0)])
def test_a_setting_no_session_can_run_with_raises(bad):
    with pytest.raises(SessionError):
        SessionConfig(**bad)
    with pytest.raises(SessionError):
        Session(JOB, 0, 2, 0, 64, **bad)


def test_the_agent_takes_a_config_and_its_timeout_is_the_deadline():
    with Agent(JOB, 0, 2, ("127.0.0.1", 9), bind=("127.0.0.1", 0), slot_count=8,
               config=SessionConfig(lanes=256, rto=0.05), timeout=3.0, classes=2) as agent:
        assert agent.config == SessionConfig(lanes=256, rto=0.05, deadline=3.0, classes=2)
        assert agent.lanes == 256 and agent.classes == 2
