"""The search of `record bisect` on its own: the order commits are tried in, skips, the answer, and
the state file a stopped bisection resumes from."""

from __future__ import annotations

import json

import pytest

from soaklab.errors import InvalidInput
from soaklab.records import bisection
from soaklab.records.bisection import BAD, GOOD, SKIP

LINE = [f"c{i:02d}" + "0" * 38 for i in range(17)]  # good, 15 commits, bad


def _search(first_bad: int, skip: frozenset[int] = frozenset()) -> tuple[list[int], tuple[str, list[str]]]:
    """Run the search against a line whose commits from `first_bad` on do not reproduce the record;
    the indices tried, in order, and the answer."""
    verdicts = {LINE[0]: GOOD, LINE[-1]: BAD}
    tried = []
    while (index := bisection.next_index(bisection.bounds(LINE, verdicts))) is not None:
        tried.append(index)
        verdicts[LINE[index]] = SKIP if index in skip else BAD if index >= first_bad else GOOD
    return tried, bisection.answer(LINE, verdicts)


@pytest.mark.parametrize("first_bad", [1, 7, 8, 15, 16])
def test_the_search_halves_the_range_and_finds_the_first_bad_commit(first_bad):
    tried, (found, skipped) = _search(first_bad)
    assert found == LINE[first_bad] and skipped == []
    assert len(tried) <= bisection.bounds(LINE, {}).steps_left == 4  # 15 commits: ceil(log2 16)
    assert tried[0] == 8  # the middle of 0..16 first


def test_a_skipped_commit_moves_the_search_to_its_neighbour_and_an_unresolvable_range_is_named_whole():
    tried, (found, skipped) = _search(8, skip=frozenset({8}))
    assert tried[:2] == [8, 7] and found == LINE[9] and skipped == [LINE[8]]
    # whether the skipped commit or its neighbour is the first bad one cannot be told: both are named
    tried, (found, skipped) = _search(9, skip=frozenset({8}))
    assert found == LINE[9] and skipped == [LINE[8]] and 10 not in tried[:2]


def test_bounds_count_what_is_left():
    state = bisection.bounds(LINE, {LINE[0]: GOOD, LINE[-1]: BAD, LINE[4]: GOOD, LINE[12]: BAD, LINE[6]: SKIP})
    assert (state.good, state.bad, state.skipped) == (4, 12, (6,))
    assert state.untried == (5, 7, 8, 9, 10, 11) and state.steps_left == 3


def test_a_saved_state_resumes_and_another_bisections_is_refused(tmp_path):
    path = tmp_path / "state.json"
    state = bisection.load(path, "tiny", LINE[0], LINE[-1], LINE)
    assert state["steps"] == {}
    state["steps"][LINE[0]] = {"verdict": GOOD}
    state["steps"][LINE[8]] = {"verdict": BAD}
    bisection.save(path, state)
    again = bisection.load(path, "tiny", LINE[0], LINE[-1], LINE)
    assert bisection.verdicts_of(again) == {LINE[0]: GOOD, LINE[8]: BAD}
    assert bisection.next_index(bisection.bounds(LINE, bisection.verdicts_of(again))) == 4
    with pytest.raises(InvalidInput, match="not the state of this bisection"):
        bisection.load(path, "other", LINE[0], LINE[-1], LINE)
    path.write_text(json.dumps({**again, "steps": {LINE[3]: {"verdict": "maybe"}}}))
    with pytest.raises(InvalidInput, match=r"state\.json: not the state of this bisection"):
        bisection.load(path, "tiny", LINE[0], LINE[-1], LINE)
    path.write_text("{")
    with pytest.raises(InvalidInput, match="unreadable bisection state"):
        bisection.load(path, "tiny", LINE[0], LINE[-1], LINE)
