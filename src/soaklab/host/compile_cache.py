"""torch.compile's cache, kept per instruction set and versions.

Inductor keys its cached CPU kernels by the graph, not by the ISA they were built for: a run under
ATEN_CPU_CAPABILITY=avx2 that found kernels an earlier AVX-512 run had compiled loaded them, turned
NaN at its first step (SAC) or indexed out of bounds (FlashSAC) (measured on main c65c09d,
docs/records.md). Each (architecture, capability, torch, python) gets a folder of its own under the
cache's base, so a kernel is only ever reused by what it was compiled for.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
# The base the keyed folders live under, kept for child processes (which must not key twice).
BASE_ENV = "SOAKLAB_COMPILE_CACHE_BASE"


def cache_key() -> str:
    import torch

    from soaklab.host.info import cpu_capability

    raw = (f"{platform.machine()}-{cpu_capability()}-torch{torch.__version__}"
           f"-py{sys.version_info.major}{sys.version_info.minor}")
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", raw).lower()


def use_keyed_cache() -> Path:
    """Point inductor at this process's keyed cache folder (under the user's TORCHINDUCTOR_CACHE_DIR
    when set, else torch's default folder) and return it. Idempotent, and children inherit it."""
    base = os.environ.get(BASE_ENV)
    if base is None:
        from torch._inductor.runtime.runtime_utils import default_cache_dir

        base = os.environ.get(CACHE_ENV) or default_cache_dir()
        os.environ[BASE_ENV] = base
    folder = Path(base) / cache_key()
    os.environ[CACHE_ENV] = str(folder)
    return folder


def start_compile_workers() -> None:
    """Start torch.compile's worker pool now, while the process builds what it will compile, rather than
    at its first compile. The soak's leak window opens at the trainer's first finished iteration
    (soaklab.soak.leak); a pool of a process per core that appears inside it, at the first update or
    the first env step, reads as growth: a deterministic GPU soak of 300 iterations went from 4 to 37
    processes 10 s into that window and failed resource_leak (H100, 2026-12-07,
    benchmarks/visits/2026-12-07-det-dense/). Inductor starts the pool's sidecar with `warm_pool` and
    its workers at the first job, `use_process_pool`'s readiness probe; with one compile thread both do
    nothing and compiles stay in process, as before. Inductor quiesces a pool 60 s after its last job
    (its workers exit; the next compile starts them again): a first update more than a minute after
    the build would start them inside the window after all, so this process's pool is not quiesced."""
    try:
        from torch._inductor import config
        from torch._inductor.async_compile import AsyncCompile

        config.quiesce_async_compile_pool = False  # read when the pool is made, just below
        AsyncCompile.warm_pool()
        AsyncCompile.use_process_pool()
    except Exception as exc:  # noqa: BLE001 - a torch without these starts its pool lazily, as before
        print(f"soaklab: torch.compile's workers start at the first compile ({type(exc).__name__}: {exc})",
              file=sys.stderr, flush=True)
