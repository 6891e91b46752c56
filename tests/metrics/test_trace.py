"""Two traces compared (soaklab.metrics.trace, `soaklab diff-runs`): the first step, stage and tensor
that differ, in the order a difference propagates; damaged or missing traces refused in one line.
Real runs' traces: tests/rl/test_reproducible.py."""

from __future__ import annotations

import json

import torch

from soaklab.metrics.trace import first_difference, read_trace
from soaklab.rl.trace import Trace, digest
from tests.conftest import one_line


def write(run, side, lines):
    folder = run / "trace"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{side}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def line(step, stage, **digests):
    return {"step": step, "stage": stage, "digests": digests}


def test_the_first_difference_is_the_earliest_step_then_stage_then_name(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "collector", [line(0, "action", action="1"), line(1, "action", action="2"), line(1, "physics", q="3")])
    write(a, "learner", [line(1, "loss", critic="4"), line(1, "sample", rows="5")])
    write(b, "collector", [line(0, "action", action="1"), line(1, "action", action="2"), line(1, "physics", q="3")])
    write(b, "learner", [line(1, "loss", critic="x"), line(1, "sample", rows="y")])
    found = first_difference(read_trace(a), read_trace(b))
    assert (found.step, found.stage, found.name) == (1, "sample", "rows")  # sample comes before loss
    assert found.line() == "first difference: step 1, sample tensor rows (5 in A, y in B)"
    assert first_difference(read_trace(a), read_trace(a)) is None
    write(b, "learner", [line(1, "loss", critic="4"), line(1, "sample", rows="5"), line(2, "weights", w="6")])
    assert first_difference(read_trace(a), read_trace(b)).line() == \
        "first difference: step 2, weights tensor w (missing in A)"


def test_a_resumed_runs_last_line_wins_and_a_cut_last_line_is_skipped(tmp_path):
    run = tmp_path / "run"
    write(run, "learner", [line(3, "loss", critic="old"), line(3, "loss", critic="new")])
    with (run / "trace" / "learner.jsonl").open("a") as handle:
        handle.write('{"step": 4, "stage": "lo')  # a killed writer's
    assert read_trace(run) == {(3, "loss"): {"critic": "new"}}


def test_diff_runs_refuses_what_it_cannot_read_in_one_line(cli, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "learner", [line(0, "loss", critic="1")])
    b.mkdir()
    result = cli("diff-runs", a, b)
    assert result.code == 2 and f"{b}: no trace" in one_line(result.err)
    write(b, "learner", [line(0, "loss", critic="1"), {"step": -1, "stage": "loss", "digests": {}},
                         line(1, "loss", critic="1")])
    result = cli("diff-runs", a, b)
    assert result.code == 2 and f"{b / 'trace' / 'learner.jsonl'}:2: not a trace record" in one_line(result.err)
    result = cli("diff-runs", a, tmp_path / "nowhere")
    assert result.code == 2 and "not a run dir" in one_line(result.err)
    write(b, "learner", [])  # emptied, or a run that ended before its first step
    result = cli("diff-runs", a, b)
    assert result.code == 2 and f"{b / 'trace' / 'learner.jsonl'}: an empty trace" in one_line(result.err)
    result = cli("diff-runs", a, a)
    assert result.code == 2 and f"{a}: is {a} again" in one_line(result.err)


def test_diff_runs_names_a_config_edit_or_a_trace_that_ends_not_a_tensor(cli, tmp_path):
    """Runs of other configs are told apart by their run_config.json first, and a tensor difference
    then comes without the advice to rerun; a trace that stops early (a killed run) is said to end,
    without the dump advice."""
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "learner", [line(0, "loss", critic="1"), line(1, "loss", critic="2"), line(2, "loss", critic="3")])
    write(b, "learner", [line(0, "loss", critic="1"), line(1, "loss", critic="2")])
    result = cli("diff-runs", a, b)
    assert result.code == 1 and f"{b}'s learner trace ends at step 1 ({a}'s at 2); equal up to there" in result.out
    assert "SOAKLAB_TRACE_DUMP" not in result.out
    for run, gamma in ((a, 0.99), (b, 0.9)):
        config = {"algo": "sac", "task": "t", "sim": "mujoco",
                  "config": {"algo": {"gamma": gamma}, "training": {"log_dir": str(run)}}}
        (run / "run_config.json").write_text(json.dumps(config))
    write(b, "learner", [line(0, "loss", critic="1"), line(1, "loss", critic="x"), line(2, "loss", critic="3")])
    result = cli("diff-runs", a, b)
    assert result.code == 1, result.err
    first, second = result.out.splitlines()
    assert first.startswith("diff-runs: configs differ: algo.gamma 0.99 vs 0.9 (the first such key)")
    assert second == f"diff-runs: first difference: step 1, loss tensor critic (2 in {a}, x in {b})"  # no advice


def test_a_dumped_step_shows_the_values_that_differ(cli, tmp_path):
    """SOAKLAB_TRACE_DUMP: both runs saved the step whole; the diff names the element and the gap."""
    tensors = {"loss/critic": torch.tensor(1.5), "weights": torch.tensor([[1.0, 2.0], [3.0, 4.0]])}
    for name, scale in (("a", 1.0), ("b", 1.0 + 2**-20)):
        (tmp_path / name).mkdir()
        trace = Trace(tmp_path / name, "learner", dump_step=7)
        trace.record(6, "weights", {"weights": tensors["weights"]})
        trace.record(7, "weights", {"weights": tensors["weights"] * torch.tensor([[1.0, 1.0], [1.0, scale]])})
        trace.close()
    result = cli("diff-runs", tmp_path / "a", tmp_path / "b")
    assert result.code == 1
    first, values = result.out.splitlines()[:2]
    # step 6 agreed; at step 7 run A still holds the weights step 6 held
    held = digest(tensors["weights"])
    run_a = tmp_path / "a"
    assert first.startswith(f"diff-runs: first difference: step 7, weights tensor weights ({held} in {run_a}, ")
    assert values.startswith("  values: 1 of 4 elements differ; the first at [1, 1]: 4.0 and 4.00000")
