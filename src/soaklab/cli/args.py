"""What every command family's parser shares: the help format, one-line usage errors, the
owner flags and KEY=VALUE overrides."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn


class HelpFormatter(argparse.HelpFormatter):
    """Each option's default after its help, where it has one worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS) \
                and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """Defaults shown in every help; a usage error is one line and exit 2, like every refusal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def owner_arguments(parser: argparse.ArgumentParser, required: bool) -> None:
    """--algo/--task/--sim, with the owners of the YAML tree as choices."""
    from soaklab.config.owners import available_algos, every_sim, every_task

    parser.add_argument("--algo", required=required, choices=available_algos(), help="the algorithm")
    parser.add_argument("--task", required=required, choices=every_task(), help="the task")
    parser.add_argument("--sim", required=required, choices=every_sim(), help="the physics backend")


def override_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="config overrides, VALUE a YAML scalar (docs/settings-contract.md)")
