"""The meaningful range of every numeric algorithm, env, task and training setting (docs/settings-contract.md,
"Algorithm and task ranges").

The runtime contract bounds the runtime's knobs; these bound what the learner and the task compute
with: a discount of 1.5 or a control step of -1 s resolve to a run that cannot mean anything. They
are checked on the composed config (owner files and overrides alike) before anything is spawned;
whole-number settings keep their minimum in soaklab.config.keys.INT_MINIMUMS, checked here too.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from soaklab.config.keys import INT_MAXIMUMS, INT_MINIMUMS
from soaklab.contract.contract import CONTRACT_KEYS
from soaklab.errors import SettingError

INF = math.inf


@dataclass(frozen=True)
class Range:
    low: float = -INF
    high: float = INF
    low_open: bool = True
    high_open: bool = True

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    @property
    def text(self) -> str:
        def end(x: float) -> str:
            return "inf" if x == INF else "-inf" if x == -INF else f"{x:g}"

        return f"{'(' if self.low_open else '['}{end(self.low)}, {end(self.high)}{')' if self.high_open else ']'}"


POSITIVE = Range(0.0)
NON_NEGATIVE = Range(0.0, low_open=False)
FRACTION = Range(0.0, 1.0, low_open=False, high_open=False)  # [0, 1]
UNIT = Range(0.0, 1.0, high_open=False)  # (0, 1]
FINITE = Range()

# Keys (fnmatch patterns over dotted keys) and their ranges; the first match wins.
RANGES: dict[str, Range] = {
    "algo.gamma": UNIT,  # a discount: 1 sums undiscounted returns, 0 or less learns nothing
    "algo.tau": UNIT,  # the target networks' Polyak step: 1 copies, above 1 overshoots
    "algo.actor_lr": UNIT,
    "algo.critic_lr": UNIT,
    "algo.alpha_init": POSITIVE,  # the entropy temperature is learned in log space
    "algo.log_std_min": FINITE,  # below log_std_max (checked below)
    "algo.log_std_max": FINITE,
    "algo.v_min": FINITE,  # the categorical critic's support, below v_max (checked below)
    "algo.v_max": FINITE,
    "algo.noise_zeta_mu": POSITIVE,  # the zeta exponent of held-noise spans
    "env.episode_length_s": POSITIVE,
    "task.ctrl_dt": POSITIVE,
    "task.action_scale_factor": POSITIVE,
    "task.x_limit": POSITIVE,
    "task.reset_noise.*": NON_NEGATIVE,  # half-widths of uniform noise
    "task.rewards.*.std": POSITIVE,  # exp(-error / std^2) kernels
    "task.rewards.*.soft_ratio": UNIT,  # the share of the joint range before the limit penalty starts
    "task.rewards.*.weight": FINITE,  # either sign: penalties are negative
    "task.terminations.*": POSITIVE,
    "task.sampler_settings.adaptive_uniform_ratio": FRACTION,
    "task.sampler_settings.adaptive_alpha": UNIT,
    "task.sampler_settings.first_frame_ratio": FRACTION,
    "training.max_wall_minutes": POSITIVE,  # a budget of zero minutes trains nothing
}
# Pairs whose first must lie below the second.
ORDERED = (("algo.log_std_min", "algo.log_std_max"), ("algo.v_min", "algo.v_max"))
SECTIONS = ("algo", "env", "task", "training")


def numeric_leaves(config: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """Every number under the algo, env and task sections, by dotted key (booleans are not numbers)."""
    def walk(node: Any, prefix: str) -> Iterator[tuple[str, float]]:
        if isinstance(node, Mapping):
            for key, value in node.items():
                yield from walk(value, f"{prefix}.{key}")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            yield prefix, node

    for section in SECTIONS:
        yield from walk(config.get(section) or {}, section)


def range_of(key: str) -> Range | None:
    return next((r for pattern, r in RANGES.items() if fnmatch.fnmatchcase(key, pattern)), None)


def check_ranges(config: Mapping[str, Any]) -> None:
    """Refuse the first numeric setting outside its range, naming the key, the value and the range."""
    found = dict(numeric_leaves(config))
    for key, value in found.items():
        if key in CONTRACT_KEYS:
            continue  # the runtime contract checks its own
        if key in INT_MINIMUMS:
            low, high = INT_MINIMUMS[key], INT_MAXIMUMS.get(key)
            if value < low or (high is not None and value > high):
                raise SettingError(key, value, f"must be an integer in [{low}, {'inf' if high is None else high}]")
            continue
        valid = range_of(key)
        if valid is not None and not valid.holds(float(value)):
            raise SettingError(key, value, f"must be in {valid.text} (docs/settings-contract.md)")
    for low, high in ORDERED:
        if low in found and high in found and not found[low] < found[high]:
            raise SettingError(low, found[low], f"must be below {high}={found[high]}")
