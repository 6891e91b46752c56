"""Shared fixtures: the real pinned G1 wheel, a materialized asset tree, and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from soaklab.assets.clips import HOLOSOMA_WHEEL
from soaklab.assets.pull import PullRequest, pull_assets
from soaklab.assets.source import G1_WHEEL, fetch_pinned_wheel
from soaklab.cli import main
from soaklab.contract.sections import RunConfig

REPO = Path(__file__).resolve().parents[1]
# Task terms run eager in tests (same function as compiled, without a compile per env size);
# tests/tasks/g1_tracking/test_compile.py checks the compiled path against it.
os.environ.setdefault("SOAKLAB_TORCH_COMPILE", "0")
# The suite makes orphaned segments on purpose (tree-wide SIGKILLs) and checks who removes them: a
# run of another test starting meanwhile would reclaim them first. Only the test of the reclaim at a
# run's start turns it on (tests/rl/test_shm.py).
os.environ["SOAKLAB_SHM_RECLAIM_AT_START"] = "0"
# Snakemake loads every installed executor plugin as it starts, and the Slurm one runs `scontrol show
# config` for a help text: where Slurm's packages are installed but no controller answers (CI installs
# them for tests/workflow/test_slurm.py, whose fixture alone runs a cluster), scontrol retries until the
# plugin's 10 s timeout, on every Snakemake start of the suite (some 60, most of them dry runs of 3 s).
# An empty config makes scontrol give up at once; nothing here but the Slurm test uses a cluster, and
# its fixture takes this away for its own processes.
os.environ.setdefault("SLURM_CONF", os.devnull)
CPU_HOST = json.dumps({"cuda_device_count": 0})
CUDA_HOST = json.dumps({"cuda_device_count": 1, "cuda_free_bytes": [80 << 30]})


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


# The longest modules, longest first: each module's summed test time under `make test` on two cores
# (estimated from .ci/run's slowest tests at 96670c4, 2026-12-07, less the cuts made after: dag ~300 s,
# monitor ~280 s, records ~170 s, resume ~150 s, the plug-ins ~130 s, compile_cache 110 s, matrix
# ~90 s since its refusals are worked out once, sweeps ~75 s), with test_slurm.py first: one test of
# four minutes on CI, mostly waiting on Slurm, so it overlaps the two heaviest modules from the start
# (taken later it ran after records' bisect, and last it ran on one worker while the other core sat
# idle: pytest 922 s). xdist hands out whole modules (--dist loadscope) in this order only with
# --no-loadscope-reorder (Makefile): by default it reorders them by test count.
LONGEST_FIRST = ("tests/workflow/test_slurm.py", "tests/workflow/test_dag.py", "tests/soak/test_monitor.py",
                 "tests/workflow/test_records.py", "tests/rl/test_resume.py", "tests/catalogue/test_plugins.py",
                 "tests/host/test_compile_cache.py", "tests/support/test_matrix.py", "tests/workflow/test_sweeps.py",
                 "tests/rl/test_runtime.py", "tests/rl/test_wandb.py",
                 "tests/policy/test_export.py", "tests/bench/test_backend_probe.py", "tests/rl/test_reproducible.py",
                 "tests/soak/test_interrupted.py", "tests/rl/test_ranks.py", "tests/tasks/g1_tracking/test_compile.py",
                 "tests/assets/test_pull.py", "tests/tasks/g1_tracking/test_library.py", "tests/soak/test_diverged.py",
                 "tests/tasks/g1_tracking/test_env.py", "tests/policy/test_evaluate.py", "tests/rl/test_budget.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: n for n, module in enumerate(LONGEST_FIRST)}
    # A stable sort: every other module keeps its place.
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `soaklab ARGS` in this process (the real entry point); optional simulated host."""

    def run(*args: str, host: str | None = None, env: dict[str, str] | None = None) -> CliResult:
        if host is not None:
            monkeypatch.setenv("SOAKLAB_HOST_CAPABILITIES", host)
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def tmpfs(tmp_path):
    """`tmpfs(size)`: a fresh directory with a tmpfs of that size mounted on it (a disk that fills
    up for real), unmounted after the test. Needs root: skips cleanly without it."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        path = tmp_path / f"disk{len(mounted)}"
        path.mkdir()
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs needs root")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def cached_wheel(tmp_path_factory, wheel) -> Path:
    """A pinned wheel, verified, in a session folder; reuses the project's cache when a pull made it."""
    cache = tmp_path_factory.mktemp(f"{wheel.package}-cache")
    local = REPO / "resources" / "assets" / "cache" / wheel.filename
    if local.is_file():
        shutil.copyfile(local, cache / wheel.filename)
    return fetch_pinned_wheel(wheel, cache)


@pytest.fixture(scope="session")
def pinned_wheel(tmp_path_factory) -> Path:
    """The pinned mjlab wheel (the G1 model)."""
    return cached_wheel(tmp_path_factory, G1_WHEEL)


@pytest.fixture(scope="session")
def clip_wheel(tmp_path_factory) -> Path:
    """The pinned holosoma wheel (the real reference clip)."""
    return cached_wheel(tmp_path_factory, HOLOSOMA_WHEEL)


@dataclass(frozen=True)
class G1Assets:
    manifest_path: Path
    manifest: dict
    scene: Path
    motion: Path  # the default clip: the real one (largebox)
    synthetic: Path


@pytest.fixture(scope="session")
def g1_assets(tmp_path_factory, pinned_wheel, clip_wheel) -> G1Assets:
    root = tmp_path_factory.mktemp("assets")
    req = PullRequest(robot="g1", source=str(pinned_wheel), motion=None, dest=root / "resources",
                      manifest=root / "manifest.json", clip_wheel=clip_wheel)
    manifest = pull_assets(req)
    return G1Assets(req.manifest, manifest, Path(manifest["scene"]["path"]), Path(manifest["motion"]["path"]),
                    Path(manifest["motions"]["synthetic"]["path"]))


def one_line(err: str) -> str:
    """The CLI's error output must be exactly one line; return it."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one error line, got: {err!r}"
    return lines[0]


def g1_config(num_envs: int, motion: Path, *overrides: str, sim: str = "mujoco") -> RunConfig:
    from soaklab.config.compose import compose

    return compose("sac", "g1_motion_tracking", sim,
                   [f"algo.num_envs={num_envs}", f"env.motion={json.dumps(str(motion))}", *overrides]).run


@pytest.fixture
def make_g1(g1_assets):
    """Build G1 envs on the session's assets; closes them afterwards."""
    from soaklab.tasks.env import EnvSpec
    from soaklab.tasks.registry import make_env

    made = []

    def build(num_envs: int, *overrides: str, compile_terms: bool = False, sim: str = "mujoco"):
        # sim=mjwarp without a GPU steps on warp's CPU device (soaklab.sim.mjwarp)
        run = g1_config(num_envs, g1_assets.motion, *overrides, sim=sim)
        env = make_env(run, EnvSpec.of(run), g1_assets.scene, compile_terms=compile_terms)
        made.append(env)
        return env

    yield build
    for env in made:
        env.close()


# ---- `covers` markers: the support matrix's "Tested" evidence (soaklab.support.inventory) ----------
# A test marked @pytest.mark.covers("algo/task/sim/device/ranks") claims that it trains that
# configuration. The claim is checked here: once the test passed, some completed run_summary.json
# under its tmp_path must be of that configuration, else the test errors.


def pytest_configure(config):
    config.addinivalue_line("markers", "covers(configuration): trains algo/task/sim/device/ranks (checked here; "
                            "the support matrix reads it)")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[CALL_PASSED] = report.passed
    return report


CALL_PASSED = pytest.StashKey[bool]()


def trained_configurations(root: Path) -> set[str]:
    found = set()
    for path in root.rglob("run_summary.json"):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if summary.get("status") == "completed" and "learner_device" in summary:
            device = str(summary["learner_device"]).split(":")[0]
            found.add(f"{summary['algo']}/{summary['task']}/{summary['sim']}/{device}/{summary['ranks']}")
    return found


@pytest.fixture(autouse=True)
def _covers_holds(request):
    claims = [m.args[0] for m in request.node.iter_markers("covers")]
    if not claims:
        yield
        return
    tmp = request.getfixturevalue("tmp_path")
    yield
    if request.node.stash.get(CALL_PASSED, False):
        trained = trained_configurations(tmp)
        missing = [c for c in claims if c not in trained]
        if missing:
            pytest.fail(f"marked covers({missing[0]!r}) but its runs trained {sorted(trained) or 'nothing'}")
