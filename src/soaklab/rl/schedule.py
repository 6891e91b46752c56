"""When the learner acts at random and when it updates: the update schedule of one run.

Update round `it` trains on the transitions up to vector step `it - UPDATE_LAG_VECTORS` (a lag of
one), so it runs while the collector steps the envs with the actions just answered; an n-step window
needs n vectors, so the first round waits for them as well as for `algo.learning_starts`. The
schedule is a pure function of the iteration: the same in every run, which keeps CPU runs bitwise
reproducible."""

from __future__ import annotations

from dataclasses import dataclass

UPDATE_LAG_VECTORS = 1


@dataclass(frozen=True)
class UpdateSchedule:
    learning_starts: int  # iterations of collection before the first update
    first_update: int  # the first iteration with an update round
    updates_per_step: int
    uniform_warmup: bool  # actions before learning_starts: uniform random, not the policy's
    hold_updates: bool = False  # benchmarks only: always answer with the policy, never update

    @classmethod
    def of(cls, learning_starts: int, updates_per_step: int, n_step: int, warmup_actions: str,
           hold_updates: bool = False) -> UpdateSchedule:
        return cls(learning_starts=learning_starts,
                   first_update=max(learning_starts, UPDATE_LAG_VECTORS + n_step - 1),
                   updates_per_step=updates_per_step, uniform_warmup=warmup_actions == "uniform",
                   hold_updates=hold_updates)

    def random_actions(self, it: int) -> bool:
        """Whether iteration `it` answers with uniform random actions instead of the policy."""
        return it < self.learning_starts and not self.hold_updates and self.uniform_warmup

    def updates(self, it: int) -> int:
        """Gradient updates in round `it` (0: no round)."""
        return self.updates_per_step if it >= self.first_update and not self.hold_updates else 0
