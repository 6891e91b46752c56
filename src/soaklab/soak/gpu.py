"""GPU facts from nvidia-smi: identity for the context, memory per process for the samples.

nvidia-smi is what every NVIDIA host has (no Python binding needed); on a host
without it every answer is None and the soak JSON says so.
"""

from __future__ import annotations

from typing import Any

from soaklab.gpu.nvidia import smi_query


def gpu_identity() -> list[dict[str, Any]] | None:
    rows = smi_query("--query-gpu=index,uuid,name,driver_version,memory.total")
    if rows is None:
        return None
    return [{"index": int(r[0]), "uuid": r[1], "name": r[2], "driver": r[3], "memory_total_mib": int(r[4])}
            for r in rows if len(r) == 5]


def memory_by_pid() -> dict[int, int] | None:
    """Bytes of GPU memory each compute process holds (None without nvidia-smi)."""
    rows = smi_query("--query-compute-apps=pid,used_memory")
    if rows is None:
        return None
    used: dict[int, int] = {}
    for row in rows:
        if len(row) == 2 and row[0].isdigit() and row[1].isdigit():
            used[int(row[0])] = used.get(int(row[0]), 0) + int(row[1]) * (1 << 20)
    return used
