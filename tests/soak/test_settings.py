"""What `soaklab soak` refuses before spawning anything (exit 2, one line, nothing written)."""

from __future__ import annotations

import pytest

from tests.conftest import one_line

BUDGET = ("--min-duration-seconds", "1", "--sample-interval-seconds", "1", "--startup-timeout-seconds", "10",
          "--stale-progress-seconds", "10", "--post-shutdown-grace-seconds", "0")


@pytest.fixture
def run_config(cli, tmp_path):
    path = tmp_path / "run_config.json"
    result = cli("config", "resolve", "--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco",
                 "algo.num_envs=8", "algo.max_iterations=20", "--out", path)
    assert result.code == 0, result.err
    return path


@pytest.mark.parametrize(("flags", "words"), [
    (("--num-envs", "16"), "--num-envs=16: disagrees with algo.num_envs=8"),
    (("--iterations", "5"), "--iterations=5: disagrees with algo.max_iterations=20"),
    (("--algo", "sac"), "--run-config: takes algo/task/sim from the file"),
    (("--post-shutdown-grace-seconds", "-1"), "--post-shutdown-grace-seconds=-1.0"),
    (("--stale-progress-seconds", "nan"), "--stale-progress-seconds=nan"),
])
def test_run_config_flags_must_agree(cli, run_config, tmp_path, flags, words):
    out = tmp_path / "soak.json"
    result = cli("soak", "--run-config", run_config, *BUDGET, *flags, "--log-dir", tmp_path / "run", "--output", out)
    assert result.code == 2
    assert words in one_line(result.err)
    assert not (tmp_path / "run").exists() and not out.exists()


def test_a_log_dir_in_use_is_refused(cli, run_config, tmp_path):
    used = tmp_path / "run"
    used.mkdir()
    (used / "progress.json").write_text("{}")
    result = cli("soak", "--run-config", run_config, *BUDGET, "--log-dir", used, "--output", tmp_path / "s.json")
    assert result.code == 2 and "exists and is not empty" in one_line(result.err)
    assert sorted(p.name for p in used.iterdir()) == ["progress.json"], "nothing added to it"


def test_algo_task_sim_go_together(cli, tmp_path):
    result = cli("soak", "--algo", "sac", *BUDGET, "--log-dir", tmp_path / "run", "--output", tmp_path / "s.json")
    assert result.code == 2 and "--algo, --task and --sim must be given together" in one_line(result.err)
