# Helpers shared by every rule file: the CLI, run arguments and package inputs.

import json
import shlex
import sys
from pathlib import Path

SOAKLAB = f"{shlex.quote(sys.executable)} -m soaklab"
PKG = Path(workflow.basedir) / "src" / "soaklab"

# Keys the DAG sets itself; a run's overrides may not.
DAG_OWNED_KEYS = {"training.log_dir": "the DAG writes each run to results/{run}/train"}

wildcard_constraints:
    run=r"[A-Za-z0-9][A-Za-z0-9_.-]*",


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


def pkg_sources(*parts):
    """Package files a rule depends on, so editing them reruns the rule (and only it)."""
    files = []
    for part in parts:
        path = PKG / part
        if path.is_file():
            files.append(str(path))
        else:
            files.extend(
                str(p) for p in sorted(path.rglob("*"))
                if p.is_file() and p.suffix in {".py", ".yaml", ".json"} and "__pycache__" not in p.parts
            )
    return files


# What every rule imports: the CLI, error types, JSON helpers and schemas.
CORE_SOURCES = ["__init__.py", "__main__.py", "cli.py", "errors.py", "jsonfiles.py", "schemas"]


def run_of(wildcards):
    return config["runs"][wildcards.run]


def run_args(wildcards):
    """--algo/--task/--sim and the run's overrides as KEY=VALUE, VALUE as JSON (a YAML subset)
    so that types survive the shell: the string '2' stays a string."""
    run = run_of(wildcards)
    args = ["--algo", run["algo"], "--task", run["task"], "--sim", run["sim"]]
    for key, value in (run.get("overrides") or {}).items():
        args.append(f"{key}={json.dumps(value)}")
    return " ".join(shlex.quote(a) for a in args)
