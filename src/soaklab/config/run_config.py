"""A resolved run and its record, run_config.json (docs/settings-contract.md, "Resolution").

Resolution order: contract knobs -> devices -> layout -> memory budget. Every check runs before
anything is written, so a refusal leaves no file behind. Callers go through soaklab.config.resolve.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from soaklab.assets.record import assets_record, resolved_motion, scene_for_env
from soaklab.catalogue import TASKS, load, reference_error, run_reference_error, tracking_tasks
from soaklab.config.compose import ComposedConfig
from soaklab.config.determinism import check_deterministic
from soaklab.contract.budget import MemoryBudget, check_memory_budget, compute_memory_budget
from soaklab.contract.contract import RuntimeSettings, check_exact_int, resolve_runtime_settings
from soaklab.contract.devices import HostCapabilities, ResolvedDevices, resolve_devices
from soaklab.contract.layout import Layout, TaskSpaces, runtime_layout
from soaklab.contract.ranks import RankPlan, resolve_ranks
from soaklab.contract.sections import RunConfig
from soaklab.errors import InvalidInput, SettingError
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import usable_cpus
from soaklab.schemas import validate_artifact
from soaklab.tasks.metrics import clip_labels, collector_metrics
from soaklab.tasks.spaces import task_spaces

RUN_CONFIG_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ResolvedRun:
    """Everything resolution decided; `record()` is the run_config.json payload."""

    composed: ComposedConfig
    settings: RuntimeSettings
    devices: ResolvedDevices
    budget: MemoryBudget
    host: HostCapabilities
    assets: dict[str, Any] | None
    layout: Layout
    # How this process came by it: "resolved on this host (...)" or "loaded from PATH (...)"; each
    # process prints it once it starts, so a log shows where resolution ran.
    origin: str = "resolved"
    # The CUDA MPS daemon a trainer selected (soaklab.mps.client.MpsSelection), when it asked for one.
    mps: Any = None
    # Data-parallel ranks (one unless the learner is plain `cuda` on several visible GPUs, or dp_ranks).
    ranks: RankPlan = RankPlan()

    @property
    def spaces(self) -> TaskSpaces:
        return self.layout.spaces

    @cached_property
    def run(self) -> RunConfig:
        """The run's configuration as typed values, derived fields included; built once, and what the
        runtime reads (a later derivation is a `replace` of it, never an edit)."""
        return RunConfig.of(self.config, self.composed.algo, self.composed.task)

    @property
    def collector_metrics(self) -> tuple[str, ...]:
        return collector_metrics(self.composed.task, clip_labels(self.run.env.motion))

    @property
    def scene(self) -> str | dict[str, str] | None:
        """The scene the run's envs load (scene_for_env)."""
        return scene_for_env(self.assets, self.run.env.motion)

    @cached_property
    def config(self) -> dict[str, Any]:
        """The composed config with the resolved carrier written to env.collector_tensor_device and
        the motion resolved to paths: derived once (a frozen run, so the copy never goes stale), read
        by `run`, `record()` and the load check, never written."""
        cfg = json.loads(json.dumps(self.composed.config))
        cfg["env"]["collector_tensor_device"] = self.devices.carrier
        if self.assets:
            cfg["env"]["motion"] = resolved_motion(self.assets, cfg["env"]["motion"])
        return cfg

    def record(self) -> dict[str, Any]:
        config = self.config
        return {
            "schema_version": RUN_CONFIG_SCHEMA_VERSION,
            "algo": self.composed.algo,
            "task": self.composed.task,
            "sim": self.composed.sim,
            "owner_files": list(self.composed.owner_files),
            "overrides": {o.key: o.value for o in self.composed.overrides},
            "config": config,
            "config_hash": config_hash(config),
            "run": {
                "resolved_devices": self.devices.as_record(),
                "runtime_limits": self.settings.runtime_limits(),
                "memory_budget": self.budget.as_record(),
                "host": self.host.as_record(),
                "assets": self.assets,
                "data_parallel": self.ranks.as_record(),
            },
        }


def config_hash(config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def resolve_run_config(
    composed: ComposedConfig,
    host: HostCapabilities,
    allow_cuda_learner_cpu_carrier: bool = False,
    manifest_path: Path | None = None,
) -> ResolvedRun:
    settings = resolve_runtime_settings(composed.config)
    devices = resolve_devices(
        composed.get("training.device"),
        composed.get("training.collector_tensor_device"),
        composed.get("training.sim_backend"),
        composed.get("training.cuda_process_sharing"),  # checked by the contract above
        host,
        allow_cuda_learner_cpu_carrier,
    )
    ranks = ranks_of(composed.config, devices, host)
    budget_minutes = composed.get("training.max_wall_minutes")
    if budget_minutes is not None and ranks.parallel:
        # Every rank would have to stop at the same iteration, and their clocks do not agree.
        raise SettingError("training.max_wall_minutes", budget_minutes,
                           f"is for one-rank runs for now (this one has {ranks.world_size}); "
                           "bound a data-parallel run with algo.max_iterations")
    check_deterministic(composed, ranks)
    replay = check_exact_int("algo.replay_buffer_size", composed.get("algo.replay_buffer_size"))
    assets = assets_record(manifest_path)
    if error := run_reference_error(composed.algo, composed.task, composed.sim):
        raise InvalidInput(error)  # here, not in a spawned collector or learner after the run dir exists
    check_task(composed, assets)
    layout = layout_of(settings, composed.get("algo.num_envs"), composed.task, composed.get("env.motion"))
    check_replay_holds_a_step(replay, layout)
    budget = compute_memory_budget(settings, replay, layout, devices, host)
    check_memory_budget(budget)
    return ResolvedRun(composed, settings, devices, budget, host, assets, layout, ranks=ranks)


def check_replay_holds_a_step(replay: int, layout: Layout) -> None:
    """The replay ring takes in one vector step at a time (layout.num_envs rows: every inference
    group's envs; each data-parallel rank has its own ring of this size and its own envs), and its
    n-step windows walk that stream env by env: a ring smaller than one step cannot hold it (the
    learner's copy would fail with a broadcast error at its first ingress)."""
    if replay < layout.num_envs:
        raise SettingError("algo.replay_buffer_size", replay,
                           f"is smaller than one vector step: the replay takes in algo.num_envs={layout.num_envs} "
                           f"rows a step (each rank its own); the minimum is {layout.num_envs}")


def ranks_of(config: dict[str, Any], devices: ResolvedDevices, host: HostCapabilities) -> RankPlan:
    """The data-parallel plan: GPUs from the host's visible count, cores from this process's affinity."""
    training = config["training"]
    return resolve_ranks(training.get("dp_ranks"), training.get("dp_collector_cpu_ids"), training["device"],
                         devices.learner, host.cuda_device_count, training.get("cuda_process_sharing"),
                         host.cpu_ids or usable_cpus())


def layout_of(settings: RuntimeSettings, num_envs: int, task: str, motion: Any = None) -> Layout:
    """The runtime's shapes for `num_envs` envs of `task` under `settings` (and env.motion: a library
    reports each clip too): derived here once, read by every part."""
    return runtime_layout(settings, num_envs, task_spaces(task),
                          len(collector_metrics(task, clip_labels(motion))))


def check_task(composed: ComposedConfig, assets: dict[str, Any] | None) -> None:
    """What a task's capabilities allow of the generic motion keys, then the task's own checks (its
    catalogue entry's `resolve`, given plain values): no resolution code names a task."""
    task = TASKS[composed.task]
    motion, weights = composed.get("env.motion"), composed.get("env.motion_weights")
    if not isinstance(motion, list) and weights is not None:
        raise SettingError("env.motion_weights", weights, "weighs a motion library's clips: "
                           "give env.motion as a list, or leave env.motion_weights null")
    if isinstance(motion, list) and not task.tracking:
        raise SettingError("env.motion", motion, f"a motion library needs a tracking task "
                           f"({', '.join(tracking_tasks())}), not {composed.task}")
    if task.resolve is None:
        return
    where = f"task {task.name}: its resolve check {task.resolve}"
    if reason := reference_error(task.resolve, "resolve"):
        raise InvalidInput(f"{where} {reason}; fix or uninstall the plug-in that declares it")
    try:  # copies: a check can refuse, never edit what is recorded
        load(task.resolve)(copy.deepcopy(composed.config), copy.deepcopy(assets))
    except (InvalidInput, KeyboardInterrupt):
        raise
    except BaseException as exc:  # the task's own code: a sys.exit is a failure too, never the command's end
        verb = "exited" if isinstance(exc, SystemExit) else "failed"
        raise InvalidInput(f"{where} {verb} ({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}); "
                           "fix or uninstall the plug-in that declares it") from None


def write_run_config(resolved: ResolvedRun, out: Path) -> dict[str, Any]:
    _ = resolved.run  # the typed config is built before anything is written: a record this build reads
    record = resolved.record()
    validate_artifact("run_config", record)
    write_json_atomic(out, record)
    return record


def recorded_run(source: Path | str, record: dict[str, Any]) -> RunConfig:
    """A recorded run_config.json's config as typed values (`source`: where it was read, for the
    error); a record this build cannot read whole is bad input, named in one line."""
    try:
        return RunConfig.of(record["config"], record["algo"], record["task"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"{source}: its config does not fit this soaklab ({exc}); "
                           "a run resolved by another version? train it again") from None
