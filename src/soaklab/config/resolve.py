"""The one way a run's configuration comes to be: `resolve` a request, or `load` a record
(docs/settings-contract.md, "Resolution").

`resolve` runs the whole chain once: compose the owner YAML with the overrides, check the contract,
resolve devices on the host, size the memory budget. `load` reads a run_config.json, which is then
authoritative: it resolves the record's own request again on this host and compares the result with
the record (devices, ranks, the memory budget, the config itself), and a disagreement fails closed
naming it. `obtain` is the one entry for a command line (an owner, or a record that flags may change).
In a DAG run `config resolve` resolves; the soak monitor and the trainer load.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from soaklab.catalogue import RUN_FIELDS, TASKS, name_error
from soaklab.config.compose import compose
from soaklab.config.host import allow_cpu_carrier_from_env
from soaklab.config.keys import MPS_THREAD_KEYS
from soaklab.config.loggers import require_logger_packages
from soaklab.config.overrides import merge_overrides
from soaklab.config.run_config import (
    ResolvedRun,
    config_hash,
    resolve_run_config,
)
from soaklab.contract.contract import resolve_runtime_settings
from soaklab.contract.devices import HostCapabilities
from soaklab.errors import InvalidInput, SettingError
from soaklab.files.jsonfiles import read_json
from soaklab.files.rundir import next_run_dir
from soaklab.host.envvars import check_graph_env, reclaim_at_start_enabled, trace_settings
from soaklab.schemas import load_artifact

DEFAULT_MANIFEST = Path("results/assets/manifest.json")
# Tasks that resolve without the G1 assets (the catalogue's fact).
TASKS_WITHOUT_ASSETS = tuple(name for name, task in TASKS.items() if not task.needs_assets)
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


@dataclass(frozen=True)
class Pin:
    """A value a caller fixes by its own flag (`soaklab soak --num-envs`): an override when the run
    is resolved, a check against the record when one is loaded (a record is never changed by it)."""

    flag: str  # as the user typed it, for the error line
    key: str   # dotted config key
    value: Any

    def override(self) -> str:
        return f"{self.key}={json.dumps(self.value)}"


@dataclass(frozen=True)
class RunSource:
    """Where a run's configuration comes from, as a command line gives it: an owner (algo, task, sim)
    with overrides, or a record (run_config.json) that overrides, a manifest or pins may change."""

    run_config: Path | None = None
    algo: str | None = None
    task: str | None = None
    sim: str | None = None
    overrides: tuple[str, ...] = ()
    manifest: Path | None = None
    pins: tuple[Pin, ...] = ()
    log_dir: Path | None = None  # where the run writes: resolved as training.log_dir, or put over a record's

    def owned_overrides(self) -> tuple[str, ...]:
        """The items the caller's own flags become when the run is resolved. The log dir is quoted:
        the path is data, never parsed as YAML (`null`, `run #3`, `a: b` stay paths)."""
        placed = (f"training.log_dir={json.dumps(str(self.log_dir))}",) if self.log_dir is not None else ()
        return (*placed, *(pin.override() for pin in self.pins))


def obtain(source: RunSource, host: HostCapabilities, new_run: bool = False) -> ResolvedRun:
    """The run `source` names on `host`: a record is loaded as it stands (its pins checked against
    it, its log dir put in), or resolved again when overrides or another manifest change it; an
    owner is resolved. The CLI's `train` and the soak monitor both come here. `new_run`: a run about
    to train in a run dir of its own, which resolution names where neither the source nor the config
    does (runs/<algo>-<task>-<sim>-<n>, soaklab.files.rundir.next_run_dir): the log dir is part of
    the resolved config, never written into it afterwards."""
    reclaim_at_start_enabled()  # refuses a bad SOAKLAB_SHM_RECLAIM_AT_START before anything starts
    trace_settings()  # and a bad SOAKLAB_TRACE or SOAKLAB_TRACE_DUMP (soaklab.rl.trace)
    resolved = _obtained(source, host)
    if not new_run:
        return resolved
    c, configured = resolved.composed, resolved.run.training.log_dir
    if configured:
        return resolved
    run_dir = next_run_dir(c.algo, c.task, c.sim, suffix=resolved.ranks.run_dir_suffix())  # made, empty
    try:
        if source.run_config is not None and not source.overrides and source.manifest is None:
            return _obtained(replace(source, log_dir=run_dir), host)  # still loaded as it stands
        # One more override, after the caller's (or in place of its own training.log_dir).
        placed = merge_overrides(list(source.overrides), [f"training.log_dir={json.dumps(str(run_dir))}"])
        return _obtained(replace(source, overrides=tuple(placed)), host)
    except BaseException:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # the empty dir made above; never a dir anything wrote into
        raise


def _obtained(source: RunSource, host: HostCapabilities) -> ResolvedRun:
    owner = (source.algo, source.task, source.sim)
    if source.run_config is not None:
        if any(v is not None for v in owner):
            raise InvalidInput("--run-config: takes algo/task/sim from the file; drop --algo/--task/--sim")
        if not source.overrides and source.manifest is None:
            return _loaded(source, host)
        request = request_of(read_run_config(source.run_config), (*source.owned_overrides(), *source.overrides))
        if source.manifest is not None:
            request = replace(request, manifest=source.manifest)
        return resolve(request.with_assets(), host)
    if None in owner:
        raise InvalidInput("--algo, --task and --sim must be given together (or --run-config)")
    assert source.algo is not None and source.task is not None and source.sim is not None
    return resolve(RunRequest(source.algo, source.task, source.sim, (*source.owned_overrides(), *source.overrides),
                              source.manifest).with_assets(), host)


def _loaded(source: RunSource, host: HostCapabilities) -> ResolvedRun:
    assert source.run_config is not None
    resolved = load(source.run_config, host, source.log_dir)
    require_logger_packages(resolved.run.training.loggers)  # the run is about to start here
    for pin in source.pins:
        recorded = resolved.composed.get(pin.key)
        if recorded != pin.value:
            raise InvalidInput(f"{pin.flag}={pin.value}: disagrees with {pin.key}={recorded} in "
                               f"{source.run_config}; drop the flag or resolve the run config again")
    return resolved


def resolve(request: RunRequest, host: HostCapabilities) -> ResolvedRun:
    """Compose, check the contract, resolve devices and the budget on `host`; nothing is written."""
    check_graph_env()
    composed = compose(request.algo, request.task, request.sim, list(request.overrides))
    mps_threads(composed.config["training"])
    require_logger_packages(composed.config["training"]["loggers"])
    resolved = resolve_run_config(composed, host, allow_cpu_carrier_from_env(), request.manifest)
    return replace(resolved, origin=f"resolved on this host ({host.source})")


# Config fields resolution writes (ResolvedRun.config): not composed, so not compared with the overrides.
DERIVED = (("env", "collector_tensor_device"), ("env", "motion"))


def _fix_for(path: Path) -> str:
    """What to do about a run_config.json its schema refuses: a record whose algorithm, task or
    backend is not in the installed catalogue was made with a plug-in that is not installed here
    (resolving again cannot resume or export that run; installing it can)."""
    with contextlib.suppress(OSError, ValueError):
        record = read_json(path)
        if isinstance(record, dict):
            for field in RUN_FIELDS:
                value = record.get(field)
                if isinstance(value, str) and name_error(field, value):
                    return (f"its {field} {value!r} is not in the installed catalogue: install the plug-in that "
                            f"declares it (or {AGAIN} for a new run)")
    return AGAIN


def read_run_config(path: Path) -> dict[str, Any]:
    """A run_config.json that matches its schema, whose config still matches its config_hash, and
    whose overrides still compose to that config: a record is authoritative as a whole."""
    record = load_artifact("run_config", path, _fix_for(path))
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
        # The contract's one check, on what the overrides compose to, before the comparison: an edited
        # override that no value may take is named as such, not as a disagreement.
        resolve_runtime_settings(composed.config)
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


def load(path: Path, host: HostCapabilities, log_dir: Path | None = None) -> ResolvedRun:
    """The run a record describes: resolved again from the record's own request on `host`, then
    compared with it wherever the host or the code could make it differ. A record is authoritative:
    any difference fails closed naming the field (it is never silently re-resolved). `log_dir`: the
    run written there instead, resolved with the record's request as one more override (in place of
    its own training.log_dir), and compared with the record so placed."""
    record = read_run_config(path)
    assets = record["run"].get("assets")
    if assets:
        check_manifest_unchanged(path, assets)
    placed = (f"training.log_dir={json.dumps(str(log_dir))}",) if log_dir is not None else ()
    resolved = resolve(request_of(record, placed), host)
    run = record["run"]
    here: tuple[tuple[str, Any, Any], ...] = (
        ("runtime_limits", run["runtime_limits"], resolved.settings.runtime_limits()),
        ("resolved_devices", run["resolved_devices"], resolved.devices.as_record()),
        ("data_parallel", run.get("data_parallel"), resolved.ranks.as_record()),
        # The parts depend on the config alone: a difference means another build sized them.
        ("memory_budget.parts_bytes", run["memory_budget"]["parts_bytes"], resolved.budget.parts),
    )
    for what, recorded, now in here:
        if recorded is not None and recorded != now:
            raise _disagreement(path, what, recorded, now)
    expected = json.loads(json.dumps(record["config"]))
    if log_dir is not None:
        expected["training"]["log_dir"] = str(log_dir)
    if config_hash(resolved.config) != config_hash(expected):
        raise InvalidInput(f"{path}: this code resolves its request to another config than it records "
                           f"(derived fields: {', '.join('.'.join(d) for d in DERIVED)}); {AGAIN}")
    return replace(resolved, origin=f"loaded from {path} (devices and memory budget checked on this host, "
                                    f"{host.source})")


def check_manifest_unchanged(path: Path, assets: dict[str, Any]) -> None:
    manifest = Path(assets["manifest"])
    try:
        digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    except OSError as exc:
        raise InvalidInput(f"{path}: its asset manifest {manifest} cannot be read ({exc.strerror}); "
                           "run `soaklab assets pull`, then resolve again") from None
    if digest != assets["manifest_sha256"]:
        raise InvalidInput(f"{path}: the asset manifest {manifest} changed since resolution; {AGAIN}")


def mps_threads(training: dict[str, Any]) -> tuple[int | None, int | None]:
    """(learner, collector) MPS thread percentages; set without cuda_process_sharing=mps, refused."""
    values = tuple(training[key.split(".", 1)[1]] for key in MPS_THREAD_KEYS)
    if training["cuda_process_sharing"] != "mps":
        for key, value in zip(MPS_THREAD_KEYS, values, strict=True):
            if value is not None:
                raise SettingError(key, value, "limits an MPS client; it needs training.cuda_process_sharing=mps")
    return values[0], values[1]
