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
