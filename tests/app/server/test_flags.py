"""The settings flags: each takes one value (wrap finds where the agent's command starts by it), and an invalid
setting is described without its value."""

from __future__ import annotations

import argparse

import pytest
from pydantic import ValidationError

from app.server.flags import add_settings_flags, describe
from app.settings import Settings


def test_every_settings_flag_takes_exactly_one_value() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    add_settings_flags(parser)
    takes = {flag: action.nargs for action in parser._actions for flag in action.option_strings}
    assert takes and all(nargs is None for nargs in takes.values()), takes  # None: one value


def test_an_invalid_setting_is_named_without_the_value_given() -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(upstream_base_url="sk-secret-not-a-url")
    text = describe(raised.value)
    assert "upstream_base_url" in text and "sk-secret" not in text
