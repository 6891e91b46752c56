"""The DAG with W&B on (training.loggers with wandb), offline: the soak target adds the DAG's verdict
to the training's W&B run, and the report's page for the run names its W&B folders and the
`wandb sync` line that uploads them. Its run is the G1 task's: W&B has every Train/ and Loss/ series
of the event file, G1's reward terms included (a standalone run's W&B: tests/rl/test_wandb.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from soaklab.metrics.wandb_offline import read_offline_run
from tests.rl.test_wandb import assert_same_series
from tests.workflow.conftest import snakemake

pytestmark = pytest.mark.snakemake
pytest.importorskip("wandb", reason="the wandb extra (pip install 'soaklab[wandb]')")


def test_a_dag_run_with_wandb_links_its_wandb_run_in_the_report(project, monkeypatch):
    for name in ("WANDB_MODE", "WANDB_DIR", "WANDB_NAME", "WANDB_RUN_GROUP", "WANDB_TAGS"):
        monkeypatch.delenv(name, raising=False)
    root, work, _ = project
    overlay = work.parent / "wandb.yaml"
    overlay.write_text(yaml.safe_dump({"runs": {"cpu": {"overrides": {"training.loggers": ["tensorboard", "wandb"],
                                                                      "training.wandb_project": "soaklab-dag"}}}}))
    proc = snakemake(project, "soak", overlays=(overlay,))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = work / "report.html"
    proc = snakemake(project, "soak", "--report", str(report), overlays=(overlay,))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = work / "results/cpu"
    record = json.loads((results / "wandb.json").read_text())
    assert record["state"] == "ok" and record["mode"] == "offline" and record["project"] == "soaklab-dag"
    trained, summarised = (Path(f) if Path(f).is_absolute() else work / f for f in record["folders"])
    assert trained.parent == summarised.parent == results / "train" / "wandb"
    run, summary = read_offline_run(trained), read_offline_run(summarised)
    assert run.run_id == summary.run_id == record["run_id"]
    assert run.project == "soaklab-dag" and run.history["Perf/iteration_ms"]
    assert assert_same_series(trained.parent.parent, run.history) > 50
    assert run.config["config_hash"] == json.loads((results / "train/run_config.json").read_text())["config_hash"]
    loggers = json.loads((results / "train/run_summary.json").read_text())["loggers"]
    assert loggers["wandb"]["state"] == "ok" and Path(loggers["wandb"]["run_folder"]).name == trained.name
    # The run is named after the workflow run; the DAG's verdict is its summary.
    assert f"wandb: {'cpu'}" in (work / "logs/cpu/wandb_summary.log").read_text()
    assert summary.summary["soaklab/status"] == "passed"
    assert summary.summary["soaklab/checks_passed"] == summary.summary["soaklab/checks_total"] > 0
    assert summary.summary["train/status"] == "completed"
    page = (results / "wandb.html").read_text()
    assert str(trained.name) in page and "wandb sync" in page
    # The report carries the page (Snakemake embeds its files; the name is shown as is).
    assert "wandb.html" in report.read_text()
    assert re.search(r"wandb\.json", (work / "logs/cpu/wandb_summary.log").read_text())
