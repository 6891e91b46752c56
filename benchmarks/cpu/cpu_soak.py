#!/usr/bin/env python3
"""The 30-minute CPU soak through the whole DAG; its evidence is committed under benchmarks/cpu/soak-30min/.

Runs `snakemake soak --cores 1 --configfile config/cpu-30min.yaml` (nothing else
should run on the machine meanwhile), then copies the soak JSON, metrics JSON and
plot and the validation report, and writes summary.json: command, machine,
duration, median throughput and the leak verdict's trends.

    .venv/bin/python benchmarks/cpu/cpu_soak.py

With `--kill-at 2600,5300` the soak is interrupted (docs/soak.md, "Interrupted soaks"): its trainer
is SIGKILLed at each of those iterations (SOAKLAB_FAULT=kill_learner@N), and the same `snakemake
soak` is run again after each kill, which resumes the run from its newest checkpoint. Then the same
run config is trained once more unbroken (`soaklab train --run-config`, alone), and the summary says
whether the two runs are the same bit for bit (soaklab.metrics.same_run). Evidence goes to
benchmarks/cpu/soak-30min-resumed/. `--unbroken DIR` takes an unbroken run trained beforehand (the
same `soaklab train --run-config` with its own log dir, e.g. alongside the soak), and `--judge-only`
runs nothing and judges the soak already run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.host.info import git_state, host_record, versions
from soaklab.metrics.same_run import first_difference
from soaklab.rl.faults import FAULT_ENV
from soaklab.soak.interrupted import kept_runs

RUN = "cpu30"
CONFIG = "config/cpu-30min.yaml"
OUT = Path("benchmarks/cpu/soak-30min")
OUT_RESUMED = Path("benchmarks/cpu/soak-30min-resumed")
RESULTS = Path("results") / RUN
UNBROKEN = Path("results") / f"{RUN}-unbroken"


def kill_points(text: str) -> list[int]:
    try:
        points = [int(p) for p in text.split(",")]
    except ValueError:
        points = []
    if not points or points != sorted(set(points)) or points[0] < 1:
        raise argparse.ArgumentTypeError(f"--kill-at {text}: expected increasing iterations, e.g. 2600,5300")
    return points


def main() -> int:
    # The soak is the one config/cpu-30min.yaml names; --help must not start it.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill-at", type=kill_points, default=[],
                        help="SIGKILL the trainer at these iterations, resuming after each (e.g. 2600,5300)")
    parser.add_argument("--judge-only", action="store_true",
                        help="run nothing: judge the soak already run (with --kill-at, as it was killed)")
    parser.add_argument("--unbroken", type=Path, default=None,
                        help="an unbroken run already trained from the soak's run config (e.g. alongside it), "
                             f"instead of training one into {UNBROKEN}")
    args = parser.parse_args()
    kills = args.kill_at
    out = OUT_RESUMED if kills else OUT
    if args.unbroken is not None and not (args.unbroken / "run_summary.json").is_file():
        print(f"cpu_soak: --unbroken {args.unbroken}: no run_summary.json; not a finished run", file=sys.stderr)
        return 2
    if args.judge_only:
        return judge(kills, out, args.unbroken, returncode=0 if (RESULTS / "validation.json").is_file() else 1,
                     wall_s=None, train_unbroken=False)
    if kills and (RESULTS.exists() or UNBROKEN.exists()):
        print(f"cpu_soak: {RESULTS} or {UNBROKEN} exists; an interrupted soak starts from nothing "
              "(make clean-results)", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "snakemake", "soak", "--cores", "1", "--configfile", CONFIG]
    started = time.time()
    for k in kills:
        print(f"$ {FAULT_ENV}=kill_learner@{k}", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, env={**os.environ, FAULT_ENV: f"kill_learner@{k}"})
        if not kept_runs(RESULTS / "train"):
            print(f"cpu_soak: the soak killed at iteration {k} was not kept for resuming "
                  f"(no {RESULTS / 'train.interrupted-*'}); see logs/{RUN}/train_soak.log", file=sys.stderr)
            return 1
    print("$", " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd)
    return judge(kills, out, args.unbroken, done.returncode, round(time.time() - started, 1), train_unbroken=True)


def judge(kills: list[int], out: Path, unbroken: Path | None, returncode: int, wall_s: float | None,
          train_unbroken: bool) -> int:
    """Copy the soak's evidence to `out`, write summary.json, and (killed soaks) compare with the
    unbroken run: the one given, else one trained here (unless `train_unbroken` is off: --judge-only
    runs nothing, and the summary then says the comparison is still to be made)."""
    cmd = [sys.executable, "-m", "snakemake", "soak", "--cores", "1", "--configfile", CONFIG]
    out.mkdir(parents=True, exist_ok=True)
    evidence = RESULTS if returncode == 0 else Path("logs") / RUN / "soak_evidence"
    for name in ("soak.json", "metrics.json", "metrics.png", "validation.json"):
        if (evidence / name).is_file():
            shutil.copy2(evidence / name, out / name)
    if not (out / "soak.json").is_file():
        print(f"cpu_soak: no soak JSON in {evidence}; see logs/{RUN}/train_soak.log", file=sys.stderr)
        return 1
    soak = read_json(out / "soak.json")
    summary: dict = {
        "command": " ".join(["python -m snakemake", *cmd[3:]]),
        "machine": host_record(), "versions": versions(), "git": git_state(),
        "dag_returncode": returncode, "wall_s": wall_s,
        "soak_status": soak["status"], "failure_classification": soak["failure_classification"],
        "soak_duration_s": soak["duration_s"],
        "leak_verdict": {k: soak["resource_summary"]["leak_verdict"][k] for k in ("status", "leak", "leaking")},
        "trends": {name: {k: t[k] for k in ("start", "end", "growth", "bound", "slope_per_minute")}
                   for name, t in soak["resource_summary"]["leak_verdict"]["trends"].items()},
    }
    if (RESULTS / "metrics.csv").is_file():
        frame = pd.read_csv(RESULTS / "metrics.csv")
        fps = frame[frame["tag"] == "Perf/total_fps"]["value"]
        summary["median_env_steps_per_s"] = float(fps.median())
        summary["run"] = read_json(out / "metrics.json")["run"]
    if kills and returncode == 0 and (unbroken is not None or train_unbroken):
        summary["resume"] = resumed_against_unbroken(kills, soak, unbroken)
    elif kills and returncode == 0:
        summary["resume"] = {"kills_at": kills, "segments": soak.get("segments"), "same_as_unbroken": None,
                             "difference": "not compared yet: give --unbroken RUN_DIR"}
    write_json_atomic(out / "summary.json", summary)
    print(json.dumps({k: summary[k] for k in ("soak_status", "soak_duration_s", "leak_verdict")}, indent=1))
    return returncode if "resume" not in summary or summary["resume"]["same_as_unbroken"] is not False else 1


def resumed_against_unbroken(kills: list[int], soak: dict, unbroken: Path | None) -> dict:
    """Train the soak's run config again, unbroken (or take the one given), and compare the two runs
    bit for bit."""
    cmd = [sys.executable, "-m", "soaklab", "train", "--run-config", str(RESULTS / "run_config.json"),
           f"training.log_dir={unbroken or UNBROKEN}", "--skip-post-training"]
    started = time.time()
    if unbroken is None:
        print("$", " ".join(cmd[1:]), flush=True)
        code = subprocess.run(cmd).returncode
    else:  # trained before, by this same command with its log dir
        code = 0 if read_json(unbroken / "run_summary.json").get("status") == "completed" else 1
    difference = first_difference(RESULTS / "train", unbroken or UNBROKEN) if code == 0 else \
        f"the unbroken run exited {code}"
    print(f"cpu_soak: the resumed run is {'the same as' if difference is None else 'not'} the unbroken one, "
          f"bit for bit{'' if difference is None else ': ' + difference}", flush=True)
    return {"kills_at": kills, "segments": soak.get("segments"),
            "unbroken_command": " ".join(["python -m soaklab", *cmd[3:]]),
            "unbroken_wall_s": round(time.time() - started, 1) if unbroken is None else None,
            "same_as_unbroken": difference is None, "difference": difference}


if __name__ == "__main__":
    raise SystemExit(main())
