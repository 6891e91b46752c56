"""The comparison rules on figures made here: exact series, ratio bands, the bootstrap A/B of seeds,
and reproductions that cannot be compared."""

from __future__ import annotations

from pathlib import Path

from soaklab.records.compare import bootstrap_row, compare, first_difference, ratio_row
from soaklab.records.outcome import headline, verdict_lines
from soaklab.records.plan import Figure, Record, RecordRun


def test_first_difference_names_the_earliest_step_and_its_series():
    record = {"Loss/critic": [[0, 1.0], [1, 2.0], [2, 3.0]], "Train/step_reward": [[0, 0.5], [1, 0.25]]}
    assert first_difference(record, record) is None
    now = {"Loss/critic": [[0, 1.0], [1, 2.0], [2, 3.5]], "Train/step_reward": [[0, 0.5], [1, 0.5]]}
    assert first_difference(record, now) == {"series": "Train/step_reward", "step": 1, "record": 0.25, "now": 0.5}
    shorter = {"Loss/critic": [[0, 1.0]], "Train/step_reward": record["Train/step_reward"]}
    assert first_difference(record, shorter)["step"] == 1
    assert first_difference(record, {"Loss/critic": record["Loss/critic"]})["series"] == "Train/step_reward"


def test_a_ratio_inside_its_band_passes_and_outside_fails():
    figure = Figure("env_steps_per_s", "ratio", band=(0.9, 1.1))
    assert ratio_row(figure, [100.0, 102.0, 98.0], [104.0, 101.0, 99.0])["verdict"] == "pass"
    row = ratio_row(figure, [100.0, 102.0, 98.0], [80.0, 81.0, 79.0])
    assert row["verdict"] == "fail" and abs(row["ratio"] - 0.8) < 1e-9
    assert ratio_row(figure, [100.0], [None])["verdict"] == "fail"


def test_the_bootstrap_detects_a_real_change_and_not_seed_noise():
    figure = Figure("mean_reward", "bootstrap", tolerance=0.15, relative=True, at_env_steps=8_600_000)
    record = [7.9, 7.6, 7.8]
    same = bootstrap_row(figure, record, [7.5, 8.0, 7.7])
    assert same["verdict"] == "pass" and same["interval"][0] <= 0 <= same["interval"][1]
    ablated = bootstrap_row(figure, record, [4.9, 4.6, 4.8])
    assert ablated["verdict"] == "fail" and ablated["interval"][1] < -ablated["tolerance"]
    assert ablated["rank_test_p"] is not None and "interval" in ablated["detail"]
    # The interval is a function of the figures: the same inputs, the same verdict.
    assert bootstrap_row(figure, record, [4.9, 4.6, 4.8])["interval"] == ablated["interval"]


def _record(exact: bool, figures: tuple[Figure, ...]) -> Record:
    run = {"algo": "sac", "task": "g1_motion_tracking", "sim": "mujoco", "overrides": {"env.seed": 1, "algo.seed": 1}}
    runs = (RecordRun(1, "rec-probe-seed1", run),)
    return Record("probe", Path("records/probe"), "", "cpu", exact, runs, figures, ())


def _snap(series, fps, machine="cpu: X x2", torch="2.13.0+cpu"):
    return {"run": "rec-probe-seed1", "machine_kind": machine, "commit": "c",
            "versions": {"python": "3.11", "torch": torch, "mujoco": "4.0.0", "warp": None, "mujoco_warp": None},
            "series": series, "weights_sha256": "sha256:" + "0" * 64, "validation": [["leak verdict", True]],
            "figures": {"env_steps_per_s": fps}, "overrides": {"env.seed": 1, "algo.seed": 1}}


def test_compare_verdicts_and_not_comparable():
    record = _record(True, (Figure("env_steps_per_s", "ratio", band=(0.5, 2.0)),))
    snap = _snap({"Loss/critic": [[0, 1.0]]}, 100.0)
    provenance = {"machine_kind": snap["machine_kind"], "versions": snap["versions"], "commit": "c"}
    passed = compare(record, provenance, {"seed1": snap}, {"seed1": _snap({"Loss/critic": [[0, 1.0]]}, 120.0)})
    assert passed["verdict"] == "pass" and passed["first_difference"] is None and passed["changes"] == {}
    assert passed["dirty"] == {"record": None, "now": None}  # git could not say for either
    moved = compare(record, provenance | {"dirty": False}, {"seed1": snap},
                    {"seed1": _snap({"Loss/critic": [[0, 1.0]]}, 120.0) | {"dirty": True}})
    assert moved["dirty"] == {"record": False, "now": True}  # a tree with uncommitted changes says so
    failed = compare(record, provenance, {"seed1": snap}, {"seed1": _snap({"Loss/critic": [[0, 1.5]]}, 120.0)})
    assert failed["verdict"] == "fail"
    assert failed["first_difference"] == {"run": "seed1", "series": "Loss/critic", "step": 0, "record": 1.0, "now": 1.5}
    other = compare(record, provenance, {"seed1": snap}, {"seed1": _snap({"Loss/critic": [[0, 1.5]]}, 100.0,
                                                                          torch="2.14.0+cpu")})
    assert other["verdict"] == "not_comparable" and "torch" in other["reason"]
    assert {row["verdict"] for row in other["figures"]} == {"not_comparable"}
    machine = compare(record, provenance, {"seed1": snap}, {"seed1": _snap(snap["series"], 100.0, machine="cpu: Y x8")})
    assert machine["verdict"] == "not_comparable" and "machine kind" in machine["reason"]


def test_a_host_without_the_profile_is_not_comparable_in_one_line_and_its_statistics_are_judged():
    """Bits and speeds belong to a machine kind; the learning figures are distributions over seeds, judged
    on any host: the verdict stays not_comparable, `statistics` says whether the run learns as it did."""
    figures = (Figure("env_steps_per_s", "ratio", band=(0.5, 2.0)),
               Figure("mean_reward", "bootstrap", tolerance=0.05, relative=True, at_env_steps=480))
    record = _record(True, figures)
    kind = "cpu: x86_64 AVX2, 2 threads, inductor task terms"
    recorded = _snap({"Loss/critic": [[0, 1.0]]}, 100.0, machine=kind)
    recorded["figures"]["mean_reward@480"] = 0.50
    provenance = {"machine_kind": kind, "versions": recorded["versions"], "commit": "c"}
    lacking = "this CPU has no avx2, fma; the profile runs AVX2"
    now = _snap({"Loss/critic": [[0, 1.5]]}, 30.0, machine="cpu: x86_64 DEFAULT, 2 threads, inductor task terms")
    now["figures"]["mean_reward@480"] = 0.51
    now["host_lacks"] = lacking
    judged = compare(record, provenance, {"seed1": recorded}, {"seed1": now})
    assert judged["verdict"] == "not_comparable" and judged["host_lacks"] == lacking
    assert judged["reason"] == f"this host cannot run the record's numerics profile: {lacking}"
    assert judged["statistics"] == "pass"
    rows = {row["name"]: row["verdict"] for row in judged["figures"]}
    assert rows["mean_reward@480"] == "pass" and rows["env_steps_per_s"] == "not_comparable"
    assert rows["Train/ and Loss/ series (seed1)"] == "not_comparable"
    now["figures"]["mean_reward@480"] = 0.40  # 20 % below the record: learning changed
    assert compare(record, provenance, {"seed1": recorded}, {"seed1": now})["statistics"] == "fail"
    # on a host that runs the profile, the same figures are judged with the bits
    now.pop("host_lacks")
    now["machine_kind"] = kind
    same = compare(record, provenance, {"seed1": recorded}, {"seed1": now})
    assert same["verdict"] == "fail" and same["host_lacks"] is None and same["statistics"] == "fail"


def test_a_deterministic_gpu_record_is_judged_bit_for_bit_on_its_kind_only():
    """training.deterministic on the GPU (docs/determinism.md): the kind names the GPU model, driver,
    CUDA and the mode. On that kind the series, weights and checks are judged bit for bit (the first
    differing step named) and throughput within its band; on another GPU model, or another driver, the
    pairing is not_comparable with the reason, never a pass or a fail; the learning figures are still
    judged."""
    from soaklab.records.recheck import checked_verdict
    from soaklab.records.snapshot import machine_kind

    def kind(name: str, driver: str = "570.124.06") -> str:
        return machine_kind({"gpus": [{"name": name, "driver": driver, "uuid": "GPU-0"}],
                             "determinism": {"enabled": True, "cuda": "12.8"}}, "gpu")

    h100 = kind("NVIDIA H100 80GB HBM3")
    assert h100 == "gpu: NVIDIA H100 80GB HBM3 x1, driver 570.124.06, CUDA 12.8, deterministic"
    assert machine_kind({"gpus": [{"name": "NVIDIA H100 80GB HBM3", "driver": "570.124.06"}]}, "gpu") == \
        "gpu: NVIDIA H100 80GB HBM3 x1"  # a default GPU run's kind is as it was
    learning = Figure("mean_reward", "bootstrap", tolerance=0.15, relative=True, at_env_steps=1000)
    record = _record(True, (Figure("env_steps_per_s", "ratio", band=(0.9, 1.1)), learning))
    series = {"Loss/critic": [[0, 1.0], [1, 2.0]], "Train/step_reward": [[0, 0.5], [1, 0.5]]}

    def snap(machine: str, series: dict, fps: float) -> dict:
        out = _snap(series, fps, machine=machine)
        out["figures"][learning.key] = 3.0
        return out

    recorded = snap(h100, series, 100.0)
    provenance = {"machine_kind": h100, "versions": recorded["versions"], "commit": "c"}
    same = compare(record, provenance, {"seed1": recorded}, {"seed1": snap(h100, series, 104.0)})
    assert same["verdict"] == "pass" and same["first_difference"] is None
    moved = {**series, "Loss/critic": [[0, 1.0], [1, 2.0000002]]}
    failed = compare(record, provenance, {"seed1": recorded}, {"seed1": snap(h100, moved, 100.0)})
    assert failed["verdict"] == "fail" and failed["first_difference"]["step"] == 1
    assert failed["first_difference"]["series"] == "Loss/critic"
    slow = compare(record, provenance, {"seed1": recorded}, {"seed1": snap(h100, series, 70.0)})
    assert slow["verdict"] == "fail"  # throughput stays a band
    assert [r["verdict"] for r in slow["figures"] if r["rule"] == "exact"] == ["pass"] * 3
    assert same["bits"] == "equal" and failed["bits"] == "differ"
    for other in (kind("NVIDIA H200"), kind("NVIDIA H100 80GB HBM3", driver="580.65.06")):
        judged = compare(record, provenance, {"seed1": recorded}, {"seed1": snap(other, moved, 70.0)})
        assert judged["verdict"] == "not_comparable", judged
        assert judged["bits"] == "differ" and "bits, listed and not judged: differ" in headline(judged)
        series_line, weights_line = verdict_lines(judged)[1:3]  # each bitwise row says whether it held
        assert series_line.startswith("  not_comparable, differs: Train/ and Loss/ series (seed1): first difference")
        assert weights_line.startswith("  not_comparable, held: final weights (seed1): ")
        equal = compare(record, provenance, {"seed1": recorded}, {"seed1": snap(other, series, 100.0)})
        assert equal["verdict"] == "not_comparable" and equal["bits"] == "equal"  # measured, still not judged
        assert "the GPU model, driver and CUDA its kind names" in judged["reason"]
        assert {r["verdict"] for r in judged["figures"] if r["rule"] != "bootstrap"} == {"not_comparable"}
        assert judged["statistics"] == "pass"  # the learning figure is judged all the same
        assert checked_verdict(judged, "comparison.json") == "not_comparable"
