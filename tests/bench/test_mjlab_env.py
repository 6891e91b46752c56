"""mjlab's env stepped alone (issue 49's side-by-side): it fails closed on bad flags and missing
inputs before importing mjlab, and where mjlab is absent (CI has no mjlab) it says what to stage."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import one_line


def run(tmp_path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "soaklab.bench.mjlab_env", "--out", str(tmp_path / "out.json"),
                           *flags], capture_output=True, text=True)


@pytest.mark.parametrize(("flag", "value", "least"),
                         [("--num-envs", "0", 1), ("--warmup", "0", 1), ("--iters", "1", 2)])
def test_a_bad_count_fails_closed_naming_it(tmp_path, flag: str, value: str, least: int) -> None:
    result = run(tmp_path, flag, value)
    assert result.returncode == 2
    assert f"{flag} {value}: must be >= {least}" in one_line(result.stderr)
    assert not (tmp_path / "out.json").exists()


def test_a_missing_clip_is_named(tmp_path) -> None:
    result = run(tmp_path, "--motion", str(tmp_path / "nope.npz"))
    assert result.returncode == 2
    assert f"--motion {tmp_path / 'nope.npz'}: no such clip file" in one_line(result.stderr)


def test_without_mjlab_it_says_what_to_stage(tmp_path) -> None:
    if importlib.util.find_spec("mjlab") is not None:
        pytest.skip("mjlab is installed here")
    clip = tmp_path / "clip.npz"
    clip.write_bytes(b"")
    result = run(tmp_path, "--motion", str(clip))
    assert result.returncode == 2
    assert "mjlab: cannot import it" in one_line(result.stderr) and "scripts/gpu/README.md" in result.stderr
    assert not (tmp_path / "out.json").exists()
