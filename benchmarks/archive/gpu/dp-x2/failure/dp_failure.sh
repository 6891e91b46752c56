#!/usr/bin/env bash
# On nvidia-h200-x2 (through bootstrap.sh): the data-parallel lifecycle on two GPUs with NCCL (the
# runtime's defaults), on the cart-pole with a CUDA learner (no assets, no kernel compile): a clean
# two-rank run, then one whose rank 1 collector is killed at iteration 100. Each run's summary, exit
# code, wall time and what was left behind (GPU processes, /dev/shm segments) go to $OUT/dp-failure.json.
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
common=(--algo sac --task cartpole_swingup --sim mujoco training.device=cuda algo.num_envs=64 algo.batch_size=256)
python3 - "$out" "${common[@]}" <<'PY'
import json, os, subprocess, sys, time, glob
out, args = sys.argv[1], sys.argv[2:]
record = {"command": "bash scripts/gpu/bootstrap.sh bash benchmarks/archive/gpu/dp-x2/failure/dp_failure.sh", "runs": {}}
for name, extra, fault in (("clean", ["algo.max_iterations=300"], None),
                           ("rank1_collector_killed", ["algo.max_iterations=100000"], "kill_collector@100:1")):
    env = dict(os.environ, SOAKLAB_TORCH_COMPILE="0")
    env.pop("SOAKLAB_FAULT", None)
    if fault:
        env["SOAKLAB_FAULT"] = fault
    run_dir = f"/tmp/dp-{name}"
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "soaklab", "train", *args, *extra, f"training.log_dir={run_dir}"],
                          env=env, capture_output=True, text=True, timeout=400)
    wall = time.monotonic() - t0
    summary = json.load(open(f"{run_dir}/run_summary.json"))
    m = summary["runtime_manifest"]
    gpu_procs = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                               capture_output=True, text=True).stdout.split()
    record["runs"][name] = {
        "fault": fault, "exit_code": done.returncode, "wall_s": round(wall, 1),
        "classification": m["shutdown"]["classification"], "owner": m["shutdown"]["owner"],
        "iterations": summary["completed_iterations"], "ranks": m["data_parallel"]["ranks"],
        "dp_sync": m["data_parallel"]["dp_sync"], "nccl_environment": m["data_parallel"]["nccl_environment"],
        "gpu_processes_after": gpu_procs, "dev_shm_soaklab_after": sorted(glob.glob("/dev/shm/soaklab*")),
        "stderr_tail": done.stderr[-1500:], "stdout_tail": done.stdout[-800:]}
json.dump(record, open(f"{out}/dp-failure.json", "w"), indent=2)
print(json.dumps({k: {x: v[x] for x in ("exit_code", "wall_s", "classification", "owner", "iterations",
                                         "gpu_processes_after", "dev_shm_soaklab_after")}
                  for k, v in record["runs"].items()}, indent=1))
PY
