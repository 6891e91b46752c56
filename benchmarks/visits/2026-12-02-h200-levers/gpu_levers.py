#!/usr/bin/env python3
"""One table (JSON) and one chart (PNG) of a throughput-lever visit
(benchmarks/visits/2026-12-02-h200-levers/levers.sh).

Reads the visit folder's `phases_<run>.json` (scripts/gpu/gpu_phases.py, one per training run),
`backend_<envs>.json` (the env alone, same visit) and `learner.json` (the learner alone), and
writes `levers.json`: per run its env count, the levers it used, steady-state env-steps/s, the
phase medians, and the env step inside the run over the env step alone; and `levers.png`: env-steps/s
per run, grouped by env count, with the env-alone rate of the same visit as the ceiling line.

    .venv/bin/python benchmarks/visits/2026-12-02-h200-levers/gpu_levers.py benchmarks/visits/2026-12-02-h200-levers
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from soaklab.files.jsonfiles import read_json, write_json_atomic


def rows(folder: Path) -> list[dict[str, Any]]:
    alone = {}
    for path in folder.glob("backend_*.json"):
        result = read_json(path)["results"][0]
        alone[result["num_envs"]] = result["throughput_env_control_steps_per_s"]
    out = []
    for path in sorted(folder.glob("phases_*.json")):
        d = read_json(path)
        phases = d["phases_per_iteration"]
        envs = d["num_envs"]
        env_step = phases["collector_env_step_ms"]["mean_ms"]
        alone_ms = 1e3 * envs / alone[envs] if envs in alone else None
        out.append({
            "run": path.stem.removeprefix("phases_"), "num_envs": envs, "ranks": d["ranks"], "algo": d["algo"],
            "settings": d["settings"], "compile_ran": (d.get("compile_ran") or {}).get("ran"),
            "source": d["source"], "levers": label(d["source"]),
            "env_steps_per_s": d["steady_state"]["env_steps_per_s"],
            "iteration_ms": phases["iteration_ms"]["median_ms"],
            "update_ms": phases["learner_update_ms"]["median_ms"],
            "inference_ms": phases["learner_inference_ms"]["median_ms"],
            "env_step_ms": env_step,
            "env_step_alone_ms": None if alone_ms is None else round(alone_ms, 3),
            "env_step_over_alone": None if alone_ms is None else round(env_step / alone_ms, 3),
            "env_alone_env_steps_per_s": alone.get(envs),
        })
    return sorted(out, key=lambda r: (r["num_envs"], r["env_steps_per_s"]))


SHORT = {"algo.compile=": "compile ", "training.collector_stream_priority=high": "env stream high",
         "training.mps_learner_thread_percentage=": "learner MPS ", "algo.updates_per_step=": "updates ",
         "algo.batch_size=": "batch "}


def label(source: str) -> str:
    """The levers a run's source line names, shortly ("defaults" when none)."""
    words = source.split(" (")[0].split()
    levers = [w for w in words[words.index("--sim") + 2:] if "=" in w and not w.startswith("algo.num_envs=")]
    for long, short in SHORT.items():
        levers = [w.replace(long, short) for w in levers]
    return ", ".join(w + ("%" if w.startswith("learner MPS") else "") for w in levers) or "defaults"


def chart(table: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["num_envs"] for r in table})
    fig, axes = plt.subplots(1, len(sizes), figsize=(7.5 * len(sizes), 4.2), squeeze=False)
    for ax, envs in zip(axes[0], sizes, strict=True):
        group = [r for r in table if r["num_envs"] == envs]
        ax.barh([label(r["source"]) for r in group], [r["env_steps_per_s"] / 1e3 for r in group], color="#4c72b0")
        ceiling = group[0]["env_alone_env_steps_per_s"]
        if ceiling:
            ax.axvline(ceiling / 1e3, color="#c44e52", linestyle="--", label=f"env alone {ceiling / 1e3:.1f} k")
            ax.legend(loc="lower right")
        ax.set_title(f"{envs} envs (FlashSAC, G1, MJWarp, MPS, one H200)")
        ax.set_xlabel("steady-state env-steps/s (thousands)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    table = rows(args.folder)
    if not table:
        print(f"gpu_levers: error: {args.folder}: no phases_*.json", file=sys.stderr)
        return 2
    learner = args.folder / "learner.json"
    bench = read_json(learner) if learner.is_file() else None
    record = {"command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]), "runs": table,
              "learner_alone": None if bench is None else [
                  {"compile": r["compile"]["ran"], "mode": r["mode"], "batch_size": r["batch_size"],
                   "update_ms_median": round(r["update_ms_median"], 3),
                   "kernels_per_2_updates": (r["kernels_per_variant_cycle"] or {}).get("kernels")}
                  for r in bench["results"]]}
    write_json_atomic(args.folder / "levers.json", record)
    chart(table, args.folder / "levers.png")
    for r in table:
        print(f"{r['num_envs']:>5} {r['run']:<16} {r['env_steps_per_s'] / 1e3:6.1f} k env-steps/s  iteration "
              f"{r['iteration_ms']:6.2f} ms  update {r['update_ms']:6.2f} ms  env step {r['env_step_ms']:6.2f} ms "
              f"({r['env_step_over_alone']}x alone)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
