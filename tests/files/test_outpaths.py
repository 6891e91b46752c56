"""Outputs never overwrite inputs: every writing command refuses, in one exit-2 line naming both
paths, an output that is (or is inside) one of its inputs, directly, through a symlink or a `..`
path, and the run's evidence is byte for byte what it was."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.soak.conftest import EXTRA, QUICK_BUDGET


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def soaklab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soaklab", *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, SOAKLAB_TORCH_COMPILE="0"))


@pytest.fixture(scope="module")
def soaked(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A real soak of the small control task: (its folder, the run dir, the soak JSON), with metrics."""
    base = tmp_path_factory.mktemp("soaked")
    run_dir, soak = base / "run", base / "soak.json"
    done = soaklab("soak", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco", "--num-envs", "8",
                   "--iterations", "20", *[a for k, v in QUICK_BUDGET.items() for a in (f"--{k}", str(v))],
                   *[a for o in EXTRA for a in ("--extra-override", o)], "--log-dir", run_dir, "--output", soak)
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = soaklab("metrics", run_dir, "--out", base / "metrics.json")
    assert metrics.returncode == 0, metrics.stderr
    return base, run_dir, soak


def event_file(run_dir: Path) -> Path:
    return next(run_dir.glob("events.out.tfevents.*"))


CASES = {
    "metrics --out over run_summary.json": lambda b, r, s: (
        ["metrics", r, "--out", r / "run_summary.json"], "--out", "is inside the input RUN_DIR"),
    "metrics --csv over the event file": lambda b, r, s: (
        ["metrics", r, "--out", b / "m.json", "--csv", event_file(r)], "--csv", "is inside the input RUN_DIR"),
    "metrics --out through a symlink to the run dir": lambda b, r, s: (
        ["metrics", r, "--out", b / "link" / "progress.json"], "--out", "is inside the input RUN_DIR"),
    "metrics --plot through a .. path": lambda b, r, s: (
        ["metrics", r, "--out", b / "m.json", "--plot", r / ".." / r.name / "checkpoints" / "x.png"], "--plot",
        "is inside the input RUN_DIR"),
    "metrics --csv the same as --out": lambda b, r, s: (
        ["metrics", r, "--out", b / "m.json", "--csv", b / "." / "m.json"], "--csv", "is also --out"),
    "validate --out over the soak JSON": lambda b, r, s: (
        ["validate", "--soak", s, "--run-dir", r, "--out", s], "--out", "is the input --soak"),
    "validate --html over the metrics JSON through a symlink": lambda b, r, s: (
        ["validate", "--soak", s, "--run-dir", r, "--metrics", b / "metrics.json", "--out", b / "v.json",
         "--html", b / "metrics-link.json"], "--html", "is the input --metrics"),
    "validate --out inside the run dir": lambda b, r, s: (
        ["validate", "--soak", s, "--run-dir", r, "--out", r / "validation.json"], "--out",
        "is inside the input --run-dir"),
    "play --out whose record beside it would be the run's progress.json": lambda b, r, s: (
        ["play", r, "--out", r / "progress.mp4"], "(beside --out) progress.json", "evidence of the run"),
    "play through a symlink, its record over run_summary.json": lambda b, r, s: (
        ["play", r, "--out", b / "link" / "run_summary.mp4"], "(beside --out) run_summary.json",
        "evidence of the run"),
    "record verdict --out over its comparison": lambda b, r, s: (
        ["record", "verdict", b / "metrics.json", "--out", b / "metrics.json"], "--out", "is the input COMPARISON"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_output_over_an_input_is_refused_and_nothing_changes(soaked, case):
    base, run_dir, soak = soaked
    (base / "link").unlink(missing_ok=True)
    (base / "link").symlink_to(run_dir)
    (base / "metrics-link.json").unlink(missing_ok=True)
    (base / "metrics-link.json").symlink_to(base / "metrics.json")
    before = digest(base)
    args, flag, words = CASES[case](base, run_dir, soak)
    done = soaklab(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and words in lines[0], lines
    assert digest(base) == before


def test_outputs_beside_the_inputs_are_written(soaked, tmp_path):
    base, run_dir, soak = soaked
    out = tmp_path / "validation.json"
    done = soaklab("validate", "--soak", soak, "--run-dir", run_dir, "--metrics", base / "metrics.json", "--out", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(out.read_text())["status"] == "passed"


def test_every_declared_path_is_an_argument_of_its_command():
    """The table main checks names real arguments: a renamed flag cannot silently drop its check."""
    import argparse

    from soaklab.cli import READS_WRITES, build_parser
    from soaklab.files.outpaths import dest

    def parsers(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield sub
                    yield from parsers(sub)

    checked = set()
    for sub in parsers(build_parser()):
        func = sub.get_default("func")
        if func in READS_WRITES:
            dests = {a.dest for a in sub._actions}
            for flag in (*READS_WRITES[func][0], *READS_WRITES[func][1]):
                assert dest(flag) in dests, (sub.prog, flag)
            checked.add(func)
    assert checked == set(READS_WRITES)


def test_what_export_wrote_into_a_run_dir_it_may_write_again(tmp_path):
    """A run's post-training export left policy.onnx, its parity and its contract JSON: exporting
    into the run dir again replaces them (the run's own files stay refused)."""
    from soaklab.errors import InvalidInput
    from soaklab.files.outpaths import refuse_over_evidence

    for name in ("policy.onnx", "policy.parity.json", "policy.contract.json", "run_summary.json"):
        (tmp_path / name).write_text("{}")
    refuse_over_evidence("RUN_DIR", tmp_path, {name: tmp_path / name for name in
                                               ("policy.onnx", "policy.parity.json", "policy.contract.json")})
    with pytest.raises(InvalidInput, match="evidence of the run"):
        refuse_over_evidence("RUN_DIR", tmp_path, {"--out": tmp_path / "run_summary.json"})
