#!/usr/bin/env python3
"""Issue 28's refusals, shown on real files: one small soak, then every class of bad input against
it (outputs over inputs, paths the collector could not load, an edited run record, another run's
checkpoint), each with its command, exit code and one-line message, and the run's evidence hashed
before and after. The transcript is docs/examples/refusals.txt.

    .venv/bin/python scripts/refusals.py --out docs/examples/refusals.txt   # about a minute
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
G1_WHEEL = REPO / "resources" / "assets" / "cache" / "mjlab-1.6.0-py3-none-any.whl"  # the pinned model
# Eager task terms: the same code without a compile wait; the small soak is the tests' own budget.
ENV = dict(os.environ, SOAKLAB_TORCH_COMPILE="0", PYTHONPATH=str(REPO / "src"))
CARTPOLE = ("--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco")
G1 = ("--algo", "flashsac", "--task", "g1_motion_tracking", "--sim", "mujoco")
SMALL = ("algo.learning_starts=4", "algo.batch_size=32", "algo.actor_hidden=32", "algo.critic_hidden=32")


def soaklab(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soaklab", *map(str, args)], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=900)


def digest(*roots: Path) -> str:
    """One sha256 over every file's path and bytes under `roots` (files or folders)."""
    h = hashlib.sha256()
    for root in roots:
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if path.is_file():
                h.update(str(path).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def shown(base: Path, args: tuple[object, ...]) -> str:
    return "soaklab " + " ".join(shlex.quote(str(a).replace(str(base), "$W")) for a in args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the transcript to write")
    args = parser.parse_args()
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="soaklab-refusals-") as tmp:
        base = Path(tmp)
        run, soak, metrics = base / "run", base / "soak.json", base / "metrics.json"
        made = soaklab("soak", *CARTPOLE, "--num-envs", "8", "--iterations", "20", "--min-duration-seconds", "1",
                       "--sample-interval-seconds", "0.25", "--startup-timeout-seconds", "120",
                       "--stale-progress-seconds", "60", "--post-shutdown-grace-seconds", "2",
                       *[a for o in SMALL for a in ("--extra-override", o)],
                       "--log-dir", run, "--output", soak, cwd=base)
        if made.returncode != 0:
            print(made.stdout + made.stderr, file=sys.stderr)
            return 1
        assert soaklab("metrics", run, "--out", metrics, cwd=base).returncode == 0
        other = base / "other-run"
        assert soaklab("train", *CARTPOLE, "algo.num_envs=8", "algo.max_iterations=10", "algo.seed=2", *SMALL,
                       f"training.log_dir={other}", cwd=base).returncode == 0
        pulled = soaklab("assets", "pull", "--source", G1_WHEEL, "--clip", "synthetic", cwd=base)
        if pulled.returncode != 0:
            print(pulled.stdout + pulled.stderr, file=sys.stderr)
            return 1
        manifest = base / "results" / "assets" / "manifest.json"
        elsewhere = base / "elsewhere"
        elsewhere.mkdir()
        (base / "link").symlink_to(run)
        (base / "notes.txt").write_text("not a clip")
        np.savez(base / "other.npz", weights=np.zeros(3))
        record = base / "edited" / "run_config.json"
        record.parent.mkdir()
        assert soaklab("config", "resolve", *CARTPOLE, "algo.num_envs=8", f"training.log_dir={base / 'never'}",
                       "--out", record, cwd=base).returncode == 0
        edits: dict[str, Callable[[dict], None]] = {
            "algo.num_envs=-5": lambda r: r["overrides"].update({"algo.num_envs": -5}),
            "algo.batch_size='lots'": lambda r: r["overrides"].update({"algo.batch_size": "lots"}),
            "algo.no_such_key=1": lambda r: r["overrides"].update({"algo.no_such_key": 1}),
            "config.algo.batch_size=7": lambda r: r["config"]["algo"].update({"batch_size": 7}),
        }
        evidence = (run, soak, metrics, other)
        before = digest(*evidence)
        events = next(run.glob("events.out.tfevents.*"))
        cases: list[tuple[str, tuple[object, ...]]] = [
            ("outputs over inputs", ("metrics", run, "--out", run / "run_summary.json")),
            ("outputs over inputs", ("metrics", run, "--out", base / "m.json", "--csv", events)),
            ("outputs over inputs", ("metrics", run, "--out", base / "link" / "progress.json")),
            ("outputs over inputs", ("metrics", run, "--out", base / "m.json", "--plot",
                                     run / ".." / "run" / "checkpoints" / "x.png")),
            ("outputs over inputs", ("validate", "--soak", soak, "--run-dir", run, "--out", soak)),
            ("outputs over inputs", ("validate", "--soak", soak, "--run-dir", run, "--metrics", metrics,
                                     "--out", base / "v.json", "--html", metrics)),
            ("paths checked before spawning", ("train", *G1, f"env.motion={base / 'nonexistent.npz'}",
                                               f"training.log_dir={base / 'g1-run'}")),
            ("paths checked before spawning", ("config", "resolve", *G1, f"env.motion={base / 'notes.txt'}",
                                               "--out", base / "rc.json")),
            ("paths checked before spawning", ("config", "resolve", *G1, "--assets-manifest", manifest,
                                               f"env.motion={base / 'other.npz'}", "--out", base / "rc.json")),
            ("paths checked before spawning", ("config", "resolve", *G1, "--assets-manifest",
                                               base / "missing" / "manifest.json", "--out", base / "rc.json")),
            ("paths checked before spawning (run from $W/elsewhere)",
             ("train", *G1, "--assets-manifest", manifest, f"training.log_dir={base / 'g1-run'}")),
            ("another run's checkpoint", ("export", run, "--checkpoint", other / "checkpoints" / "model_final.pt",
                                          "--out", base / "p.onnx")),
        ]
        lines.append("# Issue 28's refusals on real files (scripts/refusals.py); $W is the scratch folder.")
        lines.append("# evidence: G1 assets pulled into $W (results/assets/manifest.json), a 20-iteration cart-pole "
                     f"soak ($W/run, $W/soak.json, $W/metrics.json) and a second run ($W/other-run); sha256 before: "
                     f"{before}")
        lines.append(f"# a clean run ends clean: the soak's console carries "
                     f"{(made.stdout + made.stderr).count('leaked semaphore')} 'leaked semaphore' warning(s)")
        for label, argv in cases:
            lines += outcome(base, label, argv, soaklab(*argv, cwd=elsewhere if "elsewhere" in label else base))
        for words, edit in edits.items():
            edited = json.loads(record.read_text())
            edit(edited)
            copy = base / "edited" / f"{len(lines)}.json"
            copy.write_text(json.dumps(edited, indent=2))
            argv = ("train", "--run-config", copy)
            lines += outcome(base, f"an edited run record ({words})", argv, soaklab(*argv, cwd=base))
        after = digest(*evidence)
        spawned = sorted(p.name for p in base.iterdir() if p.name in {"g1-run", "never", "rc.json", "m.json", "v.json",
                                                                      "p.onnx"})
        lines.append(f"# sha256 after: {after} ({'unchanged' if after == before else 'CHANGED'}); "
                     f"outputs or run dirs the refused commands made: {spawned or 'none'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if after == before and not spawned else 1


def outcome(base: Path, label: str, argv: tuple[object, ...], done: subprocess.CompletedProcess) -> list[str]:
    err = done.stderr.strip().splitlines()
    return [f"\n## {label}", f"$ {shown(base, argv)}",
            f"exit {done.returncode}; {len(err)} stderr line(s)",
            *(line.replace(str(base), "$W") for line in err[-3:])]


if __name__ == "__main__":
    sys.exit(main())
