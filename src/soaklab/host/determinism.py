"""`training.deterministic`: what a process sets so that a GPU run repeats bit for bit (docs/determinism.md).

Both processes that touch the GPU call `enter` before their first cuBLAS call: the learner (at the
start of its run) and the collector (at its spawn, before it builds the env). It exports
`SOAKLAB_DETERMINISTIC=1`, which the MJWarp backend reads when it builds its model
(`opt.deterministic = ALL`), and `CUBLAS_WORKSPACE_CONFIG`, which cuBLAS reads when its handle is
made; the collector, spawned from the learner, inherits both. torch is imported lazily: the
settings contract and the DAG read the constants without it.
"""

from __future__ import annotations

import os
import random
import re
from typing import Any

ENV = "SOAKLAB_DETERMINISTIC"
# cuBLAS picks a reduction split that does not depend on the stream's workspace with either of its two
# documented values; torch refuses a deterministic CUDA matmul without one of them.
CUBLAS_ENV = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_VALUES = (":4096:8", ":16:8")


def enabled() -> bool:
    """Whether this process runs in the deterministic mode (set by `enter`, inherited by a spawned child)."""
    return os.environ.get(ENV) == "1"


def enter(seed: int) -> dict[str, Any]:
    """Switch this process to deterministic arithmetic and seed its global generators (Python and
    torch's, every device) with `seed`; what it set, for the run's manifest. Call it before the first
    CUDA matmul of the process."""
    import torch

    os.environ[ENV] = "1"
    if os.environ.get(CUBLAS_ENV) not in CUBLAS_VALUES:
        os.environ[CUBLAS_ENV] = CUBLAS_VALUES[0]
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False  # benchmarking picks kernels by their measured time
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"  # compile workers, and a config not imported yet
    import torch._inductor.config as inductor

    inductor.deterministic = True  # no kernel chosen by on-device benchmarking
    random.seed(seed)
    torch.manual_seed(seed)  # the CPU generator and every CUDA device's
    return {"enabled": True, CUBLAS_ENV: os.environ[CUBLAS_ENV], "seed": seed,
            "torch_deterministic_algorithms": torch.are_deterministic_algorithms_enabled()}


def version_tuple(version: str) -> tuple[int, ...]:
    """'1.19.0.dev3' -> (1, 19, 0), '4.0.0rc1' -> (4, 0, 0): the release numbers, for a comparison with
    a minimum (a pre-release counts as its release)."""
    return tuple(int(n) for n in re.findall(r"^\d+(?:\.\d+)*", version.split("+")[0])[0].split(".")) \
        if re.match(r"^\d", version) else ()


def lacking(minimums: tuple[tuple[str, str], ...], found: dict[str, str | None]) -> list[str]:
    """The distributions of `minimums` (a backend's catalogue entry, `deterministic`) that `found`
    (name -> installed version, None: absent) lacks or holds below the minimum, each as
    'name VERSION (minimum MIN)'."""
    out = []
    for name, minimum in minimums:
        version = found.get(name)
        if version is None or version_tuple(version) < version_tuple(minimum):
            out.append(f"{name} {version or 'not installed'} (minimum {minimum})")
    return out


def not_exact(pins: tuple[tuple[str, str], ...], found: dict[str, str | None]) -> list[str]:
    """The distributions of `pins` (a backend's `deterministic_exact`) that `found` lacks or holds at
    another release, each as 'name VERSION (needs PIN)'."""
    return [f"{name} {found.get(name) or 'not installed'} (needs {pin})" for name, pin in pins
            if found.get(name) is None or version_tuple(found[name]) != version_tuple(pin)]


def installed_versions(names: tuple[str, ...]) -> dict[str, str | None]:
    """The installed versions of the distributions `names` (None: not installed), read from their
    metadata: nothing is imported."""
    from importlib import metadata

    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
