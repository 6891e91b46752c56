# Helpers shared by the workflow files: the CLI, run arguments and package inputs.

import importlib.util
import json
import shlex
import sys
from pathlib import Path

SOAKLAB = f"{shlex.quote(sys.executable)} -m soaklab"
PKG = Path(workflow.basedir) / "src" / "soaklab"

# Keys the DAG sets itself; a run's overrides may not.
DAG_OWNED_KEYS = {"training.log_dir": "the DAG writes each run to results/{run}/train"}


def _check_runs():
    runs = config["runs"]
    for name in config["soak_runs"]:
        if name not in runs:
            raise ValueError(f"soak_runs: {name!r} is not defined under runs: (defined: {', '.join(sorted(runs))})")
    for name, run in runs.items():
        for key in run.get("overrides") or {}:
            if key in DAG_OWNED_KEYS:
                raise ValueError(f"runs.{name}.overrides.{key}: not allowed; {DAG_OWNED_KEYS[key]}")


_check_runs()


# Each rule's code inputs: the import closure of the CLI command it runs, read from the source when
# the DAG loads (soaklab.codedeps, loaded by path: it needs nothing but the standard library).
_spec = importlib.util.spec_from_file_location("soaklab_codedeps", PKG / "codedeps.py")
codedeps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(codedeps)


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


def train_threads(wildcards):
    return overrides_of(wildcards).get("env.num_threads") or workflow.cores
