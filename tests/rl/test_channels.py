"""The collector's metric rows: the learner reads those of the vector it takes in, even when the
collector, one vector ahead, has published the next ones (soaklab.rl.channels)."""

from __future__ import annotations

import numpy as np

from soaklab.contract.layout import CONTROL_WORDS
from soaklab.rl.channels import C, collector_metrics, publish_metrics


def rows(num_metrics: int = 3) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((2, num_metrics + 1)), np.zeros(CONTROL_WORDS, dtype=np.int64)


def test_nothing_published_reads_zeros() -> None:
    metrics, _ = rows()
    assert collector_metrics(metrics, 0).tolist() == [0.0, 0.0, 0.0]


def test_the_learner_reads_the_vector_it_takes_in_not_the_one_ahead() -> None:
    metrics, control = rows()
    publish_metrics(metrics, control, np.array([1.0, 2.0, 3.0]), step=4)
    publish_metrics(metrics, control, np.array([7.0, 8.0, 9.0]), step=5)  # the collector, one vector ahead
    assert collector_metrics(metrics, 4).tolist() == [1.0, 2.0, 3.0]
    assert collector_metrics(metrics, 5).tolist() == [7.0, 8.0, 9.0]
    assert collector_metrics(metrics, 3).tolist() == [0.0, 0.0, 0.0]  # before the first publication
    assert control[C.METRICS_SEQ] == 2


def test_values_hold_between_publications_and_none_repeats_them() -> None:
    metrics, control = rows()
    publish_metrics(metrics, control, np.array([1.0, 2.0, 3.0]), step=9)
    assert collector_metrics(metrics, 15).tolist() == [1.0, 2.0, 3.0]
    publish_metrics(metrics, control, None, step=19)
    publish_metrics(metrics, control, np.array([4.0, 5.0, 6.0]), step=29)  # overwrites step 9's row
    assert collector_metrics(metrics, 19).tolist() == [1.0, 2.0, 3.0]
    assert collector_metrics(metrics, 29).tolist() == [4.0, 5.0, 6.0]
