#!/usr/bin/env python3
"""The 30-minute CPU soak through the whole DAG; its evidence is committed under benchmarks/cpu/soak-30min/.

Runs `snakemake soak --cores 1 --configfile config/cpu-30min.yaml` (nothing else
should run on the machine meanwhile), then copies the soak JSON, metrics JSON and
plot and the validation report, and writes summary.json: command, machine,
duration, median throughput and the leak verdict's trends.

    .venv/bin/python -m soaklab.bench.cpu_soak

With `--kill-at 2600,5300` the soak is interrupted (docs/soak.md, "Interrupted soaks"): its trainer
is SIGKILLed at each of those iterations (SOAKLAB_FAULT=kill_learner@N), and the same `snakemake
soak` is run again after each kill, which resumes the run from its newest checkpoint. Then the same
run config is trained once more unbroken (`soaklab train --run-config`, alone), and the summary says
whether the two runs are the same bit for bit (soaklab.metrics.same_run). Evidence goes to
benchmarks/cpu/soak-30min-resumed/.
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

from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import git_state, host_record, versions
from soaklab.metrics.same_run import first_difference
from soaklab.rl.faults import FAULT_ENV

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
    kills = parser.parse_args().kill_at
    out = OUT_RESUMED if kills else OUT
    if kills and (RESULTS.exists() or UNBROKEN.exists()):
        print(f"cpu_soak: {RESULTS} or {UNBROKEN} exists; an interrupted soak starts from nothing "
              "(make clean-results)", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "snakemake", "soak", "--cores", "1", "--configfile", CONFIG]
    started = time.time()
    for k in kills:
        print(f"$ {FAULT_ENV}=kill_learner@{k}", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, env={**os.environ, FAULT_ENV: f"kill_learner@{k}"})
        if not (RESULTS / "train.interrupted").is_dir():
            print(f"cpu_soak: the soak killed at iteration {k} was not kept for resuming "
                  f"(no {RESULTS / 'train.interrupted'}); see logs/{RUN}/train_soak.log", file=sys.stderr)
            return 1
    print("$", " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd)
    wall_s = round(time.time() - started, 1)
    out.mkdir(parents=True, exist_ok=True)
    evidence = RESULTS if done.returncode == 0 else Path("logs") / RUN / "soak_evidence"
    for name in ("soak.json", "metrics.json", "metrics.png", "validation.json"):
        if (evidence / name).is_file():
            shutil.copy2(evidence / name, out / name)
    if not (out / "soak.json").is_file():
        print(f"cpu_soak: no soak JSON in {evidence}; see logs/{RUN}/train_soak.log", file=sys.stderr)
        return 1
    soak = json.loads((out / "soak.json").read_text())
    summary: dict = {
        "command": " ".join(["python -m snakemake", *cmd[3:]]),
        "machine": host_record(), "versions": versions(), "git": git_state(),
        "dag_returncode": done.returncode, "wall_s": wall_s,
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
        summary["run"] = json.loads((out / "metrics.json").read_text())["run"]
    if kills and done.returncode == 0:
        summary["resume"] = resumed_against_unbroken(kills, soak)
    write_json_atomic(out / "summary.json", summary)
    print(json.dumps({k: summary[k] for k in ("soak_status", "soak_duration_s", "leak_verdict")}, indent=1))
    return done.returncode if "resume" not in summary or summary["resume"]["same_as_unbroken"] else 1


def resumed_against_unbroken(kills: list[int], soak: dict) -> dict:
    """Train the soak's run config again, unbroken and alone, and compare the two runs bit for bit."""
    cmd = [sys.executable, "-m", "soaklab", "train", "--run-config", str(RESULTS / "run_config.json"),
           f"training.log_dir={UNBROKEN}", "--skip-post-training"]
    print("$", " ".join(cmd[1:]), flush=True)
    started = time.time()
    trained = subprocess.run(cmd)
    difference = first_difference(RESULTS / "train", UNBROKEN) if trained.returncode == 0 else \
        f"the unbroken run exited {trained.returncode}"
    print(f"cpu_soak: the resumed run is {'the same as' if difference is None else 'not'} the unbroken one, "
          f"bit for bit{'' if difference is None else ': ' + difference}", flush=True)
    return {"kills_at": kills, "segments": soak.get("segments"),
            "unbroken_command": " ".join(["python -m soaklab", *cmd[3:]]),
            "unbroken_wall_s": round(time.time() - started, 1),
            "same_as_unbroken": difference is None, "difference": difference}


if __name__ == "__main__":
    raise SystemExit(main())
