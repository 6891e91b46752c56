#!/usr/bin/env bash
# On nvidia-h200-x2 (through bootstrap.sh; no warp needed: carry .device/wheels and .device/install.sh):
# where the two-rank NCCL failure path spends its time. The run of dp_failure.sh whose rank 1
# collector is killed at iteration 100, with every output line timestamped, and every soaklab process
# of the run asked for its threads' stacks (SIGUSR1, soaklab.host.lifetime) every 5 s from the first
# progress line on, each dump headed by the pid and its place in the tree. $OUT/dp-failure-trace[-VARIANT].log and .json.
# TRACE_VARIANTS="name:K=V,K=V name2:..." runs it once per variant with those environment variables
# (default: one run as the runtime sets it up).
set -uo pipefail
out=${OUT:-/tmp/soaklab-out}
args=(--algo sac --task cartpole_swingup --sim mujoco training.device=cuda algo.num_envs=64 algo.batch_size=256
      algo.max_iterations=100000)
for variant in ${TRACE_VARIANTS:-default:}; do
python3 - "$out" "$variant" "${args[@]}" <<'PY'
import glob, json, os, signal, subprocess, sys, threading, time
import psutil
out, variant, args = sys.argv[1], sys.argv[2], sys.argv[3:]
name, _, assignments = variant.partition(":")
extra = dict(a.split("=", 1) for a in assignments.split(",") if a)
env = dict(os.environ, SOAKLAB_TORCH_COMPILE="0", SOAKLAB_FAULT="kill_collector@100:1", PYTHONUNBUFFERED="1", **extra)
run_dir = f"/tmp/dp-trace-{name}"
suffix = "" if name == "default" else f"-{name}"
log = open(f"{out}/dp-failure-trace{suffix}.log", "w")
lock = threading.Lock()
t0 = time.monotonic()
def write(line):
    with lock:
        log.write(f"{time.monotonic() - t0:8.2f} {line}")
        log.flush()
proc = subprocess.Popen([sys.executable, "-m", "soaklab", "train", *args, f"training.log_dir={run_dir}"], env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
# SIGUSR1 kills a process that has not registered the dump yet: dump only once every process is up
# (the first progress line), and never the multiprocessing resource trackers.
started = threading.Event()
def read():
    for line in proc.stdout:
        write(line)
        if "| it 1/" in line or " it 1/" in line:
            started.set()
reader = threading.Thread(target=read, daemon=True)
reader.start()
dumps, next_dump = 0, None
while proc.poll() is None and time.monotonic() - t0 < 300:
    if next_dump is None and started.is_set():
        next_dump = time.monotonic() - t0
    if next_dump is not None and time.monotonic() - t0 >= next_dump:
        try:
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        for p in tree:
            try:
                if "resource_tracker" in " ".join(p.cmdline()):
                    continue
                write(f"=== dump {dumps}: pid {p.pid} ppid {p.ppid()} {' '.join(p.cmdline())[-90:]}\n")
                os.kill(p.pid, signal.SIGUSR1)
            except (psutil.NoSuchProcess, ProcessLookupError):
                continue
            time.sleep(0.5)  # one process's stacks at a time in the shared log
        dumps += 1
        next_dump += 5.0
    time.sleep(0.1)
if proc.poll() is None:
    proc.kill()
code = proc.wait()
reader.join(5)
wall = time.monotonic() - t0
gpu_procs = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                           capture_output=True, text=True).stdout.split()
record = {"command": "bash scripts/gpu/bootstrap.sh bash benchmarks/archive/gpu/dp-x2/failure/dp_failure_trace.sh", "variant": name,
          "environment": extra, "exit_code": code,
          "wall_s": round(wall, 1), "dumps": dumps, "gpu_processes_after": gpu_procs,
          "dev_shm_soaklab_after": sorted(glob.glob("/dev/shm/soaklab*"))}
try:
    shutdown = json.load(open(f"{run_dir}/run_summary.json"))["runtime_manifest"]["shutdown"]
    record.update(classification=shutdown["classification"], owner=shutdown["owner"])
except (OSError, ValueError, KeyError) as err:
    record["summary_error"] = str(err)
json.dump(record, open(f"{out}/dp-failure-trace{suffix}.json", "w"), indent=2)
print(json.dumps(record, indent=1))
PY
done
