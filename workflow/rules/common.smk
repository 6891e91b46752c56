# Helpers shared by the workflow files: the CLI, run arguments and package inputs.

import importlib.util
import json
import math
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

SOAKLAB = f"{shlex.quote(sys.executable)} -m soaklab"
PKG = Path(workflow.basedir) / "src" / "soaklab"

# Keys the DAG sets itself; a run's overrides may not.
DAG_OWNED_KEYS = {"training.log_dir": "the DAG writes each run to results/{run}/train"}


def _standalone(module):
    """A package module that needs nothing but the standard library, loaded by path: the DAG plans
    before (and without) importing soaklab."""
    spec = importlib.util.spec_from_file_location(f"soaklab_{module}", PKG / f"{module}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded  # dataclasses look their module up there
    spec.loader.exec_module(loaded)
    return loaded


# Sweeps (soaklab.sweeps): each point of a sweep becomes a run under config["runs"], so every rule
# below treats it as any other run; SWEEPS keeps each sweep's runs and axis values for its summary.
sweeps = _standalone("sweeps")
SWEEPS = sweeps.expand_sweeps(config.get("sweeps") or {}, config["runs"])
for _sweep in SWEEPS.values():
    for _run in _sweep.runs:
        config["runs"][_run.name] = _run.run


def _check_runs():
    runs = config["runs"]
    for name in sweeps.RESERVED_RUN_NAMES:
        if name in runs:
            raise ValueError(f"runs.{name}: the name is taken (results/{name} belongs to the DAG); rename the run")
    for name in config["soak_runs"]:
        if name not in runs:
            raise ValueError(f"soak_runs: {name!r} is not defined under runs: (defined: {', '.join(sorted(runs))})")
    for name, run in runs.items():
        for key in run.get("overrides") or {}:
            if key in DAG_OWNED_KEYS:
                raise ValueError(f"runs.{name}.overrides.{key}: not allowed; {DAG_OWNED_KEYS[key]}")


_check_runs()


# Each rule's code inputs: the import closure of the CLI command it runs, read from the source when
# the DAG loads (soaklab.codedeps).
codedeps = _standalone("codedeps")


def code_of(*commands):
    """A stamp of the package files `soaklab <command>` runs (their sha256 sums): editing one of them
    replans the rule, and only the rules whose command runs it."""
    return str(codedeps.code_stamp(commands, Path(".snakemake/soaklab-code"), root=PKG))


def run_of(wildcards):
    return config["runs"][wildcards.run]


def overrides_of(wildcards):
    return run_of(wildcards).get("overrides") or {}


def uses_gpu(wildcards):
    """A GPU run: the MuJoCo Warp owners train on cuda, and any run whose device override says so."""
    device = str(overrides_of(wildcards).get("training.device", ""))
    return run_of(wildcards)["sim"] == "mjwarp" or device.startswith("cuda")


def soak_gpus(wildcards):
    """GPUs of a soak job when its run names none: one per data-parallel rank it asks for
    (training.dp_ranks), else one for a GPU run, else none."""
    if not uses_gpu(wildcards):
        return 0
    ranks = overrides_of(wildcards).get("training.dp_ranks")
    # anything but a plain count is resolve_config's to refuse, in the run's own branch
    return ranks if isinstance(ranks, int) and not isinstance(ranks, bool) and ranks >= 1 else 1


def run_args(wildcards):
    """--algo/--task/--sim and the run's overrides as KEY=VALUE, VALUE as JSON (a YAML subset)
    so that types survive the shell: the string '2' stays a string."""
    run = run_of(wildcards)
    args = ["--algo", run["algo"], "--task", run["task"], "--sim", run["sim"]]
    for key, value in (run.get("overrides") or {}).items():
        args.append(f"{key}={json.dumps(value)}")
    return " ".join(shlex.quote(a) for a in args)


def _assets_flags():
    assets = config.get("assets") or {}
    flags = []
    if assets.get("source"):
        flags += ["--source", assets["source"]]
    if assets.get("clip"):
        flags += ["--clip", assets["clip"]]
    if assets.get("clip_wheel"):
        flags += ["--clip-wheel", assets["clip_wheel"]]
    if assets.get("motion"):
        flags += ["--motion", assets["motion"]]
    return " ".join(shlex.quote(f) for f in flags)


def _soak_flags(wildcards):
    flags = []
    for key, value in run_of(wildcards)["soak"].items():  # the config schema requires every key
        flags += [f"--{key.replace('_', '-')}", str(value)]
    return " ".join(shlex.quote(f) for f in flags)


# What every step but the soak asks a scheduler for (a cluster executor reads its threads and these):
# one core, 2 GB and 15 minutes cover the assets pull, config resolution, the MPS record, metric
# extraction from a long soak's event file, validation and the sweep table. Export and playback load
# a policy and MuJoCo: PLAY_RESOURCES. The soak's own come from its run (train_soak).
LIGHT_RESOURCES = {"mem_mb": 2000, "runtime": 15}
PLAY_RESOURCES = {"mem_mb": 4000, "runtime": 30}


def soak_runtime_minutes(wildcards):
    """The soak job's default wall-clock limit: an hour, or its minimum soak and start-up budget plus a
    quarter of an hour where that is longer (a scheduler kills a job at its limit)."""
    soak = run_of(wildcards)["soak"]
    return max(60, math.ceil((soak["min_duration_seconds"] + soak["startup_timeout_seconds"]) / 60) + 15)


# Cores of a soak job on a cluster when its run names none (Snakemake has no --cores there).
CLUSTER_SOAK_THREADS = 4


def train_threads(wildcards):
    """The soak's cores: its physics threads (env.num_threads) where set, else resources.threads, else
    every core given to a local Snakemake (--cores), else CLUSTER_SOAK_THREADS on a cluster."""
    given = overrides_of(wildcards).get("env.num_threads") or run_of(wildcards).get("resources", {}).get("threads")
    if given:
        return given
    try:
        return workflow.cores
    except WorkflowError:  # a cluster executor: no --cores
        return CLUSTER_SOAK_THREADS


# Sweeps: the summary's command, and which sweeps and runs this invocation asked for.


def sweep_of(wildcards):
    if wildcards.sweep not in SWEEPS:
        raise ValueError(
            f"sweep {wildcards.sweep!r} is not defined under sweeps: (defined: {', '.join(SWEEPS) or 'none'})"
        )
    return SWEEPS[wildcards.sweep]


def sweep_summary_command(sweep, csv, html, plot):
    """`soaklab sweep-summary` for one sweep: the rule's shell command and the error handler's."""
    plan = shlex.quote(json.dumps(SWEEPS[sweep].plan()))
    return (
        f"{SOAKLAB} sweep-summary --plan {plan} --csv {shlex.quote(str(csv))}"
        f" --html {shlex.quote(str(html))} --plot {shlex.quote(str(plot))}"
    )


def sweep_summary_paths(sweep):
    """The table, page and plot of one sweep (sweep_summary's outputs)."""
    return [f"results/sweeps/{sweep}/summary.{ext}" for ext in ("csv", "html", "png")]


def _target_rules():
    return {rule.name for rule in getattr(workflow.dag, "targetrules", ())}


def targeted_sweeps():
    """The sweeps this invocation asked for: every sweep for the `sweep` target, else those whose
    summary files were named as targets."""
    if "sweep" in _target_rules():
        return list(SWEEPS)
    files = [str(f) for f in getattr(workflow.dag, "targetfiles", ())]
    return [name for name in SWEEPS if any(f.startswith(f"results/sweeps/{name}/") for f in files)]


def summary_command():
    """`soaklab summary` of the runs this invocation built: the asked-for sweeps' runs, and
    `soak_runs` unless only sweeps were asked for."""
    asked = targeted_sweeps()
    runs = [run for name in asked for run in SWEEPS[name].run_names]
    only_sweeps = asked and "soak" not in _target_rules()
    if not only_sweeps:
        runs = list(config["soak_runs"]) + runs
    target = "sweep" if only_sweeps else "soak"
    return f"{SOAKLAB} summary --target {target} " + " ".join(shlex.quote(r) for r in runs)
