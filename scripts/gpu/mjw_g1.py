#!/usr/bin/env python3
"""On the GPU machine: soaklab's point on mujoco_warp's public unitree_g1 curve (issue 68, item 3).

mujoco_warp's own `unitree_g1_flat` benchmark (its scene, model, control replay and settings, staged
from a mujoco_warp repository by scripts/gpu/stage_mjw_g1.sh into .device/mjw_g1/) is run with the
installed mujoco_warp's `testspeed`, twice: with the flags of upstream's benchmarks/run.py (event
trace, memory, solver and allocation reports: how its nightly curve is made) and plain. Beside it,
on the same GPU and at the same worlds, soaklab's raw physics ceiling (scripts/gpu/warmup.py: the G1
tracking scene's control step captured) and soaklab's env step alone (scripts/gpu/library_world.py,
one clip). The JSON gives each rate and soaklab's env step as a fraction of both.

    bash scripts/gpu/bootstrap.sh python3 scripts/gpu/mjw_g1.py --out "$OUT/mjw_g1.json"

The benchmark's meshes are visual only (density 0, contype 0) and come from mujoco_menagerie
upstream, which this machine cannot reach: the 35 files of the same names are taken from the pinned
mjlab wheel (its G1 is the model upstream's is derived from). `--dry-run` assembles and compiles the
model and prints the commands (any machine).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

BENCHMARK = "unitree_g1_flat"
# benchmarks/run.py's flags for every benchmark (its nightly), beside the benchmark's own settings
NIGHTLY_FLAGS = ("--format=json", "--event_trace=true", "--memory=true", "--measure_solver=true",
                 "--measure_alloc=true")
MESHES = "mjlab/asset_zoo/robots/unitree_g1/xmls/assets/"
SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.STL$")


def settings(init_py: Path, name: str = BENCHMARK) -> dict[str, Any]:
    """The benchmark's settings from upstream's __init__.py, read (never run): its plain values only."""
    tree = ast.parse(init_py.read_text(), filename=str(init_py))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BENCHMARKS" for t in node.targets):
            for entry in getattr(node.value, "elts", []):
                if not isinstance(entry, ast.Dict):
                    continue
                plain = {k.value: v.value for k, v in zip(entry.keys, entry.values, strict=True)
                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
                if plain.get("name") == name:
                    return plain
    raise SystemExit(f"mjw_g1: {init_py}: no benchmark named {name} in BENCHMARKS")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assemble(staged: Path, wheel: Path, work: Path, bench: dict[str, Any]) -> Path:
    """The benchmark's folder: upstream's files as staged (checked against SOURCE.json) and the
    meshes from the mjlab wheel (plain file names only). Returns the scene's path."""
    source = json.loads((staged / "SOURCE.json").read_text())
    for name, digest in source["sha256"].items():
        if sha256(staged / name) != digest:
            raise SystemExit(f"mjw_g1: {staged / name}: not the file stage_mjw_g1.sh staged (sha256 differs)")
    if work.exists():
        shutil.rmtree(work)
    (work / "assets").mkdir(parents=True)
    for name in (bench["mjcf"], "unitree_g1_mjlab.xml", bench["replay"]):
        shutil.copyfile(staged / name, work / name)
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if not member.startswith(MESHES) or member.endswith("/"):
                continue
            base = member[len(MESHES):]
            if SAFE_NAME.match(base):
                (work / "assets" / base).write_bytes(zf.read(member))
    return work / bench["mjcf"]


def model_facts(scene: Path) -> dict[str, Any]:
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(scene))
    return {"nv": m.nv, "nu": m.nu, "ngeom": m.ngeom, "timestep": m.opt.timestep, "iterations": m.opt.iterations,
            "ls_iterations": m.opt.ls_iterations, "integrator": int(m.opt.integrator),
            "jacobian": int(m.opt.jacobian), "cone": int(m.opt.cone)}


def testspeed(scene: Path, bench: dict[str, Any], flags: tuple[str, ...], log: Path) -> dict[str, Any]:
    """One run of the installed mujoco_warp's testspeed; its JSON line."""
    cmd = [sys.executable, "-m", "mujoco_warp.testspeed", str(scene), *flags]
    for key in ("nworld", "nconmax", "njmax", "nstep"):
        if key in bench:
            cmd.append(f"--{key}={bench[key]}")
    cmd.append(f"--replay={scene.parent / bench['replay']}")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log.write_text(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"command": cmd, "error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-600:]}"}
    return {"command": cmd, **json.loads(lines[-1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--staged", type=Path, default=Path(".device/mjw_g1"))
    parser.add_argument("--work", type=Path, default=Path("/root/mjw-g1"))
    parser.add_argument("--worlds", type=int, default=None, help="default: the benchmark's nworld")
    parser.add_argument("--dry-run", action="store_true", help="assemble, compile the model, print the commands")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not (args.staged / "SOURCE.json").is_file():
        print(f"mjw_g1: {args.staged}: nothing staged (bash scripts/gpu/stage_mjw_g1.sh GIT_DIR)", file=sys.stderr)
        return 2
    bench = settings(args.staged / "__init__.py")
    if args.worlds:
        bench["nworld"] = args.worlds
    wheel = next(Path("resources/assets/cache").glob("mjlab-*.whl"), None)
    if wheel is None:
        print("mjw_g1: no mjlab wheel in resources/assets/cache (scripts/gpu/README.md, step 3)", file=sys.stderr)
        return 2
    scene = assemble(args.staged, wheel, args.work, bench)
    result: dict[str, Any] = {"benchmark": BENCHMARK, "settings": bench,
                              "source": json.loads((args.staged / "SOURCE.json").read_text()),
                              "meshes_from": wheel.name, "model": model_facts(scene)}
    import mujoco_warp

    result["mujoco_warp_installed"] = getattr(mujoco_warp, "__version__", None)
    n = bench["nworld"]
    runs = {"nightly_flags": NIGHTLY_FLAGS, "plain": ("--format=json",)}
    soaklab = {"ceiling": [sys.executable, "scripts/gpu/warmup.py", "--worlds", str(n),
                           "--out", str(args.work / "ceiling.json")],
               "env_step": [sys.executable, "scripts/gpu/library_world.py", "--envs", str(n), "--layouts",
                            "one_clip", "--assets", str(args.work / "soaklab-assets"),
                            "--out", str(args.work / "env_step.json")]}
    if args.dry_run:
        result["would_run"] = {**{k: ["testspeed", *v] for k, v in runs.items()}, **soaklab}
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    import torch

    result["device"] = torch.cuda.get_device_name(0)
    for name, flags in runs.items():
        result[f"mujoco_warp_{name}"] = testspeed(scene, bench, flags, args.work / f"testspeed-{name}.log")
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, cmd in soaklab.items():
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        (args.work / f"{name}.log").write_text(proc.stdout + proc.stderr)
        result[f"soaklab_{name}_exit"] = proc.returncode
    ceiling = json.loads((args.work / "ceiling.json").read_text())["runs"][0] \
        if (args.work / "ceiling.json").is_file() else None
    env = json.loads((args.work / "env_step.json").read_text())["runs"][0] \
        if (args.work / "env_step.json").is_file() else None
    result["soaklab_ceiling"], result["soaklab_env_step"] = ceiling, env
    upstream = result["mujoco_warp_plain"].get("steps_per_second")
    nightly = result["mujoco_warp_nightly_flags"].get("steps_per_second")
    if env and ceiling:
        decimation = round(ceiling["physics_steps_per_s"] / ceiling["env_steps_per_s"])
        env_physics = env["env_steps_per_s"] * decimation  # physics steps per second inside the env step
        result["fractions"] = {
            "decimation": decimation,
            "env_physics_steps_per_s": env_physics,
            "env_of_mujoco_warp_plain": env_physics / upstream if upstream else None,
            "env_of_mujoco_warp_nightly_flags": env_physics / nightly if nightly else None,
            "env_of_soaklab_ceiling": env["env_steps_per_s"] / ceiling["env_steps_per_s"],
            "soaklab_ceiling_of_mujoco_warp_plain": ceiling["physics_steps_per_s"] / upstream if upstream else None,
        }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result.get("fractions"), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
