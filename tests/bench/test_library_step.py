"""The motion library's step against the one-clip step (issue 49): it runs for real on MuJoCo here,
its four envs each stepped, and it fails closed on bad flags and missing inputs before building any."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import one_line


def run(tmp_path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOAKLAB_TORCH_COMPILE": "0"}  # eager terms: the same code, no compile wait
    return subprocess.run([sys.executable, "-m", "soaklab.bench.library_step", "--out", str(tmp_path / "out.json"),
                           *flags], capture_output=True, text=True, env=env)


def test_it_times_the_library_the_one_clip_env_and_each_block_on_mujoco(tmp_path, g1_assets) -> None:
    result = run(tmp_path, "--sim", "mujoco", "--num-envs", "4", "--warmup", "1", "--iters", "3",
                 "--assets-manifest", str(g1_assets.manifest_path))
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "out.json").read_text())
    results = record["results"]
    assert {name: (r["motion"], r["num_envs"]) for name, r in results.items()} == {
        "library": ("[largebox,crawl_slope]", 4), "one_clip": ("largebox", 4),
        "largebox_block": ("largebox", 2), "crawl_slope_block": ("crawl_slope", 2)}
    assert all(r["step_ms_median"] > 0 for r in results.values())
    rate = results["library"]["env_steps_per_s"] / results["one_clip"]["env_steps_per_s"]
    assert record["library_over_one_clip"] == pytest.approx(rate)
    assert record["settings"]["device"] == "cpu"
    assert record["command"].startswith("python3 -m soaklab.bench.library_step")
    assert "library_step: the library at" in result.stdout


@pytest.mark.parametrize(("flags", "message"), [
    (("--num-envs", "3"), "--num-envs 3: must be an even number >= 2"),
    (("--warmup", "0"), "--warmup 0: must be >= 1"),
    (("--iters", "1"), "--iters 1: must be >= 2"),
])
def test_a_bad_count_fails_closed_naming_it(tmp_path, flags: tuple[str, ...], message: str) -> None:
    result = run(tmp_path, "--sim", "mujoco", *flags)
    assert result.returncode == 2
    assert message in one_line(result.stderr)
    assert not (tmp_path / "out.json").exists()


def test_a_missing_manifest_is_named(tmp_path) -> None:
    missing = tmp_path / "nope.json"
    result = run(tmp_path, "--sim", "mujoco", "--assets-manifest", str(missing))
    assert result.returncode == 2
    assert f"--assets-manifest {missing}: no such file" in one_line(result.stderr)


def test_mjwarp_without_a_gpu_says_so(tmp_path, g1_assets) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU")
    result = run(tmp_path, "--assets-manifest", str(g1_assets.manifest_path))
    assert result.returncode == 2
    assert "--sim mjwarp: needs an NVIDIA GPU (CUDA)" in one_line(result.stderr)
