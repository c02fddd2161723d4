"""Flags generated from a typed config: each rule of harness.cli.flags, and its errors naming the flag."""

from __future__ import annotations

import argparse
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from harness.cli.flags import add_model_arguments, model_of
from harness.errors import UsageError


class Settings(BaseModel):
    name: str = Field(description="what it is called")
    rate: Annotated[float, Field(gt=0)] = Field(2.0, description="requests per second")
    fractions: tuple[float, ...] = Field((0.5, 1.0), description="shares of the rate")
    extra: tuple[str, ...] = Field((), description="passed on", json_schema_extra={"repeatable": True})
    mode: Literal["fast", "slow"] = Field("fast", description="how")
    verbose: bool = Field(False, description="say more")
    warmup: bool = Field(True, description="skip the warm-up")
    async_steps: bool | None = Field(None, description="on, off, or the job's choice")
    attempts: Annotated[int, Field(ge=2)] = Field(3, description="tries", json_schema_extra={"flag": "--tries",
                                                                                               "metavar": "N"})
    secret: str | None = Field(None, json_schema_extra={"cli": False})


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_model_arguments(parser, Settings)
    args = parser.parse_args(argv)
    args.command = "test"
    return args


def test_every_rule_makes_its_flag_and_the_config_comes_back_typed():
    args = parse("--name", "x", "--rate", "4", "--fractions", "0.25, 2", "--extra", "a", "--extra", "b",
                 "--mode", "slow", "--verbose", "--no-warmup", "--no-async-steps", "--tries", "5")
    settings = model_of(Settings, args, secret="kept off the command line")
    assert settings == Settings(name="x", rate=4.0, fractions=(0.25, 2.0), extra=("a", "b"), mode="slow",
                                verbose=True, warmup=False, async_steps=False, attempts=5,
                                secret="kept off the command line")


def test_unset_flags_leave_the_config_its_defaults():
    assert model_of(Settings, parse("--name", "x")) == Settings(name="x")


def test_help_shows_each_default_and_hides_what_is_off_the_command_line():
    parser = argparse.ArgumentParser()
    add_model_arguments(parser, Settings)
    text = " ".join(parser.format_help().split())
    assert "requests per second (default 2)" in text and "shares of the rate (default 0.5,1)" in text
    assert "--tries N" in text and "--async-steps, --no-async-steps" in text and "--secret" not in text


@pytest.mark.parametrize(("argv", "line"), [
    (["--name", "x", "--rate", "-1"], "--rate: Input should be greater than 0 (got -1.0)"),
    (["--name", "x", "--tries", "1"], "--tries: Input should be greater than or equal to 2 (got 1)"),
])
def test_a_bad_value_is_one_line_naming_its_flag(argv, line):
    with pytest.raises(UsageError) as raised:
        model_of(Settings, parse(*argv))
    assert str(raised.value) == line


def test_a_list_that_is_not_numbers_is_refused_by_the_parser():
    with pytest.raises(SystemExit):
        parse("--name", "x", "--fractions", "0.5,x")
