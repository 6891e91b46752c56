"""The one way a run's configuration comes to be: `resolve` a request, or `load` a record
(docs/settings-contract.md, "Resolution").

`resolve` runs the whole chain once: compose the owner YAML with the overrides, check the contract,
resolve devices on the host, size the memory budget. `load` reads a run_config.json, which is then
authoritative: only what depends on the host is checked again (devices, the memory budget, the MPS
daemon), and a disagreement with the record fails closed naming it. In a DAG run `config resolve`
resolves; the soak monitor and the trainer load.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soaklab.config.compose import ComposedConfig, compose
from soaklab.config.host import allow_cpu_carrier_from_env
from soaklab.config.keys import MPS_THREAD_KEYS
from soaklab.config.overrides import Override, merge_overrides, parse_overrides
from soaklab.config.run_config import (
    ResolvedRun,
    check_asset_files,
    config_hash,
    layout_of,
    ranks_of,
    resolve_run_config,
)
from soaklab.environment import check_graph_env
from soaklab.errors import InvalidInput, SettingError
from soaklab.schemas import load_artifact
from soaklab.settings.budget import check_memory_budget, compute_memory_budget
from soaklab.settings.contract import resolve_runtime_settings
from soaklab.settings.devices import HostCapabilities, resolve_devices

if TYPE_CHECKING:
    from soaklab.mps.client import MpsSelection

DEFAULT_MANIFEST = Path("results/assets/manifest.json")
TASKS_WITHOUT_ASSETS = ("cartpole_swingup",)
AGAIN = "resolve it again with `soaklab config resolve`"


@dataclass(frozen=True)
class RunRequest:
    """What a user asks for: an owner (algo, task, sim), overrides and the asset manifest."""

    algo: str
    task: str
    sim: str
    overrides: tuple[str, ...] = ()
    manifest: Path | None = None  # None: no assets recorded (a run that trains needs with_assets)

    def with_assets(self) -> RunRequest:
        """A run that will train: a task with assets needs a manifest, results/assets/ by default."""
        if self.manifest is not None or self.task in TASKS_WITHOUT_ASSETS:
            return self
        if not DEFAULT_MANIFEST.is_file():
            raise InvalidInput(f"{DEFAULT_MANIFEST}: no asset manifest; run `soaklab assets pull` first")
        return replace(self, manifest=DEFAULT_MANIFEST)


def resolve(request: RunRequest, host: HostCapabilities) -> ResolvedRun:
    """Compose, check the contract, resolve devices and the budget on `host`; nothing is written."""
    check_graph_env()
    composed = compose(request.algo, request.task, request.sim, list(request.overrides))
    mps_threads(composed.config["training"])
    resolved = resolve_run_config(composed, host, allow_cpu_carrier_from_env(), request.manifest)
    return replace(resolved, origin=f"resolved on this host ({host.source})")


# Config fields resolution writes (ResolvedRun.config): not composed, so not compared with the overrides.
DERIVED = (("env", "collector_tensor_device"), ("env", "motion"))


def read_run_config(path: Path) -> dict[str, Any]:
    """A run_config.json that matches its schema, whose config still matches its config_hash, and
    whose overrides still compose to that config: a record is authoritative as a whole."""
    record = load_artifact("run_config", path, AGAIN)
    if config_hash(record["config"]) != record["config_hash"]:
        raise InvalidInput(f"{path}: its config no longer matches its config_hash (edited after resolution?); {AGAIN}")
    check_overrides_agree(path, record)
    return record


def _first_difference(composed: Any, recorded: Any, where: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(composed, dict) and isinstance(recorded, dict):
        for key in sorted(set(composed) | set(recorded)):
            found = _first_difference(composed.get(key, "<absent>"), recorded.get(key, "<absent>"),
                                      f"{where}.{key}" if where else key)
            if found:
                return found
        return None
    return None if composed == recorded and type(composed) is type(recorded) else (where, composed, recorded)


def check_overrides_agree(path: Path, record: dict[str, Any]) -> None:
    """The owner defaults with the record's overrides, composed again, give its config (derived
    fields aside) and its owner files; else the record is refused naming the first field."""
    request = request_of(record)
    try:
        composed = compose(request.algo, request.task, request.sim, list(request.overrides))
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: overrides: {exc}; {AGAIN}") from None
    expected = json.loads(json.dumps(composed.config))
    for section, key in DERIVED:
        expected[section][key] = record["config"].get(section, {}).get(key)
    found = _first_difference(expected, record["config"])
    if found:
        field, wanted, recorded = found
        raise InvalidInput(f"{path}: overrides and config disagree at {field} (the overrides compose to "
                           f"{json.dumps(wanted)}, the config records {json.dumps(recorded)}); edit neither: {AGAIN}")
    if list(composed.owner_files) != record["owner_files"]:
        raise InvalidInput(f"{path}: owner_files {record['owner_files']} are not what algo/task/sim compose "
                           f"({list(composed.owner_files)}); {AGAIN}")


def request_of(record: dict[str, Any], extra_overrides: tuple[str, ...] = ()) -> RunRequest:
    """The request a record was resolved from, with later KEY=VALUE items replacing earlier ones."""
    # JSON is a YAML subset: the override parser reads each value back with its type.
    recorded = [f"{k}={json.dumps(v)}" for k, v in record["overrides"].items()]
    merged = merge_overrides(recorded, list(extra_overrides))
    assets = record["run"].get("assets") or {}
    manifest = Path(assets["manifest"]) if assets.get("manifest") else None
    return RunRequest(record["algo"], record["task"], record["sim"], tuple(merged), manifest)


def _disagreement(path: Path, what: str, recorded: Any, here: Any) -> InvalidInput:
    return InvalidInput(f"{path}: {what} differs on this host (recorded {json.dumps(recorded, sort_keys=True)}, "
                        f"here {json.dumps(here, sort_keys=True)}); {AGAIN} on this host")


def load(path: Path, host: HostCapabilities) -> ResolvedRun:
    """The run a record describes, re-checked only where the host matters."""
    check_graph_env()
    record = read_run_config(path)
    config = record["config"]
    composed = ComposedConfig(algo=record["algo"], task=record["task"], sim=record["sim"], config=config,
                              overrides=tuple(parse_overrides(request_of(record).overrides)),
                              owner_files=tuple(record["owner_files"]))
    settings = resolve_runtime_settings(config)
    if settings.runtime_limits() != record["run"]["runtime_limits"]:
        raise _disagreement(path, "runtime_limits", record["run"]["runtime_limits"], settings.runtime_limits())
    training = config["training"]
    devices = resolve_devices(training["device"], training["collector_tensor_device"], training["sim_backend"],
                              settings.cuda_process_sharing, host, allow_cpu_carrier_from_env())
    if devices.as_record() != record["run"]["resolved_devices"]:
        raise _disagreement(path, "resolved_devices", record["run"]["resolved_devices"], devices.as_record())
    ranks = ranks_of(config, devices, host)
    recorded_ranks = record["run"].get("data_parallel")
    if recorded_ranks is not None and ranks.as_record() != recorded_ranks:
        raise _disagreement(path, "data_parallel", recorded_ranks, ranks.as_record())
    layout = layout_of(settings, composed.task, composed.get("env.motion"))
    budget = compute_memory_budget(settings, int(config["algo"]["replay_buffer_size"]), layout, devices, host)
    recorded_parts = record["run"]["memory_budget"]["parts_bytes"]
    if budget.parts != recorded_parts:  # the parts depend on the config alone: a different build sized them
        raise _disagreement(path, "memory_budget.parts_bytes", recorded_parts, budget.parts)
    check_memory_budget(budget)
    assets = record["run"].get("assets")
    if assets:
        check_manifest_unchanged(path, assets)
    resolved = ResolvedRun(composed, settings, devices, budget, host, assets, layout, ranks=ranks,
                           origin=f"loaded from {path} (devices and memory budget checked on this host, {host.source})")
    check_asset_files(resolved)
    return resolved


def check_manifest_unchanged(path: Path, assets: dict[str, Any]) -> None:
    manifest = Path(assets["manifest"])
    try:
        digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    except OSError as exc:
        raise InvalidInput(f"{path}: its asset manifest {manifest} cannot be read ({exc.strerror}); "
                           "run `soaklab assets pull`, then resolve again") from None
    if digest != assets["manifest_sha256"]:
        raise InvalidInput(f"{path}: the asset manifest {manifest} changed since resolution; {AGAIN}")


def with_log_dir(resolved: ResolvedRun, run_dir: Path) -> ResolvedRun:
    """The same run written to `run_dir` (training.log_dir is part of the config its hash covers, and
    of the overrides, which must compose to that config: check_overrides_agree)."""
    config = json.loads(json.dumps(resolved.composed.config))
    config["training"]["log_dir"] = str(run_dir)
    log_dir = Override("training.log_dir", str(run_dir), f"training.log_dir={run_dir}")
    kept = [o for o in resolved.composed.overrides if o.key != log_dir.key]
    at = next((i for i, o in enumerate(resolved.composed.overrides) if o.key == log_dir.key), len(kept))
    overrides = (*kept[:at], log_dir, *kept[at:])
    return replace(resolved, composed=replace(resolved.composed, config=config, overrides=overrides))


def select_mps(resolved: ResolvedRun, apply: bool) -> ResolvedRun:
    """Pick the MPS daemon a run with cuda_process_sharing=mps uses (resolution already refused mps
    anywhere it cannot work); `apply` points this process, and what it spawns, at it. Before any
    CUDA call: the driver reads the choice when the context is created."""
    training = resolved.composed.config["training"]
    threads = mps_threads(training)
    if resolved.settings.cuda_process_sharing != "mps":
        return resolved
    from soaklab.mps.client import select_daemon

    selection: MpsSelection = replace(select_daemon(training["device"]), learner_threads=threads[0],
                                      collector_threads=threads[1])
    if apply:
        selection.apply()
    return replace(resolved, mps=selection)


def mps_threads(training: dict[str, Any]) -> tuple[int | None, int | None]:
    """(learner, collector) MPS thread percentages; set without cuda_process_sharing=mps, refused."""
    values = tuple(training[key.split(".", 1)[1]] for key in MPS_THREAD_KEYS)
    if training["cuda_process_sharing"] != "mps":
        for key, value in zip(MPS_THREAD_KEYS, values, strict=True):
            if value is not None:
                raise SettingError(key, value, "limits an MPS client; it needs training.cuda_process_sharing=mps")
    return values[0], values[1]
