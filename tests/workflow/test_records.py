"""Records in the real DAG: a bad spec or an unknown record is one exit-2 line before any job runs;
record runs plan through the usual rules into the comparison."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.conftest import REPO
from tests.workflow.conftest import planned, snakemake

pytestmark = pytest.mark.snakemake


def _with_record(project, name="ci-dag"):
    root, _, _ = project
    shutil.copytree(REPO / "records" / name, root / "records" / name)
    return root / "records" / name


def test_reproduce_plans_the_record_runs_and_the_comparison(project):
    _with_record(project)
    jobs = planned(project, target="reproduce")
    assert jobs["train_soak"] == 1 and jobs["compare_record"] == 1 and jobs["reproduce_verdict"] == 1


def test_a_malformed_record_is_one_line_and_exit_2_before_anything_runs(project):
    folder = _with_record(project)
    spec = yaml.safe_load((folder / "record.yaml").read_text())
    spec["compare"]["figures"][0]["band"] = [2.0, 3.0]
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    proc = snakemake(project, "reproduce")
    assert proc.returncode == 2
    assert "records/ci-dag/record.yaml: compare.figures[0].band" in proc.stderr
    assert not (project[1] / "results").exists()


def test_an_unknown_record_is_refused(project):
    _with_record(project)
    proc = snakemake(project, "reproduce", "--config", "reproduce=nope")
    assert proc.returncode == 2 and "reproduce=nope: no record 'nope'" in proc.stderr
