"""`soaklab validate` on the artifacts of a real soak, and on tampered copies of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from soaklab.schemas import schema_errors
from tests.conftest import one_line
from tests.soak.conftest import EXTRA


@pytest.fixture(scope="module")
def soaked(tmp_path_factory) -> Path:
    """One real passing soak of the control task, with its metrics."""
    root = tmp_path_factory.mktemp("soaked")
    env = dict(os.environ, SOAKLAB_TORCH_COMPILE="0")
    env.pop("SOAKLAB_FAULT", None)
    soak = [sys.executable, "-m", "soaklab", "soak", "--algo", "sac", "--task", "cartpole_swingup", "--sim",
            "mujoco", "--num-envs", "8", "--iterations", "30", "--min-duration-seconds", "1",
            "--sample-interval-seconds", "0.5", "--startup-timeout-seconds", "60", "--stale-progress-seconds", "20",
            "--post-shutdown-grace-seconds", "0.5", *[a for o in EXTRA for a in ("--extra-override", o)],
            "--log-dir", str(root / "run"), "--output", str(root / "soak.json")]
    done = subprocess.run(soak, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = [sys.executable, "-m", "soaklab", "metrics", str(root / "run"), "--out", str(root / "metrics.json")]
    assert subprocess.run(metrics, capture_output=True, timeout=120).returncode == 0
    return root


@pytest.fixture
def copy(soaked, tmp_path) -> Path:
    shutil.copytree(soaked, tmp_path / "c")
    return tmp_path / "c"


def validate(cli, root: Path, out: Path, *extra: str):
    return cli("validate", "--soak", root / "soak.json", "--run-dir", root / "run", "--metrics",
               root / "metrics.json", "--out", out, *extra)


def test_real_soak_validates_with_every_check(cli, soaked, tmp_path):
    out, html = tmp_path / "v.json", tmp_path / "v.html"
    result = validate(cli, soaked, out, "--html", html)
    assert result.code == 0, result.err
    report = json.loads(out.read_text())
    assert schema_errors("validation", report) == []
    assert report["status"] == "passed" and report["failed"] == 0
    names = {c["name"] for c in report["checks"]}
    for expected in ("monitor status", "trainer return code", "final replay occupancy",
                     "replay release sequence = published sequence", "shutdown cleanup errors",
                     "post-shutdown residual processes", "leak verdict", "metrics: missing required tags",
                     "config hash: run_summary.json = run_config.json"):
        assert expected in names
    assert any(n.startswith("published sequence = vector_steps x ceil(8 / 8)") for n in names)
    assert "final replay occupancy" in html.read_text()


def edit(path: Path, change) -> None:
    payload = json.loads(path.read_text())
    change(payload)
    path.write_text(json.dumps(payload))


def growing(samples: list[dict]) -> list[dict]:
    """Samples after the soak's last one of the trainer whose memory grows by 100 MiB each: a leak,
    left unrecorded."""
    last = [s for s in samples if s["process_count"] > 0][-1]
    return [{**last, "elapsed_s": last["elapsed_s"] + i, "rss_bytes": last["rss_bytes"] + i * (100 << 20),
             "progress": {**last["progress"], "iteration": 10_000 + i}} for i in range(1, 31)]


@pytest.mark.parametrize(("target", "change", "failed_check"), [
    ("run/run_summary.json", lambda s: s["runtime_manifest"]["replay_ingress"].update(occupancy=1),
     "final replay occupancy"),
    ("run/run_summary.json", lambda s: s["runtime_manifest"]["replay_ingress"].update(dropped_batches=3),
     "replay dropped batches"),
    ("run/run_summary.json", lambda s: s["runtime_manifest"]["shutdown"]["cleanup"].update(errors=["x"]),
     "shutdown cleanup errors"),
    ("run/run_summary.json", lambda s: s.update(config_hash="sha256:" + "0" * 64),
     "config hash: run_summary.json = run_config.json"),
    ("soak.json", lambda s: s.update(status="failed"), "monitor status"),
    ("soak.json", lambda s: s["post_shutdown"]["residual_processes"].append(
        {"pid": 4242, "create_time": 1.0, "name": "x", "cmdline": [], "killed_by_monitor": True}),
     "post-shutdown residual processes"),
    ("metrics.json", lambda m: m.update(missing=["Loss/critic"]), "metrics: missing required tags"),
    # the leak verdict is recomputed from the samples, not read: a recorded verdict they do not give fails
    ("soak.json", lambda s: s["resource_summary"]["leak_verdict"].update(leak=True), "leak verdict"),
    ("soak.json", lambda s: s.update(samples=s["samples"] + growing(s["samples"])), "leak verdict"),
])
def test_each_failed_criterion_is_named_with_expected_and_actual(cli, copy, tmp_path, target, change, failed_check):
    edit(copy / target, change)
    out = tmp_path / "v.json"
    result = validate(cli, copy, out)
    assert result.code == 1
    report = json.loads(out.read_text())
    bad = [c for c in report["checks"] if not c["passed"]]
    assert failed_check in {c["name"] for c in bad}
    assert f"FAILED {failed_check}" in result.err


@pytest.mark.parametrize(("mutate", "words"), [
    (lambda root: (root / "soak.json").unlink(), "soak.json: missing soak"),
    (lambda root: (root / "soak.json").write_text("[]"), "soak violates its schema"),
    (lambda root: (root / "metrics.json").write_text("{"), "unreadable metrics"),
    (lambda root: (root / "run" / "run_summary.json").unlink(), "run_summary.json: missing run_summary"),
    (lambda root: edit(root / "soak.json", lambda s: s.update(schema_version="0.2.0")),
     "soak violates its schema (schema_version"),
    (lambda root: shutil.rmtree(root / "run"), "--run-dir"),
])
def test_bad_input_fails_closed(cli, copy, tmp_path, mutate, words):
    mutate(copy)
    out = tmp_path / "v.json"
    result = validate(cli, copy, out)
    assert result.code == 2
    assert words in one_line(result.err)
    assert not out.exists()


def test_metrics_of_another_run_dir_fail_by_full_path(cli, copy, tmp_path):
    """Every DAG run dir is called `train`: the copy's metrics.json still names the original run
    dir, whose basename matches; the resolved paths do not."""
    out = tmp_path / "v.json"
    result = validate(cli, copy, out)
    assert result.code == 1
    bad = {c["name"]: c for c in json.loads(out.read_text())["checks"] if not c["passed"]}
    assert set(bad) == {"metrics read this run dir"}
    assert bad["metrics read this run dir"]["expected"] == str((copy / "run").resolve())


def test_an_edited_run_config_fails_its_recomputed_hash(cli, copy, tmp_path):
    edit(copy / "run" / "run_config.json", lambda r: r["config"]["algo"].update(seed=99))
    out = tmp_path / "v.json"
    result = validate(cli, copy, out, )
    assert result.code == 1
    bad = {c["name"] for c in json.loads(out.read_text())["checks"] if not c["passed"]}
    assert "config hash: recomputed from run_config.json's config" in bad


def test_an_event_file_of_another_run_fails_its_identity(cli, copy, tmp_path):
    """Swap in an event file that names another run: every path and name check passes, the
    identity the trainer wrote into the file does not."""
    from torch.utils.tensorboard import SummaryWriter

    from soaklab.metrics.events import read_scalars
    from soaklab.metrics.tags import IDENTITY_TAG

    run = copy / "run"
    original = next(run.glob("events.out.tfevents.*"))
    foreign = tmp_path / "foreign"
    writer = SummaryWriter(log_dir=str(foreign))
    writer.add_text(IDENTITY_TAG, json.dumps({"config_hash": "sha256:" + "1" * 64, "run_dir": "elsewhere"}), 0)
    for row in read_scalars(original).itertuples():  # the same numbers: only the identity differs
        writer.add_scalar(row.tag, row.value, row.step)
    writer.close()
    shutil.copyfile(next(foreign.glob("events.out.tfevents.*")), original)  # same name, other content
    metrics = cli("metrics", run, "--out", copy / "metrics.json")
    assert metrics.code == 0, metrics.err
    out = tmp_path / "v.json"
    result = validate(cli, copy, out)
    assert result.code == 1
    bad = {c["name"] for c in json.loads(out.read_text())["checks"] if not c["passed"]}
    assert "metrics: the event file names this run's config hash" in bad
    assert "metrics read this run dir" not in bad  # the metrics were extracted from this copy's run dir


def test_rows_missing_from_a_per_iteration_series_fail_unless_declared(cli, copy, tmp_path):
    """Records cut out of the event file (framing intact, so metrics reads it): rows of Perf/total_fps
    in the middle, Perf/learner_update_ms's first row and Perf/iteration_ms's last three (a series
    judged only between its own first and last row would pass those two). Every iteration the run
    completed (run_summary.json) must have its row; none is declared, so the required-tags row fails
    and names the steps, with or without --metrics (then from the run dir's own event file)."""
    from tensorboard.compat.proto.event_pb2 import Event

    from soaklab.metrics.events import frame_records, record_bodies
    from soaklab.outcomes.validation import undeclared_gaps

    event_file = next((copy / "run").glob("events.out.tfevents.*"))
    summary = json.loads((copy / "run" / "run_summary.json").read_text())
    last = summary["completed_iterations"] - 1
    assert last >= 20

    def cut(body: bytes) -> bool:
        event = Event.FromString(body)
        tags = {v.tag for v in event.summary.value}
        return ((10 <= event.step <= 12 and "Perf/total_fps" in tags)
                or (event.step == 0 and "Perf/learner_update_ms" in tags)
                or (event.step >= last - 2 and "Perf/iteration_ms" in tags))

    event_file.write_bytes(frame_records(b for b in record_bodies(event_file) if not cut(b)))
    expected = [f"Perf/iteration_ms: 3 steps missing ({last - 2}..{last}), no gap declared",
                "Perf/learner_update_ms: 1 steps missing (0..0), no gap declared",
                "Perf/total_fps: 3 steps missing (10..12), no gap declared"]
    assert cli("metrics", copy / "run", "--out", copy / "metrics.json").code == 0
    for with_metrics in (True, False):
        out = tmp_path / f"v-{with_metrics}.json"
        result = (validate(cli, copy, out) if with_metrics else
                  cli("validate", "--soak", copy / "soak.json", "--run-dir", copy / "run", "--out", out))
        assert result.code == 1, result.err
        [row] = [c for c in json.loads(out.read_text())["checks"] if not c["passed"]]
        assert row["name"] == "metrics: missing required tags"
        assert row["actual"] == expected
    # Declared gaps (a resume's event_gaps) cover their steps, at the ends as in the middle.
    declared = [{"steps": [0, 0]}, {"steps": [10, 12]}, {"steps": [last - 2, last]}]
    assert undeclared_gaps(copy / "run", event_file.name, {**summary, "event_gaps": declared}) == []
