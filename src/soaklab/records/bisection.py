"""The search of `soaklab record bisect`, without git or processes: which commit to try next, what
the verdicts so far say, and the state file a bisection resumes from.

The commits are the bad revision's first-parent line back to the good one (`commits[0]` is good,
`commits[-1]` bad), so the line is ordered and one binary search over it is exact: every commit
either reproduces the record or does not. A commit that could not be judged (it did not build, run
or finish its comparison) is skipped, as `git bisect skip` does: the search tries the untried commit
nearest the middle instead, and when only skipped commits lie between the last good and the first
bad one, the answer is that range, named whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json, write_json_atomic

GOOD, BAD, SKIP = "good", "bad", "skip"
STATE_VERSION = 1


@dataclass(frozen=True)
class Bounds:
    """The range still open: commits[good] reproduces the record, commits[bad] does not."""

    good: int
    bad: int
    untried: tuple[int, ...]  # indices strictly between them, neither judged nor skipped
    skipped: tuple[int, ...]  # indices strictly between them that could not be judged

    @property
    def done(self) -> bool:
        return not self.untried

    @property
    def steps_left(self) -> int:
        """Steps a binary search needs at most over the untried commits (ceil log2(n + 1))."""
        return math.ceil(math.log2(len(self.untried) + 1))


def bounds(commits: list[str], verdicts: dict[str, str]) -> Bounds:
    """The open range from the verdicts so far: the first bad commit of the line, and the last good
    one before it."""
    bad = next(i for i, c in enumerate(commits) if i > 0 and verdicts.get(c) == BAD or i == len(commits) - 1)
    good = max(i for i, c in enumerate(commits[:bad]) if verdicts.get(c) == GOOD or i == 0)
    between = range(good + 1, bad)
    return Bounds(good, bad, tuple(i for i in between if commits[i] not in verdicts),
                  tuple(i for i in between if verdicts.get(commits[i]) == SKIP))


def next_index(state: Bounds) -> int | None:
    """The untried commit nearest the middle of the open range (the earlier on a tie), None when done."""
    if state.done:
        return None
    middle = (state.good + state.bad) / 2
    return min(state.untried, key=lambda i: (abs(i - middle), i))


def answer(commits: list[str], verdicts: dict[str, str]) -> tuple[str, list[str]]:
    """The first bad commit, and the skipped commits before it that might be the first instead."""
    state = bounds(commits, verdicts)
    assert state.done, "the search has commits left to try"
    return commits[state.bad], [commits[i] for i in state.skipped]


def new_state(record: str, good: str, bad: str, commits: list[str]) -> dict[str, Any]:
    return {"state_version": STATE_VERSION, "record": record, "good": good, "bad": bad, "commits": commits,
            "steps": {}}


def verdicts_of(state: dict[str, Any]) -> dict[str, str]:
    return {commit: step["verdict"] for commit, step in state["steps"].items()}


def save(path: Path, state: dict[str, Any]) -> None:
    """Written whole after every step (atomic rename): a bisection stopped at any moment resumes."""
    write_json_atomic(path, state)


def load(path: Path, record: str, good: str, bad: str, commits: list[str]) -> dict[str, Any]:
    """The state of this bisection (same record, revisions and line of commits) to resume, or a new one
    when none was saved. A state file of another bisection, or one that is not a state, is refused."""
    if not path.is_file():
        return new_state(record, good, bad, commits)
    try:
        state = read_json(path)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: unreadable bisection state ({exc}); remove it to start again") from None
    same = isinstance(state, dict) and state.get("state_version") == STATE_VERSION and \
        [state.get(k) for k in ("record", "good", "bad", "commits")] == [record, good, bad, commits]
    steps = state.get("steps") if isinstance(state, dict) else None
    if not same or not isinstance(steps, dict) or any(
            c not in commits or not isinstance(s, dict) or s.get("verdict") not in (GOOD, BAD, SKIP)
            for c, s in steps.items()):
        raise InvalidInput(f"{path}: not the state of this bisection (record {record}, {good[:7]}..{bad[:7]}); "
                           "remove it to start again")
    return state
