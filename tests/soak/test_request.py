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


def _paths(tmp_path):
    """A file, a directory and a dangling link to aim the outputs at."""
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    return tmp_path


@pytest.mark.parametrize(("log_dir", "output", "evidence", "words"), [
    ("run", "a_dir", None, "--output {t}/a_dir: is a directory"),
    ("run", "a_file/soak.json", None, "--output {t}/a_file/soak.json: {t}/a_file is a file"),
    ("run", "dangling", None, "--output {t}/dangling: a dangling symbolic link"),
    ("run", "run/soak.json", None, "inside --log-dir"),
    ("dangling", "soak.json", None, "--log-dir {t}/dangling: a dangling symbolic link"),
    ("a_file", "soak.json", None, "--log-dir {t}/a_file: is a file"),
    ("run", "soak.json", "run", "--evidence-dir {t}/run: overlaps --log-dir"),
    ("run", "soak.json", "run/evidence", "overlaps --log-dir"),
    ("run", "evidence/soak.json", "evidence", "inside --evidence-dir"),
    ("run", "soak.json", "a_file", "--evidence-dir {t}/a_file: is a file"),
])
def test_bad_output_paths_are_refused_before_anything_runs(cli, run_config, tmp_path, log_dir, output, evidence,
                                                           words):
    t = _paths(tmp_path)
    before = sorted(p.name for p in t.rglob("*"))
    flags = ["--log-dir", t / log_dir, "--output", t / output]
    if evidence is not None:
        flags += ["--evidence-dir", t / evidence]
    result = cli("soak", "--run-config", run_config, *BUDGET, *flags)
    assert result.code == 2
    assert words.format(t=t) in one_line(result.err)
    assert sorted(p.name for p in t.rglob("*")) == before  # nothing created


def test_an_output_on_a_full_disk_is_refused_before_the_soak(cli, run_config, tmp_path, tmpfs):
    disk = tmpfs("64k")
    result = cli("soak", "--run-config", run_config, *BUDGET, "--log-dir", tmp_path / "run",
                 "--output", disk / "soak.json")
    assert result.code == 2
    assert "--output" in one_line(result.err) and "KiB free" in one_line(result.err)
    assert not (tmp_path / "run").exists() and list(disk.iterdir()) == []


@pytest.mark.parametrize("name", ["null", "run #3", "a: b"])
def test_the_log_dir_is_data_never_yaml(name, tmp_path):
    from soaklab.config.overrides import parse_overrides
    from soaklab.config.resolve import RunSource

    override = parse_overrides(list(RunSource(log_dir=tmp_path / name).owned_overrides()))[0]
    assert override.key == "training.log_dir" and override.value == str(tmp_path / name)


@pytest.mark.parametrize(("profile", "words"), [
    ('{"cpu_capability": "sse9", "threads": 2, "task_terms": "inductor"}',
     "--numerics.cpu_capability: 'sse9' is not an x86-64 capability"),
    ('{"cpu_capability": "avx2", "threads": 2}', "--numerics.task_terms: required"),
    ("avx2", "--numerics: 'avx2' is not a JSON object"),
    # the run config leaves env.num_threads unset: a profile fixes it, so the two must agree
    ('{"cpu_capability": "avx2", "threads": 2, "task_terms": "eager"}',
     "--numerics: threads 2, but the run's env.num_threads is None"),
])
def test_a_bad_numerics_profile_is_refused_before_anything_runs(run_config, tmp_path, profile, words):
    """In a process of its own: an accepted profile is exported into the process's environment."""
    import subprocess
    import sys

    out, log_dir = tmp_path / "soak.json", tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "soaklab", "soak", "--run-config", str(run_config), *BUDGET,
                           "--numerics", profile, "--log-dir", str(log_dir), "--output", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and words in one_line(done.stderr)
    assert not out.exists() and not log_dir.exists()
