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

from soaklab.errors import InvalidInput

BENCHMARK = "unitree_g1_flat"
# benchmarks/run.py's flags for every benchmark (its nightly), beside the benchmark's own settings
NIGHTLY_FLAGS = ("--format=json", "--event_trace=true", "--memory=true", "--measure_solver=true",
                 "--measure_alloc=true")
MESHES = "mjlab/asset_zoo/robots/unitree_g1/xmls/assets/"
SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.STL$")
# what stage_mjw_g1.sh stages, each checked against SOURCE.json: nothing else is read from the folder
STAGED = ("scene_flat.xml", "unitree_g1_mjlab.xml", "shuffle_dance.npz", "__init__.py")
MODEL = "unitree_g1_mjlab.xml"  # the model upstream's scenes include
COUNTS = ("nworld", "nconmax", "njmax", "nstep")  # the benchmark's settings testspeed is given
WORK_MARK = ".mjw_g1-work"  # --work is emptied only where this script made it
RESTAGE = "stage it again: bash scripts/gpu/stage_mjw_g1.sh GIT_DIR"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_source(staged: Path) -> dict[str, Any]:
    """SOURCE.json, its digests naming exactly the staged files, each file the one staged."""
    path = staged / "SOURCE.json"
    try:
        source = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"{path}: unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                           f"{RESTAGE}") from None
    digests = source.get("sha256") if isinstance(source, dict) else None
    if not isinstance(digests, dict) or sorted(digests) != sorted(STAGED) \
            or not all(isinstance(v, str) for v in digests.values()):
        raise InvalidInput(f"{path}: sha256 must name exactly {', '.join(STAGED)} (digests as strings); {RESTAGE}")
    for name in STAGED:
        file = staged / name
        if file.is_symlink() or not file.is_file():
            raise InvalidInput(f"{file}: missing, or not a plain file; {RESTAGE}")
        if sha256(file) != digests[name]:
            raise InvalidInput(f"{file}: not the file stage_mjw_g1.sh staged (sha256 differs); {RESTAGE}")
    return source


def settings(init_py: Path, name: str = BENCHMARK) -> dict[str, Any]:
    """The benchmark's settings from upstream's __init__.py, read (never run): its plain values only,
    its files among the staged ones and its counts positive integers."""
    try:
        tree = ast.parse(init_py.read_bytes(), filename=str(init_py))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise InvalidInput(f"{init_py}: not upstream's benchmark list ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}); {RESTAGE}") from None
    found = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BENCHMARKS" for t in node.targets):
            for entry in getattr(node.value, "elts", []):
                if not isinstance(entry, ast.Dict):
                    continue
                plain = {k.value: v.value for k, v in zip(entry.keys, entry.values, strict=True)
                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
                if plain.get("name") == name:
                    found = plain
    if found is None:
        raise InvalidInput(f"{init_py}: no benchmark named {name} in BENCHMARKS (plain values); {RESTAGE}")
    for key, staged in (("mjcf", STAGED[0]), ("replay", STAGED[2])):  # the files stage_mjw_g1.sh took
        if found.get(key) != staged:
            raise InvalidInput(f"{init_py}: {name}'s {key} is {found.get(key)!r}, not the staged {staged}")
    for key in COUNTS:
        value = found.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"{init_py}: {name}'s {key} is {value!r}, not a positive integer")
    if "nworld" not in found:
        raise InvalidInput(f"{init_py}: {name} names no nworld; {RESTAGE}")
    return found


def pinned_wheel(cache: Path) -> Path:
    """The pinned mjlab wheel (its sha256 the pin's): the meshes are taken from nothing else."""
    from soaklab.assets.source import G1_WHEEL

    wheel = cache / f"{G1_WHEEL.package}-{G1_WHEEL.version}-py3-none-any.whl"
    if not wheel.is_file():
        raise InvalidInput(f"{wheel}: missing; carry the pinned mjlab wheel (scripts/gpu/README.md, step 3)")
    if sha256(wheel) != G1_WHEEL.sha256:
        raise InvalidInput(f"{wheel}: not the pinned wheel (sha256 differs from {G1_WHEEL.sha256[:12]}...); "
                           "copy it again from resources/assets/cache")
    return wheel


def fresh_work(work: Path) -> None:
    """--work emptied, where this script made it; any other folder that holds files is refused."""
    if work.is_symlink() or (work.exists() and not work.is_dir()):
        raise InvalidInput(f"--work {work}: not a folder")
    if work.exists() and any(work.iterdir()):
        if not (work / WORK_MARK).is_file():
            raise InvalidInput(f"--work {work}: a folder this script did not make (no {WORK_MARK}); "
                               "name a new or empty folder")
        shutil.rmtree(work)
    (work / "assets").mkdir(parents=True, exist_ok=True)
    (work / WORK_MARK).touch()


# MJCF attributes that name a file or folder MuJoCo reads: each must stay inside the work folder.
# `file` and its cube-texture sides (fileright, fileleft, fileup, filedown, filefront, fileback):
# every attribute whose name starts with "file"; and the compiler's folders.
FILE_PREFIX = "file"
DIR_ATTRIBUTES = ("meshdir", "texturedir", "assetdir")
FILE_VALUE = re.compile(r"(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_./-]*")  # whole value (match's $ let "x\n" by)


def check_references(xml: Path) -> None:
    """Refuse, in one line, a staged MJCF that names a file or folder outside the benchmark's folder
    (an absolute path, a '..', an odd character): MuJoCo would read what it names as it compiles."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml.read_text())
    except (OSError, UnicodeDecodeError, ET.ParseError) as exc:
        raise InvalidInput(f"{xml}: not an MJCF file ({exc}); {RESTAGE}") from None
    for element in root.iter():
        for attribute, value in element.attrib.items():
            if (attribute.startswith(FILE_PREFIX) or attribute in DIR_ATTRIBUTES) and not FILE_VALUE.fullmatch(value):
                raise InvalidInput(f"{xml}: <{element.tag} {attribute}={value!r}> names a path outside the benchmark's "
                                   f"folder (plain relative names only); {RESTAGE}")


def assemble(staged: Path, wheel: Path, work: Path, bench: dict[str, Any]) -> Path:
    """The benchmark's folder: upstream's files as staged (read_source checked them) and the meshes
    from the pinned mjlab wheel (plain file names only). Returns the scene's path."""
    for name in (bench["mjcf"], MODEL):
        check_references(staged / name)
    fresh_work(work)
    for name in dict.fromkeys((bench["mjcf"], MODEL, bench["replay"])):
        shutil.copyfile(staged / name, work / name)
    meshes = 0
    try:
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.namelist():
                base = member[len(MESHES):] if member.startswith(MESHES) else ""
                if SAFE_NAME.match(base):
                    (work / "assets" / base).write_bytes(zf.read(member))
                    meshes += 1
    except (zipfile.BadZipFile, OSError) as exc:
        raise InvalidInput(f"{wheel}: not a readable wheel ({exc})") from None
    if not meshes:
        raise InvalidInput(f"{wheel}: no meshes under {MESHES}")
    return work / bench["mjcf"]


def model_facts(scene: Path) -> dict[str, Any]:
    import mujoco

    try:
        m = mujoco.MjModel.from_xml_path(str(scene))
    except ValueError as exc:  # a mesh the wheel lacks, a file the scene names that is not there
        raise InvalidInput(f"{scene}: mujoco does not compile it ({str(exc).strip().splitlines()[0]})") from None
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
    try:
        return {"command": cmd, **json.loads(lines[-1])}
    except ValueError as exc:  # a line that looked like its JSON and was not: the run is kept, its log says
        return {"command": cmd, "error": f"its last JSON line is not JSON ({exc}); see {log}"}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--staged", type=Path, default=Path(".device/mjw_g1"))
    parser.add_argument("--work", type=Path, default=Path("/root/mjw-g1"),
                        help=f"a new or empty folder, or one this script made (it holds {WORK_MARK})")
    parser.add_argument("--worlds", type=positive, default=None, help="default: the benchmark's nworld")
    parser.add_argument("--dry-run", action="store_true", help="assemble, compile the model, print the commands")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        return run(args)
    except InvalidInput as exc:  # one line, exit 2: the staged folder, the wheel or --work refused
        print(f"mjw_g1: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    if not args.out.parent.is_dir():
        raise InvalidInput(f"--out {args.out}: its folder {args.out.parent} does not exist")
    if not (args.staged / "SOURCE.json").is_file():
        raise InvalidInput(f"{args.staged}: nothing staged (bash scripts/gpu/stage_mjw_g1.sh GIT_DIR)")
    source = read_source(args.staged)
    bench = settings(args.staged / "__init__.py")
    if args.worlds:
        bench["nworld"] = args.worlds
    wheel = pinned_wheel(Path("resources/assets/cache"))
    scene = assemble(args.staged, wheel, args.work, bench)
    result: dict[str, Any] = {"benchmark": BENCHMARK, "settings": bench, "source": source,
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
