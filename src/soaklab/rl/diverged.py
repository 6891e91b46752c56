"""Runs whose physics or learner diverged end `diverged`, naming what (docs/runtime.md, "Diverged runs").

A NaN is one way a run diverges (soaklab.rl.finite). The physics can also blow up while every number
stays finite. MuJoCo then warns "The simulation is unstable", resets that env to the model's default
pose on its own, and the episode goes on from there. Or a reset lands in a state that falls over at
once. Either way the run would end `completed` and its soak `passed`, with episodes that last a step
or two, or that all start from the wrong pose. This module watches for both, per logged iteration:
- `physics_unstable`: the simulator's instability resets exceed UNSTABLE_SHARE of the episodes
  started so far (the first resets included). So an instability on most resets fails the run. An
  occasional blow-up in a long run does not; it is counted all the same, per iteration, in the
  Physics/unstable_env_steps series.
- `collapsed_episodes`: of the last episodes that ended (the learner's window of them, once full),
  more than COLLAPSED_SHARE lasted COLLAPSED_STEPS control steps or fewer. An untrained G1 policy
  keeps its first episodes at about 7 to 11 steps; a cart-pole episode runs to its time limit.
- `loss_exploded`: a loss series (Loss/<name>) reaches more than 10^LOSS_ORDERS times its own
  reference, the median |value| of its first LOSS_REFERENCE logged values (the first updates'). A
  learner whose learning rates are too high stays finite for a long while as it blows up: cart-pole
  SAC at both rates 1.0 reaches a critic loss of 1e27 within 111 iterations. The losses are read
  with the logged rows (one device read per flush), so the rule costs no synchronisation of its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

CLASSIFICATION = "diverged"
UNSTABLE_TAG = "Physics/unstable_env_steps"  # per iteration: envs the simulator reset as unstable
ENDED_TAGS = ("Train/episodes/terminated", "Train/episodes/truncated")  # per-env shares of an iteration
UNSTABLE_SHARE = 0.5
COLLAPSED_STEPS = 2
COLLAPSED_SHARE = 0.5
LOSS_PREFIX = "Loss/"  # optimised losses only; Agent/ holds the temperature, Q level and reward scale
LOSS_REFERENCE = 10  # logged values of a series whose median |value| is its reference
LOSS_ORDERS = 6  # healthy runs stay within 10^{measured} of their reference (docs/runtime.md)


class Diverged(Exception):
    def __init__(self, iteration: int, what: str, detail: str) -> None:
        self.iteration, self.what = iteration, what
        super().__init__(f"{what} at iteration {iteration}: {detail}")


class DivergenceWatch:
    """Fed each logged iteration's scalars; raises Diverged at the first iteration a rule holds."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.unstable = 0
        self.started = float(num_envs)  # every env's first reset starts an episode
        self.loss_early: dict[str, list[float]] = {}  # each series' first LOSS_REFERENCE |values|
        self.loss_reference: dict[str, float] = {}  # their median, once there are that many

    def observe(self, iteration: int, values: Mapping[str, float | None]) -> None:
        self.unstable += int(values.get(UNSTABLE_TAG) or 0)
        self.started += sum(float(values.get(tag) or 0.0) for tag in ENDED_TAGS) * self.num_envs
        if self.unstable > UNSTABLE_SHARE * self.started:
            raise Diverged(iteration, "physics_unstable",
                           f"the simulator reset envs as unstable {self.unstable} times in {self.started:.0f} "
                           "episodes; check the reset noise and the clip's velocities")
        self._check_losses(iteration, values)

    def _check_losses(self, iteration: int, values: Mapping[str, float | None]) -> None:
        for tag, value in values.items():
            if not tag.startswith(LOSS_PREFIX) or value is None:
                continue
            reference = self.loss_reference.get(tag)
            if reference is None:
                early = self.loss_early.setdefault(tag, [])
                early.append(abs(value))
                if len(early) == LOSS_REFERENCE:
                    self.loss_reference[tag] = statistics.median(early)
                continue
            # A reference of 0 (a loss exactly zero through its first updates) has no scale to grow from.
            if reference > 0 and abs(value) > 10.0 ** LOSS_ORDERS * reference:
                raise Diverged(iteration, "loss_exploded",
                               f"{tag} = {value:.4g}, over 10^{LOSS_ORDERS} times its reference {reference:.4g} "
                               f"(the median |value| of its first {LOSS_REFERENCE} logged updates); check the "
                               "learning rates (algo.actor_lr, algo.critic_lr)")

    def check_episodes(self, iteration: int, lengths: Sequence[int], window: int) -> None:
        """`lengths`: the learner's last `window` finished episode lengths, in control steps."""
        if len(lengths) < window:
            return
        collapsed = sum(1 for n in lengths if n <= COLLAPSED_STEPS)
        if collapsed > COLLAPSED_SHARE * len(lengths):
            raise Diverged(iteration, "collapsed_episodes",
                           f"{collapsed} of the last {len(lengths)} episodes ended within {COLLAPSED_STEPS} steps "
                           f"of their reset (the simulator reset envs as unstable {self.unstable} times so far); "
                           "check the reset noise and the clip")
