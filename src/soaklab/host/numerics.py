"""A numerics profile: every setting that fixes a CPU run's float results, applied on any host.

A bitwise CPU record is not tied to the VM it was made on but to the arithmetic it ran: the
instruction set torch's kernels dispatch to (and with them MKL's GEMM branch and oneDNN's ISA),
the intra-op thread count, and whether the task terms ran torch.compile'd (inductor's kernels
round differently from eager ones). Measured on main c65c09d (docs/records.md, "Numerics
profiles"): the ci-dag run on an AVX-512 EPYC matched the AVX2 record bit for bit under
ATEN_CPU_CAPABILITY=avx2 with a compile cache of its own; its own AVX-512 dispatch, or the same
profile with eager task terms, differed at the first logged step.

The profile is written in a record's spec (`numerics:`), handed to `soaklab soak --numerics`, which
exports it before torch is imported (the trainer and its collector inherit it), and stored in the
soak JSON's context, where the run's machine kind is read from. A host that cannot run it (another
architecture, or a CPU without the instruction set) runs what it can and says which it lacks.

Standard library only: the DAG loads soaklab.records.plan, which checks a spec's profile, by path.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ARCHITECTURE = "x86_64"
VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}  # /proc/cpuinfo's vendor_id, as a kind names it


@dataclass(frozen=True)
class Capability:
    """One instruction set torch can be told to dispatch to, and what follows from it."""

    torch_name: str  # torch.backends.cpu.get_cpu_capability() under it
    cpu_flags: tuple[str, ...]  # /proc/cpuinfo flags a host needs to run it
    mkl_cbwr: str  # MKL's conditional-numerical-reproducibility branch (Intel CPUs honour it)
    onednn_isa: str  # ONEDNN_MAX_CPU_ISA


# ATEN_CPU_CAPABILITY's values on x86-64 (the keys a profile names).
CAPABILITIES = {
    "default": Capability("DEFAULT", (), "COMPATIBLE", "SSE41"),
    "avx2": Capability("AVX2", ("avx2", "fma"), "AVX2", "AVX2"),
    "avx512": Capability("AVX512", ("avx512f", "avx512bw", "avx512vl", "avx512dq"), "AVX512", "AVX512_CORE"),
}
MAX_THREADS = 256
# How the task terms run: torch.compile'd (inductor) or eager. The two differ in the last bits.
COMPILE_MODES = {"inductor": "1", "eager": "0"}
# The environment a profile exports. SOAKLAB_TORCH_COMPILE is soaklab.tasks.registry.COMPILE_ENV
# (not imported: this module stays standard-library only).
PROFILE_ENV = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "SOAKLAB_TORCH_COMPILE")


class ProfileError(ValueError):
    """A profile that names an unknown capability, thread count or compile mode."""


@dataclass(frozen=True)
class NumericsProfile:
    cpu_capability: str  # a key of CAPABILITIES
    threads: int  # torch's intra-op threads and MuJoCo's physics threads (env.num_threads)
    task_terms: str  # a key of COMPILE_MODES

    @property
    def capability(self) -> Capability:
        return CAPABILITIES[self.cpu_capability]

    def env(self) -> dict[str, str]:
        """What the trainer's processes must see before torch is imported."""
        cap = self.capability
        return {"ATEN_CPU_CAPABILITY": self.cpu_capability, "MKL_CBWR": cap.mkl_cbwr,
                "ONEDNN_MAX_CPU_ISA": cap.onednn_isa, "SOAKLAB_TORCH_COMPILE": COMPILE_MODES[self.task_terms]}

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @property
    def label(self) -> str:
        return f"{self.capability.torch_name}, {self.threads} threads, {self.task_terms} task terms"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"key {key!r} appears twice in one object")
        found[key] = value
    return found


def parse_profile(where: str, value: Any) -> NumericsProfile:
    """A profile from a spec's mapping (or its JSON); `where` names it in the one-line error."""
    if isinstance(value, str):
        try:  # soaklab.files.jsonfiles's rules, in the standard library: no key twice, no deep nesting
            value = json.loads(value, object_pairs_hook=_unique_keys)
        except (ValueError, RecursionError) as exc:
            raise ProfileError(f"{where}: {value[:60]!r}{'...' if len(value) > 60 else ''} is not a JSON "
                               f"object ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(value, dict):
        raise ProfileError(f"{where}: expected a mapping with cpu_capability, threads and task_terms")
    fields = ("cpu_capability", "threads", "task_terms")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ProfileError(f"{where}.{unknown[0]}: not a profile setting (settings: {', '.join(fields)})")
    missing = [f for f in fields if f not in value]
    if missing:
        raise ProfileError(f"{where}.{missing[0]}: required")
    capability, threads, terms = value["cpu_capability"], value["threads"], value["task_terms"]
    if capability not in CAPABILITIES:
        raise ProfileError(f"{where}.cpu_capability: {capability!r} is not an x86-64 capability torch dispatches "
                           f"to (one of {', '.join(CAPABILITIES)})")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise ProfileError(f"{where}.threads: {threads!r}: expected an integer in [1, {MAX_THREADS}]")
    if terms not in COMPILE_MODES:
        raise ProfileError(f"{where}.task_terms: {terms!r}: expected one of {', '.join(COMPILE_MODES)}")
    return NumericsProfile(capability, threads, terms)


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def missing_on_host(profile: NumericsProfile, machine: str | None = None, flags: set[str] | None = None) -> str | None:
    """Why this host cannot run `profile` (one line), or None when it can."""
    machine = machine or platform.machine()
    if machine != ARCHITECTURE:
        return f"this host is {machine}; the profile is for {ARCHITECTURE}"
    flags = cpu_flags() if flags is None else flags
    lacking = [f for f in profile.capability.cpu_flags if f not in flags]
    if lacking:
        return f"this CPU has no {', '.join(lacking)}; the profile runs {profile.capability.torch_name}"
    return None


def apply(profile: NumericsProfile) -> dict[str, Any]:
    """Export the profile into this process's environment (before torch is imported: children inherit
    it) and return what the soak context records of it."""
    os.environ.update(profile.env())
    return {**asdict(profile), "env": profile.env(), "host_lacks": missing_on_host(profile)}


def machine_kind(numerics: dict[str, Any], host: dict[str, Any]) -> str:
    """A cpu run's machine kind under a profile: the arithmetic it ran, not the VM's model or cores.
    Architecture, vendor and capability are what the run's host reported (soaklab.host.info.cpu_identity):
    a host that cannot run the profile runs less, and its kind says so. The vendor stays in: MKL's
    GEMM rounds differently on Intel and AMD CPUs under every branch measured (docs/records.md)."""
    profile = parse_profile("numerics", {k: numerics.get(k) for k in ("cpu_capability", "threads", "task_terms")})
    architecture = host.get("machine") or ARCHITECTURE
    capability = host.get("cpu_capability") or profile.capability.torch_name
    vendor = VENDORS.get(host.get("vendor", ""), host.get("vendor"))
    return (f"cpu: {architecture} {capability}{f' {vendor}' if vendor else ''}, {profile.threads} threads, "
            f"{profile.task_terms} task terms")
