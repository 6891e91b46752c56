"""A resolved run and its record, run_config.json (docs/settings-contract.md, "Resolution").

Resolution order: contract knobs -> devices -> layout -> memory budget. Every check runs before
anything is written, so a refusal leaves no file behind. Callers go through soaklab.config.resolve.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from soaklab.catalogue import TASKS, tracking_tasks
from soaklab.config.compose import ComposedConfig
from soaklab.contract.budget import MemoryBudget, check_memory_budget, compute_memory_budget
from soaklab.contract.contract import RuntimeSettings, check_exact_int, resolve_runtime_settings
from soaklab.contract.devices import HostCapabilities, ResolvedDevices, resolve_devices
from soaklab.contract.layout import Layout, TaskSpaces, block_sizes, runtime_layout
from soaklab.contract.ranks import RankPlan, resolve_ranks
from soaklab.contract.sections import MotionSpec, RunConfig
from soaklab.errors import InvalidInput, SettingError
from soaklab.files.jsonfiles import loads_checked, write_json_atomic
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
        return RunConfig.of(self.config, self.composed.algo)

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
            # null = the manifest's default clip; a clip name of the manifest = that clip; else a path.
            motion = cfg["env"]["motion"]
            clips = self.assets.get("motions", {})
            if isinstance(motion, list):  # a motion library: each clip resolved alike
                cfg["env"]["motion"] = [clips.get(m, m) for m in motion]
            else:
                cfg["env"]["motion"] = self.assets["motion"] if motion is None else clips.get(motion, motion)
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


def assets_record(manifest_path: Path | None) -> dict[str, Any] | None:
    """Where the scene and motion of an asset manifest lie, and the manifest's hash."""
    if manifest_path is None:
        return None
    try:
        raw = manifest_path.read_bytes()
        manifest = loads_checked(raw, str(manifest_path))
        return {
            "manifest": str(manifest_path),
            "manifest_sha256": hashlib.sha256(raw).hexdigest(),
            "scene": manifest["scene"]["path"],
            "motion": manifest["motion"]["path"],
            "motions": {name: clip["path"] for name, clip in manifest.get("motions", {}).items()},
            # Clip path -> its own scene, for clips that bring one (a terrain): runs tracking them load it.
            "scenes": {clip["path"]: clip["scene"]["path"] for clip in manifest.get("motions", {}).values()
                       if "scene" in clip},
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(
            f"{manifest_path}: not a readable asset manifest ({exc}); run `soaklab assets pull`"
        ) from None


def scene_of(assets: dict[str, Any] | None, motion: str | None) -> str | None:
    """The scene a run tracking the clip at `motion` loads (an assets record, as run_config.json
    keeps it): that clip's own scene if it brings one (its terrain), else the manifest's scene."""
    if not assets:
        return None
    return assets.get("scenes", {}).get(motion, assets["scene"])


def scene_for_env(assets: dict[str, Any] | None, motion: MotionSpec | list[str]) -> str | dict[str, str] | None:
    """What make_env takes as `scene`: one clip's scene, or each clip path's scene (a motion library)."""
    if isinstance(motion, list | tuple):
        return {m: s for m in motion if (s := scene_of(assets, m)) is not None} if assets else None
    return scene_of(assets, motion)


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
    replay = check_exact_int("algo.replay_buffer_size", composed.get("algo.replay_buffer_size"))
    check_motion_library(composed)
    layout = layout_of(settings, composed.get("algo.num_envs"), composed.task, composed.get("env.motion"))
    check_replay_holds_a_step(replay, layout)
    budget = compute_memory_budget(settings, replay, layout, devices, host)
    check_memory_budget(budget)
    resolved = ResolvedRun(composed, settings, devices, budget, host, assets_record(manifest_path), layout, ranks=ranks)
    check_asset_files(resolved)
    return resolved


def check_replay_holds_a_step(replay: int, layout: Layout) -> None:
    """The replay ring takes in one vector step at a time (layout.num_envs rows: every inference
    group's envs; each data-parallel rank has its own ring of this size and its own envs), and its
    n-step windows walk that stream env by env: a ring smaller than one step cannot hold it (the
    learner's copy would fail with a broadcast error at its first ingress)."""
    if replay < layout.num_envs:
        raise SettingError("algo.replay_buffer_size", replay,
                           f"is smaller than one vector step: the replay takes in algo.num_envs={layout.num_envs} "
                           f"rows a step (each rank its own); the minimum is {layout.num_envs}")


def _unreadable(path: Path) -> str | None:
    """Why `path` cannot serve as an input file here, or None."""
    if not path.exists():
        return f"does not exist (looked for from {Path.cwd()})"
    if not path.is_file():
        return "is not a regular file"
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return None


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def check_asset_files(resolved: ResolvedRun) -> None:
    """The scenes and the clips a run will load exist, are files and can be read, and each clip is an
    NPZ archive of this robot: checked here, before anything is spawned, not found missing by the
    collector. A motion library's clips are checked one by one, each against its own scene."""
    assets = resolved.assets
    motion = resolved.run.env.motion
    items = motion if isinstance(motion, tuple) else (motion,)
    if assets is None:
        for item in items:
            check_clip_path_alone(item)
        return
    for item in items:
        check_clip_file(assets, item, scene_of(assets, item) or assets["scene"])


def check_clip_file(assets: dict[str, Any], motion: str, scene_path: str) -> None:
    import zipfile

    manifest = assets["manifest"]
    here = "a manifest's paths are relative to the folder its pull ran in: run from there, or pull again"
    scene = Path(scene_path)
    why = _unreadable(scene)
    if why:
        raise InvalidInput(f"{manifest}: its scene {scene} {why}; {here}")
    names = ", ".join(sorted(assets.get("motions", {})))
    own = motion in assets.get("motions", {}).values() or motion == assets["motion"]
    why = _unreadable(Path(motion))
    if why:
        where = f"{manifest}: its clip {motion}" if own else f"env.motion={motion}"
        fix = here if own else f"give an NPZ clip's path or a clip of the manifest ({names})"
        raise InvalidInput(f"{where} {why}; {fix}")
    if not zipfile.is_zipfile(motion):
        raise InvalidInput(f"env.motion={motion}: not an NPZ archive; give an NPZ clip's path or a clip of "
                           f"the manifest ({names})")
    # The collector's own checks of the scene and the clip against it (keys, shapes, body order), run
    # here: a clip that fails them would otherwise end the run as a collector that died at startup.
    from soaklab.assets.motion import load_motion
    from soaklab.assets.scene import load_scene

    try:
        model = load_scene(scene)
    except ValueError as exc:  # MuJoCo's XML errors
        raise InvalidInput(f"{manifest}: its scene {scene} does not load ({one_line(exc)}); pull again") from None
    try:
        load_motion(Path(motion), model)
    except InvalidInput as exc:
        why = str(exc).removeprefix(f"{motion}: ")
        raise InvalidInput(f"env.motion={motion}: {why}; give a clip of this robot or a clip of the manifest "
                           f"({names})") from None


def check_clip_path_alone(motion: str | None) -> None:
    """A configuration resolved without an asset manifest (no scene to check a clip against) still
    refuses an `env.motion` path that is missing, unreadable or not an NPZ archive: the record must
    not carry a clip that no run could load."""
    import zipfile

    from soaklab.assets.clips import CLIP_CHOICES

    if motion is None or motion in CLIP_CHOICES:
        return
    why = _unreadable(Path(motion)) or (None if zipfile.is_zipfile(motion) else "is not an NPZ archive")
    if why:
        raise InvalidInput(f"env.motion={motion}: {why}; give an NPZ clip's path or a clip name "
                           f"({', '.join(CLIP_CHOICES)})")


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


def check_motion_library(composed: ComposedConfig) -> None:
    """env.motion as a list: a tracking task, at least one env per clip, labels that tell clips apart."""
    motion, weights = composed.get("env.motion"), composed.get("env.motion_weights")
    if not isinstance(motion, list):
        if weights is not None:
            raise SettingError("env.motion_weights", weights, "weighs a motion library's clips: "
                               "give env.motion as a list, or leave env.motion_weights null")
        return
    if not TASKS[composed.task].tracking:
        raise SettingError("env.motion", motion, f"a motion library needs a tracking task "
                           f"({', '.join(tracking_tasks())}), not {composed.task}")
    num_envs = composed.get("algo.num_envs")
    if num_envs < len(motion):
        raise SettingError("algo.num_envs", num_envs, f"must be >= the {len(motion)} clips of env.motion "
                           "(each clip tracks a block of envs)")
    if weights is not None:
        check_motion_weights(weights, len(motion), num_envs)
    labels = clip_labels(motion)
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise SettingError("env.motion", motion, f"two clips share the label {twice[0]!r} (a file's stem); "
                           "rename one of the files")


def check_motion_weights(weights: Any, clips: int, num_envs: int) -> None:
    """One positive, finite weight per clip, and at least one env in every clip's block."""
    fix = f"a list of {clips} positive numbers, one per clip of env.motion"
    if not isinstance(weights, list) or len(weights) != clips:
        raise SettingError("env.motion_weights", weights, f"must be {fix}")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            raise SettingError("env.motion_weights", weights, f"must be {fix} ({w!r} is not)")
    sizes = block_sizes(num_envs, clips, tuple(float(w) for w in weights))
    if min(sizes) < 1:
        raise SettingError("env.motion_weights", weights, f"gives a clip no env of algo.num_envs={num_envs} "
                           f"(blocks {sizes}); raise its weight or algo.num_envs")


def write_run_config(resolved: ResolvedRun, out: Path) -> dict[str, Any]:
    record = resolved.record()
    validate_artifact("run_config", record)
    write_json_atomic(out, record)
    return record


def recorded_run(source: Path | str, record: dict[str, Any]) -> RunConfig:
    """A recorded run_config.json's config as typed values (`source`: where it was read, for the
    error); a record this build cannot read whole is bad input, named in one line."""
    try:
        return RunConfig.of(record["config"], record["algo"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"{source}: its config does not fit this soaklab ({exc}); "
                           "a run resolved by another version? train it again") from None
