"""The backend diagnostics payload (docs/assets-and-tasks.md): available with details, or why not; never null."""

from __future__ import annotations

from typing import Any


def available(backend_type: str, **diagnostics: Any) -> dict[str, Any]:
    return {"available": True, "backend_type": backend_type, "diagnostics": diagnostics}


def unavailable(backend_type: str, reason: str) -> dict[str, Any]:
    return {"available": False, "backend_type": backend_type, "unavailable_reason": reason}


def cuda_graph(requested: bool, enabled: bool, disable_reason: str | None) -> dict[str, Any]:
    return {"requested": requested, "enabled": enabled, "disable_reason": disable_reason}
