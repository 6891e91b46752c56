"""What a measurement says it ran on: the instruction set torch's CPU kernels dispatch to."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "from soaklab.host.info import host_record; print(host_record()['cpu_capability'])"


def capability_under(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_the_capability_is_the_one_torch_dispatches_to() -> None:
    """ATEN_CPU_CAPABILITY lowers torch's dispatch; the record follows what torch runs, not what the
    CPU could run (a record made with it lowered is filed under the lowered capability)."""
    import torch

    assert capability_under({}) == torch.backends.cpu.get_cpu_capability()
    assert capability_under({"ATEN_CPU_CAPABILITY": "default"}) == "DEFAULT"
