"""TensorFlow's process-wide knobs: thread pools and the scheduler."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["configure"]


def configure(tf: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Thread pools and the scheduler, set before TensorFlow runs any op;
    returns what TensorFlow reports back."""
    tf.config.threading.set_inter_op_parallelism_threads(int(knobs["inter_op_parallelism_threads"]))
    tf.config.threading.set_intra_op_parallelism_threads(int(knobs["intra_op_parallelism_threads"]))
    tf.config.experimental.set_synchronous_execution(bool(knobs["synchronous_execution"]))
    return {
        "inter_op_parallelism_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "intra_op_parallelism_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "synchronous_execution": tf.config.experimental.get_synchronous_execution(),
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        "version": tf.__version__,
    }
