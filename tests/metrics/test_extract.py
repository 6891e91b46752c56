"""`soaklab metrics` on real TensorBoard event files: windows, CSV, plot, and every refusal."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from torch.utils.tensorboard import SummaryWriter

from soaklab.metrics.extract import EXPECTED_TAGS
from soaklab.metrics.tags import METRIC_SCHEMA_VERSION
from soaklab.schemas import schema_errors
from tests.conftest import one_line

POINTS = 12000  # beyond TensorBoard's default 10000-point scalar sampling


def make_run(root: Path, tags: dict[str, list[float]], summary: dict | None = None, name: str = "run") -> Path:
    run = root / name
    writer = SummaryWriter(log_dir=str(run))
    for tag, values in tags.items():
        for step, value in enumerate(values):
            writer.add_scalar(tag, value, step)
    writer.close()
    base = {"status": "completed", "completed_iterations": POINTS, "total_env_steps": 8 * POINTS,
            "training_wall_time_sec": 100.0, "metric_schema_version": METRIC_SCHEMA_VERSION}
    (run / "run_summary.json").write_text(json.dumps(base if summary is None else summary))
    return run


@pytest.fixture
def full_run(tmp_path) -> Path:
    tags = {tag: [float(i) for i in range(50)] for tag in EXPECTED_TAGS}
    tags["Perf/total_fps"] = [float(i) for i in range(POINTS)]
    return make_run(tmp_path, tags)


def test_last_window_means_csv_and_plot(cli, full_run, tmp_path):
    out, csv, png, html = (tmp_path / n for n in ("m.json", "m.csv", "m.png", "m.html"))
    result = cli("metrics", full_run, "--last", "20", "--out", out, "--csv", csv, "--plot", png, "--html", html)
    assert result.code == 0, result.err
    metrics = json.loads(out.read_text())
    assert schema_errors("metrics", metrics) == []
    fps = metrics["metrics"]["Perf/total_fps"]
    assert fps["mean"] == pytest.approx(sum(range(POINTS - 20, POINTS)) / 20)
    assert (fps["count"], fps["first_step"], fps["last_step"]) == (20, POINTS - 20, POINTS - 1)
    assert metrics["metrics"]["Loss/critic"]["mean"] == pytest.approx(39.5)
    assert metrics["missing"] == [] and metrics["non_finite"] == []
    assert metrics["run"]["end_to_end_env_steps_per_sec"] == pytest.approx(8 * POINTS / 100.0)
    frame = pd.read_csv(csv)
    assert list(frame.columns) == ["tag", "step", "wall_time", "value"]
    assert (frame["tag"] == "Perf/total_fps").sum() == POINTS, "every point, no sampling cap"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Perf/total_fps" in html.read_text()


def test_lump_logged_collector_phases_are_read_per_iteration(cli, tmp_path):
    # As on the GPU: the collector publishes its phase times every 100 iterations, 0 in between.
    iterations, every = 1000, 100
    tags = {tag: [2.0] * iterations for tag in EXPECTED_TAGS}
    lumped = {"Perf/collector_env_step_ms": 9.0, "Perf/collector_action_wait_ms": 1.5}
    for tag, per_iteration in lumped.items():
        tags[tag] = [per_iteration * every if (step + 1) % every == 0 else 0.0 for step in range(iterations)]
    tags["Perf/collector_ingress_write_ms"] = [0.0] * (iterations - 1) + [5.0]  # published once: no rate
    out = tmp_path / "m.json"
    result = cli("metrics", make_run(tmp_path, tags), "--last", "20", "--out", out)
    assert result.code == 0, result.err
    metrics = json.loads(out.read_text())
    assert schema_errors("metrics", metrics) == []
    phases = metrics["phases_ms"]
    assert phases["collector_env_step"] == pytest.approx(9.0)
    assert phases["collector_action_wait"] == pytest.approx(1.5)
    assert phases["collector_ingress_write"] is None
    assert phases["learner_update"] == pytest.approx(2.0)
    # The raw window is still the mean of the rows themselves.
    assert metrics["metrics"]["Perf/collector_env_step_ms"]["mean"] == pytest.approx(9.0 * every / 20)


def test_missing_tags_are_null_and_listed(cli, tmp_path):
    run = make_run(tmp_path, {"Perf/total_fps": [1.0, 2.0], "Loss/critic": [1.0, 0.5]})
    out = tmp_path / "m.json"
    assert cli("metrics", run, "--last", "2", "--out", out).code == 0
    metrics = json.loads(out.read_text())
    assert metrics["metrics"]["Train/mean_reward"] is None and "Train/mean_reward" in metrics["missing"]
    assert metrics["non_finite"] == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_series_holding_a_non_finite_value_is_refused_naming_it(cli, tmp_path, bad):
    """A NaN anywhere in a series (not only in the last window) fails closed: exit 2, one line naming
    the series and the step, and no metrics JSON."""
    run = make_run(tmp_path, {"Perf/total_fps": [1.0, 2.0, 3.0, 4.0], "Loss/critic": [1.0, bad, 0.5, 0.4]})
    out = tmp_path / "m.json"
    result = cli("metrics", run, "--last", "2", "--out", out)
    assert result.code == 2 and not out.exists()
    line = one_line(result.err)
    assert "series Loss/critic holds a non-finite value" in line and "at step 1" in line


def test_a_run_that_ended_non_finite_is_refused(cli, tmp_path):
    exception = {"type": "NonFinite", "message": "non-finite reward at iteration 3"}
    summary = {"status": "failed", "metric_schema_version": METRIC_SCHEMA_VERSION,
               "runtime_manifest": {"shutdown": {"classification": "non_finite", "exception": exception}}}
    run = make_run(tmp_path, {"Perf/total_fps": [1.0, 2.0]}, summary=summary)
    result = cli("metrics", run, "--out", tmp_path / "m.json")
    assert result.code == 2 and "ended non_finite: non-finite reward at iteration 3" in one_line(result.err)


def test_legacy_run_is_read_only_when_asked(cli, tmp_path):
    run = make_run(tmp_path, {"perf/total_fps": [5.0] * 30, "timing/iteration": [0.1] * 30},
                   summary={"status": "completed"})
    out = tmp_path / "m.json"
    refused = cli("metrics", run, "--out", out)
    assert refused.code == 2 and "--legacy-unversioned" in one_line(refused.err)
    result = cli("metrics", run, "--out", out, "--legacy-unversioned")
    assert result.code == 0, result.err
    metrics = json.loads(out.read_text())
    assert metrics["legacy_unversioned"] is True and metrics["metric_schema_version"] is None
    assert metrics["metrics"]["perf/total_fps"]["mean"] == 5.0


def _second_event_file(run: Path) -> None:
    SummaryWriter(log_dir=str(run), filename_suffix=".second").close()


@pytest.mark.parametrize(("mutate", "flags", "words"), [
    (lambda run: (run / "run_summary.json").unlink(), (), "run_summary.json: missing"),
    (lambda run: (run / "run_summary.json").write_text("{not json"), (), "unreadable"),
    (lambda run: (run / "run_summary.json").write_text("[" * 100_000 + "]" * 100_000), (),
     "nested deeper than 64 levels"),
    (lambda run: (run / "run_summary.json").write_text('{"metric_schema_version": 2, "metric_schema_version": 1}'),
     (), "key 'metric_schema_version' appears twice in one object"),
    (lambda run: (run / "run_summary.json").write_text(json.dumps({"status": "completed"})), (),
     "no metric_schema_version"),
    (lambda run: (run / "run_summary.json").write_text(json.dumps({"metric_schema_version": True})), (),
     "metric_schema_version=true: unsupported"),
    (lambda run: (run / "run_summary.json").write_text(json.dumps({"metric_schema_version": 3})), (),
     "metric_schema_version=3: unsupported; this soaklab reads versions 1, 2"),
    (_second_event_file, (), "2 event files"),
    (lambda run: [p.unlink() for p in run.glob("events.out.tfevents.*")], (), "no TensorBoard event file"),
    (lambda run: None, ("--legacy-unversioned",), "declares metric_schema_version=2; drop the flag"),
    (lambda run: None, ("--last", "0"), "--last=0"),
])
def test_bad_input_fails_closed(cli, full_run, tmp_path, mutate, flags, words):
    mutate(full_run)
    out = tmp_path / "m.json"
    result = cli("metrics", full_run, "--out", out, *flags)
    assert result.code == 2
    assert words in one_line(result.err)
    assert not out.exists()


def test_a_schema_1_run_is_read_under_schema_2_tags(cli, tmp_path):
    """Version 1 logged the iteration in seconds and agent state under Loss/: read explicitly, renamed."""
    run = make_run(tmp_path, {"Perf/total_fps": [8.0] * 30, "Perf/iteration_time": [0.25] * 30,
                              "Loss/alpha_value": [0.1] * 30, "Loss/critic": [2.0] * 30},
                   summary={"status": "completed", "metric_schema_version": 1})
    out = tmp_path / "m.json"
    result = cli("metrics", run, "--out", out)
    assert result.code == 0, result.err
    metrics = json.loads(out.read_text())
    assert metrics["metric_schema_version"] == 1
    assert metrics["metrics"]["Perf/iteration_ms"]["mean"] == pytest.approx(250.0)
    assert metrics["metrics"]["Agent/alpha"]["mean"] == pytest.approx(0.1)
    assert "Perf/iteration_time" not in metrics["metrics"] and "Loss/alpha_value" not in metrics["metrics"]


def test_schema_1_tags_in_a_schema_2_run_fail_closed(cli, tmp_path):
    run = make_run(tmp_path, {"Perf/total_fps": [1.0], "Perf/iteration_time": [0.1]})
    result = cli("metrics", run, "--out", tmp_path / "m.json")
    assert result.code == 2 and "schema-1 tag Perf/iteration_time" in one_line(result.err)


def test_legacy_tags_in_a_v1_run_fail_closed(cli, tmp_path):
    run = make_run(tmp_path, {"Perf/total_fps": [1.0], "perf/total_fps": [1.0]})
    result = cli("metrics", run, "--out", tmp_path / "m.json")
    assert result.code == 2 and "legacy tag perf/total_fps" in one_line(result.err)


def test_missing_run_dir_fails_closed(cli, tmp_path):
    result = cli("metrics", tmp_path / "nope", "--out", tmp_path / "m.json")
    assert result.code == 2 and "not a run directory" in one_line(result.err)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_event_file_fails_naming_file_and_offset(cli, full_run, tmp_path, damage):
    path = next(full_run.glob("events.out.tfevents.*"))
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:-7]  # a record cut short, as a killed writer leaves it
    else:
        data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle
    path.write_bytes(bytes(data))
    out = tmp_path / "m.json"
    result = cli("metrics", full_run, "--out", out)
    assert result.code == 2
    line = one_line(result.err)
    assert str(path) in line and "byte offset" in line
    assert ("truncated" if damage == "truncate" else "corrupted") in line
    assert not out.exists()
