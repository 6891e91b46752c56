"""The command line: help on every option, defaults shown, choices from the owner tree, --version,
and a usage error as one line with exit 2."""

from __future__ import annotations

import argparse

import pytest

from soaklab import __version__
from soaklab.cli import build_parser, main, parse
from soaklab.config.owners import available_algos, every_sim, every_task


def parsers(parser: argparse.ArgumentParser, name: str = "soaklab") -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                out += parsers(sub, f"{name} {sub_name}")
    return out


def test_every_option_and_argument_has_help():
    missing = [f"{name} {a.option_strings or a.dest}" for name, p in parsers(build_parser()) for a in p._actions
               if not isinstance(a, argparse._SubParsersAction) and not a.help]
    assert missing == []


def test_owner_choices_come_from_the_owner_tree():
    train = dict(parsers(build_parser()))["soaklab train"]
    choices = {a.dest: a.choices for a in train._actions if a.dest in ("algo", "task", "sim")}
    assert choices == {"algo": available_algos(), "task": every_task(), "sim": every_sim()}
    assert set(choices["algo"]) == {"sac", "flashsac"} and set(choices["sim"]) == {"mujoco", "mjwarp"}


def test_help_shows_defaults():
    text = dict(parsers(build_parser()))["soaklab metrics"].format_help()
    assert "(default: 20)" in text and "(default: None)" not in text


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"soaklab {__version__}"


def test_a_usage_error_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["train", "--algo", "ppo"])
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert err.count("\n") == 1 and "--algo: invalid choice: 'ppo'" in err


def test_record_update_passes_what_follows_the_separator_to_snakemake():
    # The command's own options may follow its positional argument and still be its own.
    args = parse(build_parser(), ["record", "update", "gpu-learning", "--cores", "16", "--",
                                  "--scheduler", "greedy", "--configfile", "x.yaml"])
    assert (args.name, args.cores) == ("gpu-learning", 16)
    assert args.passthrough == ["--scheduler", "greedy", "--configfile", "x.yaml"]
    assert parse(build_parser(), ["record", "update", "ci-dag"]).passthrough == []


def test_a_separator_on_a_command_that_passes_nothing_on_is_one_line_and_exit_2(capsys):
    assert main(["record", "check", "--", "--configfile", "x.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "arguments after --" in err[0]
