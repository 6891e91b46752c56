"""How a learner's run ended (soaklab.rl.shutdown): the exception that ended it classified once, the
same on every rank but for another rank's end, and each cleanup step's error recorded without
stopping the steps after it."""

from __future__ import annotations

import pytest

from soaklab.rl.cancel import Cancelled
from soaklab.rl.channels import PeerDied
from soaklab.rl.diverged import Diverged
from soaklab.rl.dp import RendezvousAborted
from soaklab.rl.finite import NonFinite
from soaklab.rl.ranks import RankGone
from soaklab.rl.shutdown import ENDING, Shutdown, classify


@pytest.mark.parametrize(("exc", "main", "expected"), [
    (NonFinite(3, "reward", "tracking"), True, ("non_finite", "learner")),
    (Diverged(3, "loss_exploded", "x"), True, ("diverged", "learner")),
    (Cancelled(15), True, ("external_cancellation", "learner")),
    (PeerDied(), False, ("collector_failure", "collector")),
    (RankGone("rank 1 exited"), True, ("unknown_failure", "rank")),  # rank 0 adopts the rank's own cause
    (RankGone("rank 0 exited"), False, ("external_cancellation", "rank")),
    (RendezvousAborted("stop"), False, ("external_cancellation", "rank")),
    (IndexError("3"), True, ("learner_failure", "learner")),
])
def test_each_ending_is_classified(exc, main, expected):
    assert isinstance(exc, ENDING)
    assert classify(exc, main) == expected


def test_an_interrupt_is_not_an_ending_the_learner_classifies():
    assert not isinstance(KeyboardInterrupt(), ENDING) and not isinstance(SystemExit(1), ENDING)


def test_a_failed_cleanup_step_is_recorded_and_the_next_one_runs():
    shutdown = Shutdown()
    assert shutdown.step("close logger", lambda: 1 / 0) is None
    assert shutdown.step("segments", lambda: [1]) == [1]
    shutdown.failed("learner_failure", "learner", ValueError(""))
    record = shutdown.record()
    assert record["cleanup"]["errors"] == ["close logger: ZeroDivisionError: division by zero"]
    assert record["exception"] == {"type": "ValueError", "message": "ValueError('')"}
    assert (record["classification"], record["owner"]) == ("learner_failure", "learner")
