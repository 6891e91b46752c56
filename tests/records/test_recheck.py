"""Verdicts recomputed from their rows (soaklab.records.recheck), on comparisons made by compare()."""

from __future__ import annotations

import copy

import pytest

from soaklab.errors import InvalidInput
from soaklab.records.compare import compare
from soaklab.records.plan import Figure, Record, RecordRun
from soaklab.records.recheck import checked_verdict

FIGURES = (Figure("env_steps_per_s", "ratio", band=(0.5, 2.0)),
           Figure("mean_reward", "bootstrap", tolerance=0.15, relative=True, at_env_steps=480))


def comparison(fps_now: float = 120.0, rewards_now: tuple[float, ...] = (7.5, 8.0, 7.7),
               machine_now: str = "cpu: X x2") -> dict:
    """A real comparison of three seeds: a ratio row, a bootstrap row, each seed's exact rows."""
    base = {"algo": "sac", "task": "g1_motion_tracking", "sim": "mujoco"}
    runs = tuple(RecordRun(s, f"rec-probe-seed{s}", {**base, "overrides": {"env.seed": s, "algo.seed": s}})
                 for s in (1, 2, 3))
    record = Record("probe", None, "", "cpu", True, runs, FIGURES, ())  # type: ignore[arg-type]

    def snap(seed: int, fps: float, reward: float, machine: str = "cpu: X x2") -> dict:
        return {"run": f"rec-probe-seed{seed}", "machine_kind": machine, "commit": "c", "dirty": False,
                "versions": {"torch": "2.13.0+cpu", "mujoco": "4.0.0"}, "series": {"Loss/critic": [[0, 1.0]]},
                "weights_sha256": "sha256:" + "0" * 64, "validation": [["leak verdict", True]],
                "figures": {"env_steps_per_s": fps, "mean_reward@480": reward},
                "overrides": {"env.seed": seed, "algo.seed": seed}}

    recorded = {f"seed{s}": snap(s, 100.0, r) for s, r in zip((1, 2, 3), (7.9, 7.6, 7.8), strict=True)}
    now = {f"seed{s}": snap(s, fps_now, r, machine_now) for s, r in zip((1, 2, 3), rewards_now, strict=True)}
    provenance = {"machine_kind": "cpu: X x2", "versions": recorded["seed1"]["versions"], "commit": "c"}
    return compare(record, provenance, recorded, now)


def row(doc: dict, rule: str) -> dict:
    return next(r for r in doc["figures"] if r["rule"] == rule)


def test_real_comparisons_recheck_to_their_own_verdicts():
    assert checked_verdict(comparison(), "c.json") == "pass"
    other = comparison(machine_now="cpu: Y x2")  # another kind: bits listed as held, not judged
    assert other["bits"] == "equal" and {r["held"] for r in other["figures"] if r["rule"] == "exact"} == {True}
    assert checked_verdict(other, "c.json") == "not_comparable"
    assert checked_verdict(comparison(fps_now=20.0), "c.json") == "fail"
    assert checked_verdict(comparison(rewards_now=(4.9, 4.6, 4.8)), "c.json") == "fail"


def forge_pass_over_a_failing_row(doc: dict) -> None:
    doc["verdict"] = "pass"


def forge_a_row_against_its_numbers(doc: dict) -> None:
    row(doc, "ratio")["now"] = 1000.0  # ratio 10, band [0.5, 2]: the row still says pass


def forge_an_interval_its_seeds_do_not_give(doc: dict) -> None:
    row(doc, "bootstrap")["interval"] = [-0.01, 0.01]
    row(doc, "bootstrap")["now_seeds"] = [1.0, 1.1, 0.9]


@pytest.mark.parametrize(("make", "forge", "words"), [
    (lambda: comparison(fps_now=20.0), forge_pass_over_a_failing_row, "verdict: says 'pass', its rows give 'fail'"),
    (comparison, forge_a_row_against_its_numbers, "(env_steps_per_s).verdict: says pass, its own numbers give fail"),
    (comparison, forge_an_interval_its_seeds_do_not_give, "(mean_reward@480).verdict: says pass, its own numbers"),
    (comparison, lambda d: d.update(figures=[]), "figures: none"),
    (comparison, lambda d: row(d, "exact").update(now="99 series, 1 points"), "its own numbers give fail"),
    (comparison, lambda d: row(d, "bootstrap").update(verdict="not_comparable"), "learning figures are judged"),
    (comparison, lambda d: d.update(statistics="fail"), "statistics: says 'fail'"),
    (comparison, lambda d: [r.update(verdict="not_comparable") for r in d["figures"] if r["rule"] != "bootstrap"]
     or d.update(verdict="not_comparable"), "yet the machine kind, versions and numerics profile are the record's"),
    (comparison, lambda d: row(d, "bootstrap").update(tolerance=float("nan")), "its own numbers give fail"),
    (comparison, lambda d: d.update(bits="differ"), "bits: says 'differ', its exact rows give 'equal'"),
    (lambda: comparison(machine_now="cpu: Y x2"), lambda d: row(d, "exact").update(held=False),
     ".held: says False, its own sides give True"),
    (lambda: comparison(machine_now="cpu: Y x2"), lambda d: d.update(bits="differ"),
     "bits: says 'differ', its exact rows give 'equal'"),
    (comparison, lambda d: row(d, "exact").update(held=False), ".held: says False, its own sides give True"),
    (lambda: comparison(machine_now="cpu: Y x2"), lambda d: row(d, "ratio").update(held=True),
     "(env_steps_per_s).held: only a bitwise (rule exact) row says whether it held"),
    (lambda: comparison(machine_now="cpu: Y x2"), lambda d: [r.pop(side) for r in d["figures"] if r["rule"] == "exact"
                                                            for side in ("record", "now")],
     ".held: says True, its own sides give False"),  # a row without sides does not hold by None == None
    (lambda: comparison(machine_now="cpu: Y x2"),
     lambda d: d.update(first_difference={"run": "seed1", "series": "Loss/actor", "step": 17}),
     "bits: says 'equal', yet its first_difference names one"),
])
def test_forged_verdicts_are_refused_naming_the_file_and_field(make, forge, words):
    doc = make()
    forge(doc)
    with pytest.raises(InvalidInput) as refused:
        checked_verdict(doc, "results/reproduce/probe/comparison.json")
    line = str(refused.value)
    assert line.startswith("results/reproduce/probe/comparison.json: ") and words in line, line
    assert "\n" not in line


def test_a_kept_reproduction_names_its_folders_machine():
    doc = comparison()
    kept = copy.deepcopy(doc) | {"machine": "cpu: X x2"}
    assert checked_verdict(kept, "reproduced.json", folder_machine="cpu: X x2") == "pass"
    with pytest.raises(InvalidInput, match="machine: 'cpu: X x2', but it lies in the artifacts of 'cpu: Y x4'"):
        checked_verdict(kept, "reproduced.json", folder_machine="cpu: Y x4")


def test_an_incomplete_comparison_names_why():
    assert checked_verdict({"verdict": "incomplete", "reason": "the soak failed", "figures": []}, "c") == "incomplete"
    with pytest.raises(InvalidInput, match="reason"):
        checked_verdict({"verdict": "incomplete", "figures": []}, "c")
    # nothing was compared: rows or bits would be listed under its verdict as if they had been
    for forged, field in (({"figures": [row(comparison(), "exact")]}, "figures"), ({"bits": "equal"}, "bits")):
        with pytest.raises(InvalidInput, match=f"^c: {field}: an incomplete comparison compared nothing$"):
            checked_verdict({"verdict": "incomplete", "reason": "the soak failed", "figures": []} | forged, "c")
