"""The tensor-runtime knob table and its exact-int rule (docs/settings-contract.md).

Every knob that shapes the learner/collector processes is checked here, on the
raw value the user wrote, before it is merged into the config: a bool, a
string, a float (even ``1.0``), zero or a negative number fails closed with an
error naming the key, the value and the valid range.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from soaklab.errors import SettingError

# torch generators take seeds up to 2**64 - 1; soaklab's contract is 0..2**63 - 1 (derived seeds,
# e.g. one per inference group, wrap around inside that range).
MAX_SEED = 2**63 - 1

# The only value training.cuda_process_sharing accepts besides null.
CUDA_PROCESS_SHARING_MODES = ("mps",)


@dataclass(frozen=True)
class RuntimeKnob:
    """One row of the settings table."""

    key: str
    default: int | None
    minimum: int
    # None: bounded by algo.num_envs instead of a constant (replay_ingress_slot_rows).
    maximum: int | None
    nullable: bool = False

    def bound(self, num_envs: int) -> int:
        return num_envs if self.maximum is None else self.maximum

    def range_text(self, num_envs: int | None) -> str:
        if self.maximum is None:
            hi = "algo.num_envs" if num_envs is None else f"algo.num_envs ({num_envs})"
        else:
            hi = str(self.maximum)
        text = f"an exact int in {self.minimum}..{hi}"
        return f"null (= algo.num_envs) or {text}" if self.nullable else text


KNOBS: tuple[RuntimeKnob, ...] = (
    RuntimeKnob("training.inference_slot_capacity", default=1, minimum=1, maximum=16),
    RuntimeKnob("training.collector_metrics_interval", default=1, minimum=1, maximum=10000),
    RuntimeKnob("training.replay_ingress_depth", default=2, minimum=1, maximum=16),
    RuntimeKnob("training.replay_ingress_slot_rows", default=None, minimum=1, maximum=None, nullable=True),
)
KNOBS_BY_KEY: dict[str, RuntimeKnob] = {k.key: k for k in KNOBS}

# Shape keys of the learner that follow the same exact-int rule; their upper
# bound is the memory budget, not a constant.
EXACT_INT_ALGO_KEYS = ("algo.num_envs", "algo.batch_size", "algo.updates_per_step")

CONTRACT_KEYS = frozenset([*KNOBS_BY_KEY, *EXACT_INT_ALGO_KEYS, "training.cuda_process_sharing"])


def is_exact_int(value: Any) -> bool:
    # bool is a subclass of int in Python; the contract rejects it explicitly.
    return isinstance(value, int) and not isinstance(value, bool)


def check_exact_int(key: str, value: Any, minimum: int = 1, maximum: int | None = None,
                    expected: str | None = None) -> int:
    """Return ``value`` if it is an exact int in [minimum, maximum], else raise."""
    if expected is None:
        expected = f"an exact int >= {minimum}" if maximum is None else f"an exact int in {minimum}..{maximum}"
    if not is_exact_int(value) or value < minimum or (maximum is not None and value > maximum):
        raise SettingError(key, value, f"must be {expected} (bool, str, float, zero and negatives are rejected)")
    return value


def check_cuda_process_sharing(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value in CUDA_PROCESS_SHARING_MODES):
        return value
    raise SettingError("training.cuda_process_sharing", value, "must be null or the string 'mps'")


def check_knob(knob: RuntimeKnob, value: Any, num_envs: int) -> None:
    """One runtime knob's configured value: null where it may be, else an exact int in its range."""
    if value is None and knob.nullable:
        return
    hi = knob.maximum if knob.maximum is not None else num_envs
    check_exact_int(knob.key, value, knob.minimum, hi, expected=knob.range_text(num_envs))


@dataclass(frozen=True)
class RuntimeLimit:
    """configured/default/effective/maximum of one knob, as run_config.json records it."""

    configured: int | None
    default: int | None
    effective: int
    maximum: int | None


@dataclass(frozen=True)
class RuntimeSettings:
    """What the settings contract decides beyond the config's own values: each bounded runtime knob
    as checked (configured, default, effective, maximum) and the learner's rows per sync. The values
    the config states (algo.num_envs, algo.batch_size, training.cuda_process_sharing, ...) have one
    holder, the run's typed config (contract.sections.RunConfig); a knob's effective value (`null`
    resolved against algo.num_envs) has one too, its limit here, which the properties read."""

    limits: Mapping[str, RuntimeLimit]

    def effective(self, key: str) -> int:
        value = self.limits[key].effective
        assert value is not None, f"{key}: every limit the contract sets has an effective value"
        return value

    @property
    def inference_slot_capacity(self) -> int:
        return self.effective("training.inference_slot_capacity")

    @property
    def collector_metrics_interval(self) -> int:
        return self.effective("training.collector_metrics_interval")

    @property
    def replay_ingress_depth(self) -> int:
        return self.effective("training.replay_ingress_depth")

    @property
    def replay_ingress_slot_rows(self) -> int:
        """Rows per ingress slot, effective (the config's `null` is algo.num_envs)."""
        return self.effective("training.replay_ingress_slot_rows")

    @property
    def learner_rows_per_sync(self) -> int:
        return self.effective("learner.rows_per_sync")

    def runtime_limits(self) -> dict[str, dict[str, int | None]]:
        return {key: vars(limit).copy() for key, limit in self.limits.items()}


def lookup(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = node[part]
    return node


def resolve_runtime_settings(config: Mapping[str, Any]) -> RuntimeSettings:
    """Check every contract key of a composed config (plain nested dict) and freeze it."""
    num_envs = check_exact_int("algo.num_envs", lookup(config, "algo.num_envs"))
    batch_size = check_exact_int("algo.batch_size", lookup(config, "algo.batch_size"))
    updates = check_exact_int("algo.updates_per_step", lookup(config, "algo.updates_per_step"))
    check_cuda_process_sharing(lookup(config, "training.cuda_process_sharing"))

    limits: dict[str, RuntimeLimit] = {}
    for knob in KNOBS:
        configured = lookup(config, knob.key)
        check_knob(knob, configured, num_envs)
        value = num_envs if configured is None else configured
        limits[knob.key] = RuntimeLimit(configured, knob.default, value, knob.bound(num_envs))
    limits["learner.rows_per_sync"] = RuntimeLimit(
        configured=None, default=None, effective=batch_size * updates, maximum=None
    )
    return RuntimeSettings(limits=limits)
