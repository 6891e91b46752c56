"""`soaklab train`: resolve on this host, prepare the run dir, run the learner (DESIGN §3, §4)."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soaklab.capture import check_graph_env
from soaklab.config.compose import compose
from soaklab.config.run_config import ResolvedRun, resolve_run_config
from soaklab.errors import InvalidInput
from soaklab.jsonfiles import write_json_atomic
from soaklab.settings.devices import HOST_CAPABILITIES_ENV, allow_cpu_carrier_from_env, probe_host
from soaklab.soak.settings import CONSOLE_LOG, check_path_shape

if TYPE_CHECKING:
    from soaklab.mps.client import MpsSelection

DEFAULT_MANIFEST = Path("results/assets/manifest.json")
TASKS_WITHOUT_ASSETS = ("cartpole_swingup",)


def read_run_config(path: Path) -> dict[str, Any]:
    """A run_config.json whose config still matches its config_hash (an edited config block would
    otherwise be ignored: training re-resolves from the overrides)."""
    from soaklab.config.run_config import config_hash
    from soaklab.schemas import load_artifact

    record = load_artifact("run_config", path, "resolve it again with `soaklab config resolve`")
    if config_hash(record["config"]) != record["config_hash"]:
        raise InvalidInput(f"{path}: its config no longer matches its config_hash (edited after resolution?); "
                           "resolve it again with `soaklab config resolve`")
    return record


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
                     overrides: list[str], manifest: Path | None, in_trainer: bool = True) -> ResolvedRun:
    """Re-resolve the configuration on the host that runs it, with every check, before spawning.

    `in_trainer`: this process will train. It must run on the real host (a simulated one is for
    planning) and is pointed at the selected MPS daemon; the soak monitor, which only checks, leaves
    its environment alone so the trainer makes its own selection."""
    check_graph_env()
    if in_trainer and os.environ.get(HOST_CAPABILITIES_ENV):
        raise InvalidInput(f"{HOST_CAPABILITIES_ENV}: simulates a host for planning and resolution only; "
                           "unset it to train on this host")
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
    selection = select_mps(composed.config["training"], in_trainer)
    resolved = resolve_run_config(composed, probe_host(), allow_cpu_carrier_from_env(), manifest)
    return replace(resolved, mps=selection)


def select_mps(training: dict[str, Any], apply: bool) -> MpsSelection | None:
    """Pick the MPS daemon before this process touches CUDA (probing the host creates a context).

    Only a request that can be valid selects: anything else is left to resolution, whose refusal
    names the setting (mps needs sim=mjwarp and a CUDA learner)."""
    if training["cuda_process_sharing"] != "mps" or training["sim_backend"] != "mjwarp" \
            or not str(training["device"]).startswith("cuda"):
        return None
    from soaklab.mps.client import select_daemon

    selection = select_daemon(training["device"])
    if apply:
        selection.apply()
    return selection


def next_run_dir(algo: str, task: str, sim: str, root: Path = Path("runs")) -> Path:
    n = 0
    while (root / f"{algo}-{task}-{sim}-{n}").exists():
        n += 1
    return root / f"{algo}-{task}-{sim}-{n}"


RUN_DIR_LOCK = ".soaklab.lock"
_claims: list[Any] = []  # open lock files: a claim lasts as long as this process


def claim_run_dir(run_dir: Path) -> None:
    """An exclusive lock on RUN_DIR/.soaklab.lock for this process's lifetime: two trainers (or two
    soaks) aimed at one dir cannot both start, however close together they check it."""
    handle = open(run_dir / RUN_DIR_LOCK, "a")  # noqa: SIM115 - held open on purpose
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise InvalidInput(f"training.log_dir={run_dir}: in use by another soaklab process; "
                           "choose a new directory") from None
    _claims.append(handle)


def prepare_run_dir(resolved: ResolvedRun) -> tuple[Path, dict[str, Any]]:
    """The run dir must be new or empty: the monitor reads file changes in it as liveness."""
    configured = resolved.composed.config["training"]["log_dir"]
    c = resolved.composed
    run_dir = Path(configured) if configured else next_run_dir(c.algo, c.task, c.sim)
    check_path_shape("training.log_dir", run_dir, want_dir=True)
    # The soak monitor's console log is the one file allowed to be there first.
    if run_dir.exists() and any(p.name not in (CONSOLE_LOG, RUN_DIR_LOCK) for p in run_dir.iterdir()):
        raise InvalidInput(f"training.log_dir={run_dir}: exists and is not empty; choose a new directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    claim_run_dir(run_dir)
    # The run dir is part of the config its hash covers (here and in the run summary).
    resolved.composed.config["training"]["log_dir"] = str(run_dir)
    record = resolved.record()
    write_json_atomic(run_dir / "run_config.json", record)
    return run_dir, record


def _thread_error_line(args: threading.ExceptHookArgs) -> None:
    """A helper thread's failure (TensorBoard's event writer on a full disk, say) in one line: the
    training thread notices it on its own and fails the run; a traceback would only bury that line."""
    name = args.thread.name if args.thread is not None else "thread"
    print(f"train: error: {name}: {args.exc_type.__name__}: {args.exc_value}", file=sys.stderr, flush=True)


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
    threading.excepthook = _thread_error_line
    learner = Learner(resolved, run_dir)
    summary = learner.run()
    if learner.summary_error is not None:
        summary["status"] = "failed"  # what the caller reports; the file itself could not be written
        summary["failure_reason"] = summary["failure_reason"] or learner.summary_error
    return run_dir, summary
