"""What machine and software a measurement ran on, for benchmark and soak JSON."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from soaklab.catalogue import compared_versions


def _cpuinfo(field: str) -> str | None:
    """The first value of `field` in /proc/cpuinfo, or None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_vendor() -> str:
    """The CPU's maker as /proc/cpuinfo names it ("GenuineIntel", "AuthenticAMD"): MKL's GEMM branches
    round differently on the two under every numerics setting measured (docs/records.md)."""
    return _cpuinfo("vendor_id") or "unknown"


def cpu_capability() -> str:
    """The instruction set torch's CPU kernels dispatch to here ("AVX2", "AVX512", "DEFAULT", ...;
    ATEN_CPU_CAPABILITY lowers it). Float results differ in the last bits between these, so a bitwise
    record is kept per capability (docs/records.md)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def usable_cpus() -> tuple[int, ...]:
    """The CPU ids this process may run on (its affinity), in order."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def usable_cores() -> int:
    return len(usable_cpus())


def git_state(cwd: Path | None = None) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def versions(names: tuple[str, ...] | None = None) -> dict[str, str | None]:
    """The interpreter's, soaklab's and each package a backend's runs are compared on (every catalogue
    entry's `versions`, soaklab.catalogue.compared_versions; `names`: only these): a module's
    __version__, None where it is not installed."""
    import soaklab

    found: dict[str, str | None] = {"python": sys.version.split()[0], "soaklab": soaklab.__version__}
    for name in compared_versions() if names is None else names:
        if name in found:
            continue
        try:
            # A plug-in's entry names these modules: whatever their import prints or raises is theirs,
            # never this command's output or its failure (a measurement already made is still written).
            with contextlib.redirect_stdout(io.StringIO()):
                found[name] = getattr(importlib.import_module(name), "__version__", "unknown")
        except (Exception, SystemExit):  # not installed, not a module's name, or its import fails
            found[name] = None
    return found


def cpu_identity() -> dict[str, Any]:
    """What a cpu record's machine kind is made of (soaklab.records.snapshot.machine_kind)."""
    return {"cpu_model": cpu_model(), "cores": usable_cores(), "cpu_capability": cpu_capability(),
            "machine": platform.machine(), "vendor": cpu_vendor()}


def host_record() -> dict[str, Any]:
    return {**cpu_identity(), "system": platform.system(), "hostname": platform.node()}
