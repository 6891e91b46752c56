"""The env step's kernel census: each activity counted in the phase window it starts in, groups
named by what launched them; the profile itself on a GPU only."""

from __future__ import annotations

import pytest
import torch

from soaklab.bench import env_profile
from soaklab.bench.env_profile import Span, census, kernel_group, profile_phases


def test_kernel_groups_name_warp_functions_torch_kernels_and_copies():
    assert kernel_group("_solve_init_efc_7f3a9c21_cuda_kernel_forward") == ("warp", "_solve_init_efc")
    assert kernel_group("triton_poi_fused_add_mul_3") == ("torch", "triton_poi_fused_add_mul")
    assert kernel_group("Memcpy DtoD (Device -> Device)") == ("copy", "Memcpy")
    assert kernel_group("void at::native::elementwise_kernel<128, 2>")[0] == "torch"


def test_each_activity_counts_in_the_window_it_starts_in_and_strays_apart():
    windows = [Span("physics", 0, 100), Span("task", 100, 130), Span("physics", 200, 300), Span("task", 300, 340)]
    kernels = [Span("a_0123456_cuda_kernel_forward", 5, 45), Span("a_0123456_cuda_kernel_forward", 210, 250),
               Span("triton_poi_fused_x_0", 101, 111), Span("triton_poi_fused_x_1", 305, 309),
               Span("stray", 150, 160)]
    out = census(windows, kernels, steps=2)
    physics, task = out["phases"]["physics"], out["phases"]["task"]
    assert physics["kernels_per_step"] == 1.0 and physics["busy_ms_per_step"] == 0.04
    assert physics["window_ms_per_step"] == 0.1 and physics["busy_share_of_window"] == 0.4
    assert physics["top"] == [{"group": "warp:a", "launches_per_step": 1.0, "busy_ms_per_step": 0.04}]
    assert task["by_origin"] == {"torch": {"kernels_per_step": 1.0, "busy_ms_per_step": 0.007}}
    assert out["outside_windows"]["kernels_per_step"] == 0.5
    assert out["outside_windows"]["top"][0]["group"] == "torch:stray"


def test_a_real_profile_attributes_the_ops_each_phase_ran():
    """On the CPU the host's aten ops stand in for kernels: the phase that multiplies shows its
    matmuls, the one that adds shows its adds, each once per step."""
    x = torch.randn(64, 64)
    out = profile_phases([("matmul", lambda: x @ x), ("add", lambda: x + 1)], steps=3, device="cpu")
    matmul, add = out["phases"]["matmul"], out["phases"]["add"]
    assert any(row["group"] == "torch:aten::matmul" and row["launches_per_step"] == 1.0 for row in matmul["top"])
    assert any(row["group"] == "torch:aten::add" and row["launches_per_step"] == 1.0 for row in add["top"])
    assert not any("matmul" in row["group"] for row in add["top"])


def test_bad_settings_and_a_machine_without_a_gpu_fail_closed(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert env_profile.main(["--num-envs", "0", "--output", str(out)]) == 2
    assert "--num-envs 0: must be >= 1" in capsys.readouterr().err
    if not torch.cuda.is_available():
        manifest = tmp_path / "manifest.json"
        manifest.write_text('{"scene": {"path": "s.xml"}, "motion": {"path": "m.npz"}}')
        assert env_profile.main(["--num-envs", "8", "--assets-manifest", str(manifest), "--output", str(out)]) == 2
        assert "needs an NVIDIA GPU" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)")
def test_cuda_kernels_land_in_their_phase():
    x = torch.randn(512, 512, device="cuda")
    out = profile_phases([("mm", lambda: x @ x)], steps=2, device="cuda")
    assert out["phases"]["mm"]["kernels_per_step"] >= 1
