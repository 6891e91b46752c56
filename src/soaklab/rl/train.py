"""`soaklab train`: resolve on this host, prepare the run dir, run the learner (DESIGN §3, §4)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from soaklab.config.compose import compose
from soaklab.config.run_config import ResolvedRun, resolve_run_config
from soaklab.errors import InvalidInput, SettingError
from soaklab.jsonfiles import write_json_atomic
from soaklab.settings.devices import allow_cpu_carrier_from_env, probe_host
from soaklab.soak.settings import CONSOLE_LOG

DEFAULT_MANIFEST = Path("results/assets/manifest.json")
TASKS_WITHOUT_ASSETS = ("cartpole_swingup",)


def read_run_config(path: Path) -> dict[str, Any]:
    from soaklab.schemas import load_artifact

    return load_artifact("run_config", path, "resolve it again with `soaklab config resolve`")


def as_overrides(values: dict[str, Any]) -> list[str]:
    # JSON is a YAML subset: the override parser reads each value back with its type.
    return [f"{key}={json.dumps(value)}" for key, value in values.items()]


def merge_overrides(base: list[str], extra: list[str]) -> list[str]:
    """Later KEY=VALUE items replace earlier ones with the same key."""
    merged: dict[str, str] = {}
    for item in [*base, *extra]:
        merged[item.partition("=")[0].strip()] = item
    return list(merged.values())


def resolve_training(run_config: Path | None, algo: str | None, task: str | None, sim: str | None,
                     overrides: list[str], manifest: Path | None) -> ResolvedRun:
    """Re-resolve the configuration on the host that runs it, with every check, before spawning."""
    if run_config is not None:
        if any(v is not None for v in (algo, task, sim)):
            raise InvalidInput("--run-config: takes algo/task/sim from the file; drop --algo/--task/--sim")
        record = read_run_config(run_config)
        algo, task, sim = record["algo"], record["task"], record["sim"]
        overrides = merge_overrides(as_overrides(record["overrides"]), overrides)
        assets = (record["run"].get("assets") or {})
        if manifest is None and assets.get("manifest"):
            manifest = Path(assets["manifest"])
    elif None in (algo, task, sim):
        raise InvalidInput("--algo, --task and --sim must be given together (or --run-config)")
    assert algo is not None and task is not None and sim is not None
    if manifest is None and task not in TASKS_WITHOUT_ASSETS:
        manifest = DEFAULT_MANIFEST
        if not manifest.is_file():
            raise InvalidInput(f"{manifest}: no asset manifest; run `soaklab assets pull` first")
    composed = compose(algo, task, sim, overrides)
    resolved = resolve_run_config(composed, probe_host(), allow_cpu_carrier_from_env(), manifest)
    check_host_carrier(resolved)
    return resolved


def check_host_carrier(resolved: ResolvedRun) -> None:
    """This runtime carries observations and transitions through host shared memory only: a run
    whose carrier resolves to a GPU (a CUDA learner with carrier auto, or a device-resident sim)
    is refused before anything is spawned, rather than run on a transport its manifest misnames."""
    devices = resolved.devices
    if devices.carrier != "cpu":
        raise SettingError(
            "training.collector_tensor_device", devices.carrier_configured,
            f"resolves to {devices.carrier} (sim={devices.sim_backend}, learner {devices.learner}) but this build's "
            "runtime has only the host carrier (the CUDA inference ring and ingress are not built yet); use "
            "training.device=cpu, or training.collector_tensor_device=cpu with "
            "SOAKLAB_ALLOW_CUDA_LEARNER_CPU_CARRIER=1 for sim=mujoco",
        )


def next_run_dir(algo: str, task: str, sim: str, root: Path = Path("runs")) -> Path:
    n = 0
    while (root / f"{algo}-{task}-{sim}-{n}").exists():
        n += 1
    return root / f"{algo}-{task}-{sim}-{n}"


def prepare_run_dir(resolved: ResolvedRun) -> tuple[Path, dict[str, Any]]:
    """The run dir must be new or empty: the monitor reads file changes in it as liveness."""
    configured = resolved.composed.config["training"]["log_dir"]
    c = resolved.composed
    run_dir = Path(configured) if configured else next_run_dir(c.algo, c.task, c.sim)
    # The soak monitor's console log is the one file allowed to be there first.
    if run_dir.exists() and (not run_dir.is_dir() or any(p.name != CONSOLE_LOG for p in run_dir.iterdir())):
        raise InvalidInput(f"training.log_dir={run_dir}: exists and is not empty; choose a new directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    record = resolved.record()
    record["config"]["training"]["log_dir"] = str(run_dir)
    write_json_atomic(run_dir / "run_config.json", record)
    return run_dir, record


def train(resolved: ResolvedRun) -> tuple[Path, dict[str, Any]]:
    from soaklab.rl.faults import fault_from_env
    from soaklab.rl.runner import Learner

    fault = fault_from_env()
    if fault is not None and fault.name == "hang_startup":
        while True:  # a trainer that never writes anything: the monitor's startup timeout must end it
            time.sleep(1.0)
    run_dir, _ = prepare_run_dir(resolved)
    print(resolved.devices.mapping_line(), flush=True)
    print(f"train: {resolved.composed.algo}/{resolved.composed.task}/{resolved.composed.sim} "
          f"{resolved.settings.num_envs} envs x {resolved.composed.config['algo']['max_iterations']} iterations "
          f"-> {run_dir}", flush=True)
    summary = Learner(resolved, run_dir).run()
    return run_dir, summary
