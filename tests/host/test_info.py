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


def test_a_backends_version_module_that_prints_or_fails_on_import_is_recorded_as_none(tmp_path, monkeypatch, capsys):
    """A plug-in's backend names the modules its runs are compared on: one whose import prints, raises
    or exits leaves this command's output and outcome alone (a measurement already made is written)."""
    from soaklab.catalogue import BACKENDS, HOST_BRIDGE, Backend
    from soaklab.host.info import versions

    (tmp_path / "chatty_mod.py").write_text("print('hello from an import')\n__version__ = '1.0'\n")
    (tmp_path / "broken_mod.py").write_text("raise RuntimeError('CUDA driver too old')\n")
    (tmp_path / "exiting_mod.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(BACKENDS, "toy", Backend("toy", "soaklab.sim.mujoco_cpu:MujocoBackend", HOST_BRIDGE,
                                                 ("chatty_mod", "broken_mod", "exiting_mod")))
    found = versions()
    assert (found["chatty_mod"], found["broken_mod"], found["exiting_mod"]) == ("1.0", None, None)
    assert "hello" not in capsys.readouterr().out
