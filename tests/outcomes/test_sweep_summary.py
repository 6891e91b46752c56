"""`soaklab sweep-summary` and the run outcomes it tabulates (soaklab.outcomes.runs.run_outcome)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from PIL import Image

from soaklab.outcomes.runs import run_outcome
from tests.conftest import CPU_HOST, one_line

RUN = ("--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco")


def rejected_run(cli, tmp_path, run: str) -> str:
    """A run whose resolve_config step failed for real: the CLI's error line in its log, no run_config."""
    out = tmp_path / "results" / run / "run_config.json"
    result = cli("config", "resolve", *RUN, "algo.batch_size=0", "--out", out, host=CPU_HOST)
    assert result.code == 2
    log = tmp_path / "logs" / run / "resolve_config.log"
    log.parent.mkdir(parents=True)
    log.write_text(result.err)
    return one_line(result.err)


def test_outcomes_of_a_rejected_and_an_unrun_run(cli, tmp_path):
    line = rejected_run(cli, tmp_path, "s-bad")
    bad = run_outcome("s-bad", tmp_path / "results/s-bad", tmp_path / "logs/s-bad")
    assert (bad.status, bad.classification, bad.reason) == ("failed", "config_rejected", line)
    assert "algo.batch_size=0" in line
    unrun = run_outcome("s-later", tmp_path / "results/s-later", tmp_path / "logs/s-later")
    assert (unrun.status, unrun.classification) == ("not_run", "not_run")


def test_sweep_summary_writes_table_page_and_plot(cli, tmp_path):
    rejected_run(cli, tmp_path, "s-bad")
    plan = {"sweep": "s", "base": "cpu", "runs": {"s-bad": {"algo.batch_size": 0}, "s-later": {"algo.batch_size": 64}}}
    out = tmp_path / "results/sweeps/s"
    result = cli("sweep-summary", "--plan", json.dumps(plan), "--results", tmp_path / "results", "--logs",
                 tmp_path / "logs", "--csv", out / "summary.csv", "--html", out / "summary.html",
                 "--plot", out / "summary.png")
    assert result.code == 0, result.err
    assert "sweep s: 2 runs, 1 failed, 1 not_run" in result.out
    table = pd.read_csv(out / "summary.csv")
    assert list(table["run"]) == ["s-bad", "s-later"] and list(table["algo.batch_size"]) == [0, 64]
    assert list(table["status"]) == ["failed", "not_run"]
    assert list(table["classification"]) == ["config_rejected", "not_run"]
    page = (out / "summary.html").read_text()
    assert '<img src="summary.png"' in page and "0 of 2 runs passed" in page and "config_rejected" in page
    with Image.open(out / "summary.png") as image:
        assert image.width > 600 and image.height > 200


@pytest.mark.parametrize(("plan", "words"), [
    ("{not json", "--plan: not JSON"),
    (json.dumps({"sweep": "s", "runs": {}}), "--plan: expected"),
    (json.dumps({"sweep": "s", "runs": {"../../etc": {}}}), "run name '../../etc' is not a plain name"),
    (json.dumps({"sweep": "s", "runs": {"..": {}}}), "run name '..' is not a plain name"),
])
def test_a_bad_plan_is_one_line_and_writes_nothing(cli, tmp_path, plan, words):
    out = tmp_path / "out"
    result = cli("sweep-summary", "--plan", plan, "--csv", out / "t.csv", "--html", out / "t.html",
                 "--plot", out / "t.png")
    assert result.code == 2 and words in one_line(result.err)
    assert not out.exists()
