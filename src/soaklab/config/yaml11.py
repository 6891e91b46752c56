"""Floats that YAML 1.1 reads as strings. Standard library only: the DAG loads it by path before it
imports soaklab (workflow/rules/common.smk).

Python and JSON write a small float with an exponent and no dot (1e-05, 3E+2). YAML 1.2 and JSON
read that as a float, but PyYAML reads YAML 1.1 and leaves it a string. So do Snakemake's config
files and its --config. Read that way, a legal learning rate would reach a run as the string '1e-05'.
"""

from __future__ import annotations

import re
from typing import Any

EXPONENT_FLOAT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")


def as_float_if_exponent(value: Any) -> Any:
    """A string in that form as the float it means; any other value as it is."""
    return float(value) if isinstance(value, str) and EXPONENT_FLOAT.fullmatch(value.strip()) else value
