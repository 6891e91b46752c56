"""The collector's lump-logged phase times (ACCUMULATED_TAGS) read as time per iteration."""

from __future__ import annotations

import pandas as pd


def accumulated_per_iteration(points: pd.DataFrame, cover: int | None = None) -> float | None:
    """A lump-logged phase time per iteration: the lumps after the first publication kept over the
    iterations they cover (that first lump holds time from before them). With `cover`, only the
    latest publications that span at least `cover` iterations are kept, where the series has them;
    otherwise every publication in `points` is kept. None when fewer than two were published."""
    published = points[points["value"] != 0].sort_values("step")
    if len(published) < 2:
        return None
    if cover is not None:
        # Start at the latest publication at least `cover` iterations before the last: a window
        # of the last `cover` rows alone holds one lump or none on the GPU (published every 100).
        earlier = published[published["step"] <= published["step"].iloc[-1] - cover]
        if not earlier.empty:
            published = published[published["step"] >= earlier["step"].iloc[-1]]
    steps = float(published["step"].iloc[-1] - published["step"].iloc[0])
    return float(published["value"].iloc[1:].sum()) / steps
