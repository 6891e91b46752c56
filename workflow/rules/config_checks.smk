# Checks on the merged workflow config that JSON Schema cannot make, run before the schema walks it:
# a YAML alias chain (`a: &x [...]`, `b: [*x, *x, ...]`) expands to a tree far larger than its text,
# and `.inf` / `.nan` are YAML numbers that pass `type: number` (NaN passes every bound).

import math

MAX_CONFIG_VALUES = 10_000  # a real config holds a few hundred


def _expanded_size(node, memo):
    """Values in the tree as it would be written out: shared (aliased) nodes count every time."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a cycle (a recursive alias) counts once here; the total still bounds it
    if isinstance(node, dict):
        size = 1 + sum(_expanded_size(v, memo) for v in node.values())
    elif isinstance(node, list):
        size = 1 + sum(_expanded_size(v, memo) for v in node)
    else:
        size = 1
    memo[key] = size
    return size


def _non_finite(node, path):
    """The first .inf/.nan in the tree, as a dotted key path."""
    if isinstance(node, float) and not math.isfinite(node):
        return path
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        found = _non_finite(value, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def _check_config_values(cfg):
    size = _expanded_size(cfg, {})
    if size > MAX_CONFIG_VALUES:
        raise ValueError(
            f"workflow config: expands to {size:,} values (over {MAX_CONFIG_VALUES:,}); "
            "a YAML alias chain? write the values out"
        )
    bad = _non_finite(cfg, "")
    if bad:
        raise ValueError(f"workflow config: {bad} is not a finite number; give a finite value")


_check_config_values(config)
