"""Cancellation by a real signal to this process: the first one is raised at the next safe point,
or where the learner is once FORCE_AFTER_S passes without one; a second one at once. A run that can
resume defers it to the next iteration's start, finishes that iteration and checkpoints first."""

from __future__ import annotations

import os
import signal
import time

import pytest

from soaklab.rl.cancel import FINISH_AFTER_S, FORCE_AFTER_S, SAME_CANCELLATION_S, Cancellation, Cancelled


@pytest.fixture
def cancellation():
    c = Cancellation()
    c.install()
    yield c
    c.ignore()
    c.restore()


def test_the_first_signal_waits_for_a_safe_point(cancellation):
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before kill returns to Python
    assert cancellation.signal == "SIGTERM" and cancellation.noticed is None  # nothing raised yet
    with pytest.raises(Cancelled, match="SIGTERM"):
        cancellation.check()
    assert cancellation.record() == {"signal": "SIGTERM", "noticed": "safe point", "resumable_checkpoint": None}
    cancellation.check()  # once only: the shutdown that follows is not interrupted


def test_no_safe_point_within_the_grace_is_forced_where_the_learner_is(cancellation):
    os.kill(os.getpid(), signal.SIGHUP)
    with pytest.raises(Cancelled, match="SIGHUP"):
        for _ in range(int(FORCE_AFTER_S * 100)):  # a hung learner: it never reaches a safe point
            time.sleep(0.1)
    assert cancellation.record() == {"signal": "SIGHUP", "noticed": "forced", "resumable_checkpoint": None}


def test_a_second_signal_cancels_at_once(cancellation):
    os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(Cancelled, match="SIGINT"):
        os.kill(os.getpid(), signal.SIGINT)
    assert cancellation.noticed == "forced"


def test_without_a_signal_a_safe_point_passes(cancellation):
    cancellation.check()
    assert cancellation.record() is None


def test_a_deferred_signal_lets_the_iteration_finish_and_names_its_checkpoint(cancellation):
    cancellation.defer()
    os.kill(os.getpid(), signal.SIGTERM)
    cancellation.check()  # a wait inside the iteration: nothing raised
    assert cancellation.finish_first()  # the next iteration's start: finish it, then checkpoint
    assert not cancellation.finish_first()  # noticed once
    cancellation.check()
    with pytest.raises(Cancelled, match="SIGTERM"):
        cancellation.end(checkpoint=35)
    assert cancellation.record() == {"signal": "SIGTERM", "noticed": "safe point", "resumable_checkpoint": 35}


def test_a_deferred_signal_whose_iteration_never_ends_is_forced(cancellation):
    cancellation.defer()
    os.kill(os.getpid(), signal.SIGTERM)
    assert cancellation.finish_first()
    with pytest.raises(Cancelled, match="SIGTERM"):
        for _ in range(int(FINISH_AFTER_S * 100)):  # an iteration or a checkpoint that hangs
            time.sleep(0.1)
    assert cancellation.record() == {"signal": "SIGTERM", "noticed": "forced", "resumable_checkpoint": None}


def test_a_deferred_signal_that_comes_twice_at_once_is_one_cancellation(cancellation):
    """Slurm signals every process of a job, and the soak monitor passes its own signal on: the
    trainer gets SIGTERM twice, and still finishes its iteration. A repeat later insists."""
    cancellation.defer()
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)
    assert cancellation.noticed is None and cancellation.finish_first()
    time.sleep(SAME_CANCELLATION_S + 0.1)
    with pytest.raises(Cancelled, match="SIGTERM"):
        os.kill(os.getpid(), signal.SIGTERM)
    assert cancellation.noticed == "forced"
