"""Error types shared by every stage, mapped to the CLI's exit codes.

Exit 2 means the input or configuration is invalid and nothing was spawned or
written; exit 1 is a runtime failure. The message of either is one line that
names the setting or file and how to fix it.
"""

from __future__ import annotations

from typing import Any

# The exit code of a trainer or soak cancelled after it wrote a resumable checkpoint at the signal:
# "run me again and I resume" (EX_TEMPFAIL of sysexits.h: a temporary failure, the request may be
# retried). A scheduler's requeue, or the same command again, continues the run.
REQUEUE_EXIT = 75


class SoaklabError(Exception):
    """Base of soaklab's own errors; ``exit_code`` is what the CLI returns."""

    exit_code = 1


class InvalidInput(SoaklabError):
    """Bad configuration, flag or file: fail closed before anything is spawned."""

    exit_code = 2


class SettingError(InvalidInput):
    """One setting holds a value outside its contract."""

    def __init__(self, key: str, value: Any, expected: str) -> None:
        self.key = key
        self.value = value
        self.expected = expected
        super().__init__(f"{key}={format_value(value)}: {expected}")


class RuntimeFailure(SoaklabError):
    """Something failed while running (a fetch, a subprocess, a write)."""

    exit_code = 1


def format_value(value: Any) -> str:
    """Render a raw value so its type is visible: '2' (str) differs from 2 (int)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true (bool)" if value else "false (bool)"
    if isinstance(value, str):
        return f"'{value}' (str)"
    if isinstance(value, float):
        return f"{value!r} (float)"
    return repr(value)
