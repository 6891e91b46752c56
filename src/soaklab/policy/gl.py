"""MuJoCo's offscreen GL backend for `soaklab play` (MUJOCO_GL).

MuJoCo fixes its backend when it is first imported, and building the CLI's parser imports it, so
the CLI chooses before the parser exists; this module stays import-light for that reason (every
command's code inputs include it).
"""

from __future__ import annotations

import os

from soaklab.errors import InvalidInput

GL_BACKENDS = ("glfw", "egl", "osmesa")


def choose_gl(requested: str | None) -> str:
    """--gl, else MUJOCO_GL, else glfw with a display, else egl."""
    chosen = requested or os.environ.get("MUJOCO_GL") or ("glfw" if os.environ.get("DISPLAY") else "egl")
    if chosen not in GL_BACKENDS:
        raise InvalidInput(f"--gl/MUJOCO_GL={chosen}: must be one of {', '.join(GL_BACKENDS)}")
    return chosen


def preset_gl(argv: list[str]) -> None:
    """Set MUJOCO_GL from the raw arguments of `soaklab play` (a bad --gl is left to the parser)."""
    if not argv or argv[0] != "play":
        return
    given = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--gl"), None)
    given = next((a.split("=", 1)[1] for a in argv if a.startswith("--gl=")), given)
    if given in GL_BACKENDS or given is None:
        os.environ["MUJOCO_GL"] = choose_gl(given)


def gl_load_error(value: str, exc: BaseException) -> str:
    """The one line for a MUJOCO_GL that MuJoCo cannot load (it fails at import, before any command)."""
    return (f"MUJOCO_GL={value}: MuJoCo cannot load this GL backend ({type(exc).__name__}: {exc}); "
            f"unset MUJOCO_GL or choose one this machine has ({', '.join(GL_BACKENDS)})")
