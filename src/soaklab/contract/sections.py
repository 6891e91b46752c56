"""A run's configuration as frozen, typed values: the one place that reads the composed config's
sections by key (docs/settings-contract.md, "Typed configuration").

Resolution composes the owner YAML and checks every value (soaklab.config, soaklab.contract.contract);
`RunConfig.of` then turns the checked mapping into these dataclasses once, and the runtime reads
attributes. A value derived later (a collector group's env count and seed, the clip a playback
tracks, the backend an evaluation runs on) is made with `dataclasses.replace`, where it is derived,
so a copy is never mutated. Lists become tuples (frozen all the way down); `as_dict` gives the
mapping back, in the record's JSON form, for what must be written or hashed.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from soaklab.catalogue import ALGORITHMS, choices, load

T = TypeVar("T")
MotionSpec = str | tuple[str, ...] | None  # a clip (name or path), a motion library, or the default


@dataclass(frozen=True)
class AlgoConfig:
    """`algo.*` as every agent reads it (src/soaklab/config/defaults/_shared/common.yaml says what each means)."""

    num_envs: int
    max_iterations: int
    batch_size: int
    updates_per_step: int
    replay_buffer_size: int
    learning_starts: int
    n_step: int
    obs_normalization: bool
    alpha_init: float
    log_std_min: float
    log_std_max: float
    warmup_actions: str
    gamma: float
    tau: float
    actor_lr: float
    critic_lr: float
    actor_hidden: int
    critic_hidden: int
    num_blocks: int
    compile: str
    save_interval: int
    seed: int


@dataclass(frozen=True)
class FlashSACConfig(AlgoConfig):
    """FlashSAC's own keys (src/soaklab/config/defaults/flashsac/config.yaml) beside the shared ones."""

    num_bins: int
    v_min: float
    v_max: float
    actor_update_interval: int
    noise_zeta_mu: float
    noise_zeta_max: int
    use_amp: bool


@dataclass(frozen=True)
class EnvConfig:
    seed: int
    num_threads: int | None
    episode_length_s: float
    motion: MotionSpec
    sampler: str
    collector_tensor_device: str | None  # derived by resolution (the carrier); None until then
    # Added after runs were first recorded: None is what those runs did (even blocks).
    motion_weights: tuple[float, ...] | None = None


@dataclass(frozen=True)
class TrainingConfig:
    device: str
    collector_tensor_device: str
    inference_slot_capacity: int
    collector_metrics_interval: int
    replay_ingress_depth: int
    replay_ingress_slot_rows: int | None
    cuda_process_sharing: str | None
    mps_learner_thread_percentage: int | None
    mps_collector_thread_percentage: int | None
    collector_stream_priority: str
    sim_backend: str | None
    log_dir: str | None
    dp_ranks: int | None
    dp_collector_cpu_ids: tuple[tuple[int, ...], ...] | None
    export_onnx: bool
    no_play: bool
    # Keys added since runs were first recorded carry the default that is what those runs did, so
    # a run dir recorded before them still reads (its policy evaluates, it resumes).
    max_wall_minutes: float | None = None
    loggers: tuple[str, ...] = ("tensorboard",)
    wandb_project: str = "soaklab"
    deterministic: bool = False  # docs/determinism.md




@dataclass(frozen=True)
class RunConfig:
    """The whole configuration of one run, and the names of its agent and task (the catalogue's:
    the env builder reads `task_name`; neither is part of the config mapping `as_dict` gives).
    `task` stays a mapping, a copy with the record's own values (read, never written): each task
    reads its own section into its own frozen config (TrackingConfig, SwingupConfig), the one place
    for those keys."""

    algo_name: str
    task_name: str
    algo: AlgoConfig
    env: EnvConfig
    training: TrainingConfig
    task: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, config: Mapping[str, Any], algo: str, task: str) -> RunConfig:
        """From a composed (or recorded) config of the agent `algo` on `task`."""
        return cls(algo, task, algo_config(algo, config["algo"]), section(EnvConfig, config["env"], "env"),
                   section(TrainingConfig, config["training"], "training"), copy.deepcopy(dict(config.get("task", {}))))

    def as_dict(self) -> dict[str, Any]:
        """The config mapping back, with lists where the record has lists."""
        return {"algo": _plain(dataclasses.asdict(self.algo)), "env": _plain(dataclasses.asdict(self.env)),
                "training": _plain(dataclasses.asdict(self.training)), "task": copy.deepcopy(dict(self.task))}


def algo_config(algo: str, values: Mapping[str, Any]) -> AlgoConfig:
    """The `algo` section of agent `algo` as its typed config (the catalogue names the class)."""
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algo {algo!r}; expected one of {choices(ALGORITHMS)}")
    return section(load(ALGORITHMS[algo].config), values, "algo")


def section(kind: type[T], values: Mapping[str, Any], name: str) -> T:
    """`values` as a `kind`, each value converted to its field's type: exactly the fields, no more,
    no fewer (a key the dataclass lacks is a programming error here: resolution has checked the set)."""
    hints = typing.get_type_hints(kind)
    names = [f.name for f in fields(kind)]  # type: ignore[arg-type]
    later = {f.name for f in fields(kind) if f.default is not dataclasses.MISSING}  # type: ignore[arg-type]
    missing, extra = sorted(set(names) - set(values) - later), sorted(set(values) - set(names))
    if missing or extra:
        raise ValueError(f"{name}: {kind.__name__} expects exactly its fields; missing {missing}, unknown {extra}")
    return kind(**{n: _convert(hints[n], values[n]) for n in names if n in values})


def _convert(hint: Any, value: Any) -> Any:
    wants_float = hint is float or float in typing.get_args(hint)
    if wants_float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # YAML writes 1.0 as 1 when a user types it so
    return _frozen(value)


def _frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, Mapping):
        return {k: _frozen(v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
