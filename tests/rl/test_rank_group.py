"""Rank 0's reading of how the other ranks ended: the first rank that failed on its own is the cause."""

from __future__ import annotations

from types import SimpleNamespace

from soaklab.rl.rank_group import first_failure


def report(classification: str, owner: str = "learner", exception: dict | None = None) -> dict:
    return {"shutdown": {"classification": classification, "owner": owner, "exception": exception}}


def test_the_first_rank_that_failed_on_its_own_is_the_cause(capsys):
    peers = [SimpleNamespace(exitcode=0), SimpleNamespace(exitcode=1), SimpleNamespace(exitcode=0)]
    boom = {"type": "RuntimeError", "message": "boom"}
    reports = [report("external_cancellation"), report("collector_failure", "collector", boom), None]
    assert first_failure(reports, peers, "learner_failure") == ("collector_failure", "rank 2 collector", boom)
    assert "rank 2 collector: RuntimeError: boom" in capsys.readouterr().err


def test_a_rank_without_a_report_died_and_rank_0s_own_cause_stands_when_it_has_one():
    peers = [SimpleNamespace(exitcode=-9)]
    assert first_failure([None], peers, "normal_completion")[:2] == ("learner_failure", "rank 1 learner")
    assert first_failure([None], peers, "external_cancellation") is None  # rank 0 was cancelled itself
    assert first_failure([report("normal_completion")], peers, "learner_failure") is None
