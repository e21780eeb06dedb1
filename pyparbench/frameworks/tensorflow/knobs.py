"""TensorFlow's process-wide knobs: thread pools, the scheduler and (at bf16)
grappler's oneDNN bf16 auto-mixed-precision, applied in
a child (:func:`configure`) or written as the code a user pastes
(:func:`code`), both from the same knobs (:mod:`pyparbench.frameworks.mapping`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["BF16_OPTION", "code", "configure", "report"]

# Grappler's rewrite of a function's graph to oneDNN's bf16 kernels.
BF16_OPTION = "auto_mixed_precision_onednn_bfloat16"


def _apply(call: str, set_: Callable[[], object]) -> None:
    """Run one setter; a value TensorFlow refuses is a ValueError naming the call."""
    try:
        set_()
    except (RuntimeError, ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"TensorFlow refused {call}: {e}") from None


def configure(tf: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Thread pools and the scheduler, set before TensorFlow runs any op;
    returns what TensorFlow reports back.

    Raises
    ------
    ValueError
        TensorFlow refused a value (its message, with the call named).
    """
    threading = tf.config.threading
    inter = int(knobs["inter_op_parallelism_threads"])
    intra = int(knobs["intra_op_parallelism_threads"])
    sync = bool(knobs["synchronous_execution"])
    _apply(f"tf.config.threading.set_inter_op_parallelism_threads({inter})",
           lambda: threading.set_inter_op_parallelism_threads(inter))
    _apply(f"tf.config.threading.set_intra_op_parallelism_threads({intra})",
           lambda: threading.set_intra_op_parallelism_threads(intra))
    _apply(f"tf.config.experimental.set_synchronous_execution({sync})",
           lambda: tf.config.experimental.set_synchronous_execution(sync))
    if knobs.get(BF16_OPTION):
        _apply(f"tf.config.optimizer.set_experimental_options({{{BF16_OPTION!r}: True}})",
               lambda: tf.config.optimizer.set_experimental_options({BF16_OPTION: True}))
    return report(tf)


def report(tf: Any) -> dict[str, Any]:
    """What TensorFlow reports: its pools (0: its own choice), the
    scheduler, the oneDNN switch, grappler's bf16 rewrite, its version."""
    threading = tf.config.threading
    return {
        "inter_op_parallelism_threads": threading.get_inter_op_parallelism_threads(),
        "intra_op_parallelism_threads": threading.get_intra_op_parallelism_threads(),
        "synchronous_execution": tf.config.experimental.get_synchronous_execution(),
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        BF16_OPTION: bool(tf.config.optimizer.get_experimental_options().get(BF16_OPTION)),
        "version": tf.__version__,
    }


def code(knobs: Mapping[str, Any]) -> list[str]:
    """The lines that set ``knobs`` in a user's program, as :func:`configure` does."""
    lines = ["import tensorflow as tf",
             "tf.config.threading.set_inter_op_parallelism_threads("
             f"{int(knobs['inter_op_parallelism_threads'])})",
             "tf.config.threading.set_intra_op_parallelism_threads("
             f"{int(knobs['intra_op_parallelism_threads'])})",
             "tf.config.experimental.set_synchronous_execution("
             f"{bool(knobs['synchronous_execution'])})"]
    if knobs.get(BF16_OPTION):
        lines.append(f"tf.config.optimizer.set_experimental_options({{{BF16_OPTION!r}: True}})")
    if knobs.get("jit_compile"):
        lines.append("# and tf.function(model, jit_compile=True)")
    return lines
