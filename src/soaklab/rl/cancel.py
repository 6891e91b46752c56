"""Cancelling a training run by signal (SIGTERM, SIGINT, SIGHUP): noticed at a safe point, forced
only when none comes.

A handler that raises lands its exception on whatever bytecode the main thread is running, inside
`queue.Queue.put` between a lock and its notify as readily as anywhere: that once lost the scalar
writer's wake-up and the shutdown then joined the thread forever (about one SIGINT-cancelled run in
seventy). So the first signal only records itself; the learner raises `Cancelled` at its next safe
point (every wait on the collector polls one, every iteration starts with one). A learner that
reaches none within FORCE_AFTER_S (a hang, a long compile) is cancelled where it is, as a second
signal cancels it at once.
"""

from __future__ import annotations

import signal
from typing import Any

from soaklab.host.lifetime import CANCEL_SIGNALS

FORCE_AFTER_S = 2.0


class Cancelled(BaseException):
    """SIGTERM, SIGINT or SIGHUP reached the learner."""


class Cancellation:
    """The signal handlers of one run (installed from the main thread) and what became of the signal."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.noticed: str | None = None  # "safe point" or "forced"
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
        """A safe point: raise Cancelled if a signal came."""
        if self.signal is not None and self.noticed is None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.noticed = "safe point"
            raise Cancelled(self.signal)

    def record(self) -> dict[str, str | None] | None:
        return None if self.signal is None else {"signal": self.signal, "noticed": self.noticed}

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal is None:
            self.signal = signal.Signals(signum).name
            signal.setitimer(signal.ITIMER_REAL, FORCE_AFTER_S)
            return
        self._force()  # a second signal: its sender insists

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self.signal is not None and self.noticed is None:
            self._force()

    def _force(self) -> None:
        if self.noticed is None:
            self.noticed = "forced"
            raise Cancelled(self.signal)
