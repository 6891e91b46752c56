#!/usr/bin/env python3
"""The 30-minute CPU soak through the whole DAG; its evidence is committed under benchmarks/cpu/soak-30min/.

Runs `snakemake soak --cores 1 --configfile config/cpu-30min.yaml` (nothing else
should run on the machine meanwhile), then copies the soak JSON, metrics JSON and
plot and the validation report, and writes summary.json: command, machine,
duration, median throughput and the leak verdict's trends.

    .venv/bin/python -m soaklab.bench.cpu_soak
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host.info import git_state, host_record, versions

RUN = "cpu30"
CONFIG = "config/cpu-30min.yaml"
OUT = Path("benchmarks/cpu/soak-30min")


def main() -> int:
    # No options: the soak is the one config/cpu-30min.yaml names; --help must not start it.
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    cmd = [sys.executable, "-m", "snakemake", "soak", "--cores", "1", "--configfile", CONFIG]
    print("$", " ".join(cmd[1:]), flush=True)
    started = time.time()
    done = subprocess.run(cmd)
    results = Path("results") / RUN
    OUT.mkdir(parents=True, exist_ok=True)
    evidence = results if done.returncode == 0 else Path("logs") / RUN / "soak_evidence"
    for name in ("soak.json", "metrics.json", "metrics.png", "validation.json"):
        if (evidence / name).is_file():
            shutil.copy2(evidence / name, OUT / name)
    if not (OUT / "soak.json").is_file():
        print(f"cpu_soak: no soak JSON in {evidence}; see logs/{RUN}/train_soak.log", file=sys.stderr)
        return 1
    soak = json.loads((OUT / "soak.json").read_text())
    summary: dict = {
        "command": " ".join(["python -m snakemake", *cmd[3:]]),
        "machine": host_record(), "versions": versions(), "git": git_state(),
        "dag_returncode": done.returncode, "wall_s": round(time.time() - started, 1),
        "soak_status": soak["status"], "failure_classification": soak["failure_classification"],
        "soak_duration_s": soak["duration_s"],
        "leak_verdict": {k: soak["resource_summary"]["leak_verdict"][k] for k in ("status", "leak", "leaking")},
        "trends": {name: {k: t[k] for k in ("start", "end", "growth", "bound", "slope_per_minute")}
                   for name, t in soak["resource_summary"]["leak_verdict"]["trends"].items()},
    }
    if (results / "metrics.csv").is_file():
        frame = pd.read_csv(results / "metrics.csv")
        fps = frame[frame["tag"] == "Perf/total_fps"]["value"]
        summary["median_env_steps_per_s"] = float(fps.median())
        summary["run"] = json.loads((OUT / "metrics.json").read_text())["run"]
    write_json_atomic(OUT / "summary.json", summary)
    print(json.dumps({k: summary[k] for k in ("soak_status", "soak_duration_s", "leak_verdict")}, indent=1))
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
