"""torch.compile's cache is kept per instruction set (soaklab.host.compile_cache), on real processes:
a G1 task term compiled under the host's own capability and then under a lower one, from the same
cache base, compiles afresh (no FX-graph cache hit) and computes what the eager term does. Unkeyed, inductor
handed the second process the first one's kernels: on an AVX-512 host they stepped the G1 env to
rewards of -1e22 and NaN."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from soaklab.host.numerics import CAPABILITIES

PROBE = Path(__file__).with_name("compiled_terms_probe.py")


def _probe(g1_assets, capability: str | None, cache_base: Path, out: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "TORCHINDUCTOR_CACHE_DIR", "SOAKLAB_COMPILE_CACHE_BASE")}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_base)
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability
    done = subprocess.run([sys.executable, str(PROBE), str(g1_assets.scene), str(g1_assets.motion), str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out)


def test_terms_compiled_under_one_capability_are_not_reused_under_another(g1_assets, tmp_path):
    own = torch.backends.cpu.get_cpu_capability()
    # a lower capability this host can run: AVX2 below AVX-512, the scalar default below AVX2
    lower = "avx2" if own.startswith("AVX512") else "default"
    shared = tmp_path / "shared"
    first = _probe(g1_assets, None, shared, tmp_path / "own.pt")
    second = _probe(g1_assets, lower, shared, tmp_path / "lower.pt")
    assert first["capability"] == own and second["capability"] == CAPABILITIES[lower].torch_name
    # each capability compiled into a folder of its own under the one base the user named
    assert Path(first["cache"]).parent == Path(second["cache"]).parent == shared
    assert first["cache"] != second["cache"]
    assert sorted(p.name for p in shared.iterdir()) == sorted({Path(first["cache"]).name, Path(second["cache"]).name})
    # the second process compiled its own kernels: nothing of the first one's was handed to it
    assert first["fxgraph_cache"]["miss"] > 0 and second["fxgraph_cache"]["miss"] > 0
    assert second["fxgraph_cache"]["hit"] == 0
    for probe in (first, second):  # each one's compiled graph is on disk in its own folder
        assert any((Path(probe["cache"]) / "fxgraph").rglob("*")), probe["cache"]
    assert torch.isfinite(second["reward"]).all()
    # the compiled term agrees with eager to the tolerance tests/tasks/g1_tracking/test_compile.py holds terms to
    torch.testing.assert_close(second["reward"], second["eager"]["reward"], rtol=1e-4, atol=1e-5)


# A process that starts torch.compile's workers and reports its own children once they are up (or
# what it has after 120 s of waiting: the assertion below then says which case it was), and again
# after inductor's quiesce delay (shortened here to 1 s; 60 s by default) has passed three times.
WORKERS = """
import sys, time, psutil
from torch._inductor import config
from soaklab.host.compile_cache import start_compile_workers
config.quiesce_async_compile_time = 1
start_compile_workers()
me, deadline = psutil.Process(), time.monotonic() + 120
while len(me.children(recursive=True)) < int(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.2)
up = len(me.children(recursive=True))
time.sleep(3 if up else 0)
print(up, len(me.children(recursive=True)))
"""


def test_the_compile_workers_start_before_anything_is_compiled():
    """A process that will compile starts inductor's pool while it builds (soaklab.host.compile_cache):
    its workers exist before the first compile, so a soak's leak window, which opens at the first
    iteration, does not see them appear, nor leave and come back at a compile after inductor's quiesce
    delay. With one compile thread inductor keeps compiles in process."""
    counts = {}
    for threads, wanted in (("2", 3), ("1", 0)):  # the sidecar and two workers; none
        env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS=threads)
        done = subprocess.run([sys.executable, "-c", WORKERS, str(wanted)], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        counts[threads] = tuple(int(n) for n in done.stdout.split()[-2:])
    assert counts["2"][0] >= 3 and counts["2"][1] == counts["2"][0] and counts["1"] == (0, 0), counts
