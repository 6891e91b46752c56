"""How a learner's run ended (docs/runtime.md, "Shutdown"): the exception that ended it, classified
once (`classify`), and the record the run summary's `runtime_manifest.shutdown` holds. Every cleanup
step of the shutdown runs through `step`: its error is recorded, never raised over the original one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from soaklab.rl.cancel import Cancelled
from soaklab.rl.channels import PeerDied
from soaklab.rl.diverged import CLASSIFICATION as CLASSIFICATION_DIVERGED
from soaklab.rl.diverged import Diverged
from soaklab.rl.dp import RendezvousAborted
from soaklab.rl.finite import CLASSIFICATION as CLASSIFICATION_NON_FINITE
from soaklab.rl.finite import NonFinite
from soaklab.rl.ranks import RankGone

T = TypeVar("T")
# What ends a run early: the exceptions the learner classifies (anything else propagates).
ENDING = (Cancelled, Exception)


def classify(exc: BaseException, is_main: bool) -> tuple[str, str]:
    """The classification and owner of the exception that ended a rank's run."""
    if isinstance(exc, NonFinite):
        return CLASSIFICATION_NON_FINITE, "learner"
    if isinstance(exc, Diverged):
        return CLASSIFICATION_DIVERGED, "learner"
    if isinstance(exc, Cancelled):
        return "external_cancellation", "learner"
    if isinstance(exc, PeerDied):
        return "collector_failure", "collector"
    # Another rank's end: rank 0 adopts that rank's own classification once it has reported.
    if isinstance(exc, RankGone | RendezvousAborted):
        return ("external_cancellation" if not is_main else "unknown_failure"), "rank"
    return "learner_failure", "learner"


@dataclass
class Shutdown:
    classification: str = "unknown_failure"
    owner: str = "learner"
    phase: str = "startup"
    iteration: int = 0
    exception: dict[str, str] | None = None
    collector: dict[str, Any] = field(default_factory=lambda: {"pid": None, "alive": False, "exitcode": None,
                                                                "signal": None})
    cleanup_errors: list[str] = field(default_factory=list)
    cancellation: dict[str, str | None] | None = None  # the signal, and whether a safe point noticed it
    stop_reason: str | None = None  # a completed run: max_iterations or time_budget

    def failed(self, classification: str, owner: str, exc: BaseException) -> None:
        self.classification, self.owner = classification, owner
        self.exception = {"type": type(exc).__name__, "message": str(exc) or repr(exc)}

    def step(self, what: str, fn: Callable[[], T]) -> T | None:
        """One cleanup step: its result, or None with its error recorded."""
        try:
            return fn()
        except BaseException as exc:  # recorded, never raised over the original error
            self.cleanup_errors.append(f"{what}: {type(exc).__name__}: {exc}")
            return None

    def record(self) -> dict[str, Any]:
        return {"classification": self.classification, "stop_reason": self.stop_reason, "owner": self.owner,
                "phase": self.phase,
                "iteration": self.iteration, "exception": self.exception, "collector": self.collector,
                "cleanup": {"errors": list(self.cleanup_errors)}, "cancellation": self.cancellation}
