"""This visit's A/B and side-by-side in one JSON: medians of each side's runs, the lever's gain, and
soaklab's env step against mjlab's at 4096 envs (both alone, both timed with CUDA events).

    python benchmarks/visits/2026-12-06-levers/summarise.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def figures(path: Path) -> dict[str, float]:
    record = json.loads(path.read_text())
    mjwarp = next(r for r in record["results"] if r["backend"] == "mjwarp")
    return {"env_steps_per_s": mjwarp["throughput_env_control_steps_per_s"],
            "env_step_ms": mjwarp["phases"]["iteration_ms"], "physics_ms": mjwarp["phases"]["physics_ms"],
            "task_ms": mjwarp["phases"]["task_ms"],
            "ceiling_from_env_states_env_steps_per_s": mjwarp["raw_physics_ceiling_env_steps_per_s"],
            "free_running_ceiling_env_steps_per_s": mjwarp["raw"]["free_running_env_steps_per_s"]}


def main() -> None:
    sides: dict[str, dict[str, list[dict[str, float]]]] = {}
    for path in sorted((HERE / "ab").glob("*.json")):
        side, envs, _ = path.stem.split("-")
        sides.setdefault(envs, {}).setdefault(side, []).append(figures(path))
    out: dict[str, object] = {"command": "python benchmarks/visits/2026-12-06-levers/summarise.py",
                              "device": "NVIDIA H100 80GB HBM3", "sizes": {}}
    for envs, by_side in sorted(sides.items(), key=lambda kv: int(kv[0])):
        medians = {side: {k: statistics.median(run[k] for run in runs) for k in runs[0]} | {"runs": len(runs)}
                   for side, runs in by_side.items()}
        base, lever = medians["base"], medians["lever"]
        medians["lever_gain"] = lever["env_steps_per_s"] / base["env_steps_per_s"] - 1
        for side in ("base", "lever"):
            m = medians[side]
            m["env_over_ceiling_from_env_states"] = m["env_steps_per_s"] / m["ceiling_from_env_states_env_steps_per_s"]
            m["env_over_free_running_ceiling"] = m["env_steps_per_s"] / m["free_running_ceiling_env_steps_per_s"]
        out["sizes"][envs] = medians
    mjlab = json.loads((HERE / "mjlab_env_4096.json").read_text())["results"]
    at4096 = out["sizes"]["4096"]
    theirs = mjlab["env_steps_per_s"]
    out["side_by_side_4096"] = {"mjlab_env_steps_per_s": theirs, "mjlab_env_step_ms": mjlab["env_step_ms_median"],
                                "soaklab_over_mjlab_base": at4096["base"]["env_steps_per_s"] / theirs,
                                "soaklab_over_mjlab_lever": at4096["lever"]["env_steps_per_s"] / theirs}
    (HERE / "summary.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
