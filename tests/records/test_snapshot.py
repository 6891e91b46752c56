"""Timing figures read from a real TensorBoard event file as the trainer writes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from soaklab.metrics.events import event_file, read_scalars
from soaklab.records.plan import RULE_OF, Figure
from soaklab.records.snapshot import figure_value

ITERATIONS = 200
LUMP = 50  # the collector publishes its phase times every LUMP iterations, as on the GPU


def write_run(log_dir: Path) -> None:
    writer = SummaryWriter(log_dir=str(log_dir))
    for step in range(ITERATIONS):
        writer.add_scalar("Perf/iteration_ms", 14.0 if step % 10 else 30.0, step)  # a slow iteration in ten
        writer.add_scalar("Perf/learner_update_ms", 12.0 + (step % 3), step)
        # Zero in between; at a publication the env-step time of the LUMP iterations since the last.
        writer.add_scalar("Perf/collector_env_step_ms", 13.0 * LUMP if step % LUMP == LUMP - 1 else 0.0, step)
    writer.close()


@pytest.fixture
def frame(tmp_path: Path):
    write_run(tmp_path)
    return read_scalars(event_file(tmp_path))


def timing(name: str) -> Figure:
    return Figure(name, RULE_OF[name])


def test_collector_phase_is_the_window_sum_per_iteration(frame) -> None:
    # A median of the lumped series would be 0.0: the figure the first GPU record carried.
    assert figure_value(frame, timing("collector_env_step_ms"), 1024) == pytest.approx(13.0)


def test_per_iteration_phases_are_medians_over_the_second_half(frame) -> None:
    assert figure_value(frame, timing("learner_update_ms"), 1024) == pytest.approx(13.0)
    assert figure_value(frame, timing("iteration_ms"), 1024) == pytest.approx(14.0)


def test_a_cpu_machine_kind_names_the_instruction_set() -> None:
    """Two VMs both called "AMD EPYC" x2, one with AVX-512 and one with AVX2 only, are two kinds: the
    ci-dag record's bits differ between them. A soak JSON from before the capability was recorded
    keeps the kind its record was filed under."""
    from soaklab.records.snapshot import machine_kind

    avx2 = {"host": {"cpu_model": "AMD EPYC", "cores": 2, "cpu_capability": "AVX2"}}
    avx512 = {"host": {"cpu_model": "AMD EPYC", "cores": 2, "cpu_capability": "AVX512"}}
    assert machine_kind(avx2, "cpu") == "cpu: AMD EPYC x2, AVX2"
    assert machine_kind(avx512, "cpu") != machine_kind(avx2, "cpu")
    assert machine_kind({"host": {"cpu_model": "AMD EPYC", "cores": 2}}, "cpu") == "cpu: AMD EPYC x2"
    assert machine_kind({**avx2, "gpus": [{"name": "NVIDIA H200"}]}, "gpu") == "gpu: NVIDIA H200 x1"
    # under a numerics profile the kind is the arithmetic: the model and the cores drop out
    profiled = {"host": {**avx512["host"], "cpu_capability": "AVX2", "machine": "x86_64", "vendor": "AuthenticAMD"},
                "numerics": {"cpu_capability": "avx2", "threads": 2, "task_terms": "inductor", "env": {},
                             "host_lacks": None}}
    assert machine_kind(profiled, "cpu") == "cpu: x86_64 AVX2 AMD, 2 threads, inductor task terms"


def test_a_damaged_final_checkpoint_is_one_line_not_a_traceback(tmp_path) -> None:
    """`record compare` digests each seed's final weights: a truncated file, one that is not a torch
    file and a missing one are each refused in one line naming the file."""
    import torch

    from soaklab.errors import InvalidInput
    from soaklab.records.snapshot import weights_digest

    good = tmp_path / "model_final.pt"
    torch.save({"agent": {"actor": {"w": torch.arange(6.0).reshape(2, 3)}}}, good)
    assert weights_digest(good).startswith("sha256:")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    text = tmp_path / "text.pt"
    text.write_text("not a checkpoint\n")
    for path, words in ((truncated, "not a soaklab checkpoint"), (text, "not a soaklab checkpoint"),
                        (tmp_path / "gone.pt", "missing")):
        with pytest.raises(InvalidInput) as refused:
            weights_digest(path)
        assert str(refused.value).startswith(f"{path}: ") and words in str(refused.value)
        assert "\n" not in str(refused.value)


def test_a_checkpoint_whose_members_declare_more_than_it_holds_is_refused_before_torch_reads_it(tmp_path) -> None:
    """torch writes its members stored: a deflated member that inflates past its stored size is a
    forged archive (torch would allocate what it declares)."""
    import zipfile

    from soaklab.errors import InvalidInput
    from soaklab.files.checkpoints import load_weights

    forged = tmp_path / "model_final.pt"
    with zipfile.ZipFile(forged, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        info = zipfile.ZipInfo("archive/data/0")
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, bytes(8 << 20))
    with pytest.raises(InvalidInput) as refused:
        load_weights(forged)
    assert str(refused.value).startswith(f"{forged}: member archive/data/0 declares 8,388,608 bytes in ")
