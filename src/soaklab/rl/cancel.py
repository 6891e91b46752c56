"""Cancelling a training run by signal (SIGTERM, SIGINT, SIGHUP): noticed at a safe point, forced
only when none comes.

A handler that raises lands its exception on whatever bytecode the main thread is running, inside
`queue.Queue.put` between a lock and its notify as readily as anywhere: that once lost the scalar
writer's wake-up and the shutdown then joined the thread forever (about one SIGINT-cancelled run in
seventy). So the first signal only records itself; the learner raises `Cancelled` at its next safe
point (every wait on the collector polls one, every iteration starts with one). A learner that
reaches none within FORCE_AFTER_S (a hang, a long compile) is cancelled where it is, as a second
signal cancels it at once.

A run that can resume (soaklab.rl.resume) does more with the signal: it finishes the iteration it is
in, writes a resumable checkpoint and only then ends (`finish_first`), so a preempted job loses no
work and can be requeued (soaklab.errors.REQUEUE_EXIT). The waits inside an iteration then do not
raise; the next iteration's start is the one safe point, and the whole of it, checkpoint included,
must end within FINISH_AFTER_S, else the run is cancelled where it is and the checkpoint before stands.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from soaklab.host.lifetime import CANCEL_SIGNALS

FORCE_AFTER_S = 2.0
# Inside the soak monitor's 15 s between SIGTERM and SIGKILL, and Slurm's default KillWait of 30 s.
FINISH_AFTER_S = 12.0
# A scheduler that ends a job signals every process in it (Slurm's requeue, scancel), and the soak
# monitor, signalled too, passes its own on: one cancellation arriving twice. In deferred mode a
# repeat this soon does not insist; a later one does.
SAME_CANCELLATION_S = FORCE_AFTER_S


class Cancelled(BaseException):
    """SIGTERM, SIGINT or SIGHUP reached the learner."""


class Cancellation:
    """The signal handlers of one run (installed from the main thread) and what became of the signal."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.noticed: str | None = None  # "safe point" or "forced"
        self.deferred = False  # finish_first: the waits inside an iteration do not raise
        self.finishing = False  # a signal came and the iteration in flight is being finished
        self.checkpoint: int | None = None  # the resumable checkpoint written before the run ended
        self._first_at = 0.0  # time.monotonic() of the first signal
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        self._previous = {s: signal.signal(s, self._on_signal) for s in CANCEL_SIGNALS}
        self._previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._on_alarm)

    def ignore(self) -> None:
        """For the shutdown, which a second signal must not interrupt."""
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s in self._previous:
            signal.signal(s, signal.SIG_IGN)

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def check(self) -> None:
        """A safe point: raise Cancelled if a signal came (not while an iteration is being finished,
        nor inside one of a run that finishes its iteration first)."""
        if self.signal is not None and self.noticed is None and not self.deferred:
            self.end()

    def defer(self) -> None:
        """From now on a signal is noticed only at an iteration's start (finish_first)."""
        self.deferred = True

    def finish_first(self) -> bool:
        """An iteration's start in deferred mode: True if a signal came; the caller finishes this
        iteration, checkpoints and calls end(), within FINISH_AFTER_S of the signal."""
        if self.signal is None or self.noticed is not None or self.finishing:
            return False
        self.finishing = True  # the alarm set at the signal bounds the rest
        return True

    def end(self, checkpoint: int | None = None) -> None:
        """Raise Cancelled for the signal that came, at a safe point; `checkpoint`: the resumable
        checkpoint written for it."""
        assert self.signal is not None
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.noticed = "safe point"
        self.checkpoint = checkpoint
        raise Cancelled(self.signal)

    def record(self) -> dict[str, Any] | None:
        return None if self.signal is None else {"signal": self.signal, "noticed": self.noticed,
                                                 "resumable_checkpoint": self.checkpoint}

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal is None:
            self.signal = signal.Signals(signum).name
            self._first_at = time.monotonic()
            # Deferred: the iteration in flight, the next one and its checkpoint get the time.
            signal.setitimer(signal.ITIMER_REAL, FINISH_AFTER_S if self.deferred else FORCE_AFTER_S)
            return
        if self.deferred and time.monotonic() - self._first_at < SAME_CANCELLATION_S:
            return  # the same cancellation by a second path (SAME_CANCELLATION_S)
        self._force()  # a second signal: its sender insists

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self.signal is not None and self.noticed is None:
            self._force()

    def _force(self) -> None:
        if self.noticed is None:
            self.noticed = "forced"
            raise Cancelled(self.signal)
