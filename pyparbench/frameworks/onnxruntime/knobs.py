"""ONNX Runtime's knobs: they live in each session's options.

The session's thread counts, execution mode, optimisation level, spinning
and thread affinities come from the settings (:mod:`pyparbench.frameworks.mapping`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyparbench.frameworks.onnxruntime.versions import NoCommonVersion, probe

__all__ = ["CONFIG_ENTRIES", "code", "configure", "open_session", "reported_options", "session_options"]

# The session config entries the settings set, in the order they are set.
CONFIG_ENTRIES = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning",
                  "session.intra_op_thread_affinities")


def configure(ort: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """ONNX Runtime has no process-wide knobs: sessions carry them. Reports
    its version, its providers and the ONNX IR version and opset its models
    are written in (:func:`.versions.probe`; where there are none, why, and
    each job fails with that line)."""
    ort.set_default_logger_severity(3)
    out: dict[str, Any] = {"version": ort.__version__,
                           "providers": ort.get_available_providers()}
    try:
        out.update(probe(ort).as_dict())
    except NoCommonVersion as e:
        out["onnx_model_error"] = str(e)
    return out


def session_options(ort: Any, knobs: Mapping[str, Any], profile_prefix: str | None = None
                    ) -> Any:
    so = ort.SessionOptions()
    # A knob left out stays at ONNX Runtime's default (a defaults run sets none).
    if "intra_op_num_threads" in knobs:
        so.intra_op_num_threads = int(knobs["intra_op_num_threads"])
    if "inter_op_num_threads" in knobs:
        so.inter_op_num_threads = int(knobs["inter_op_num_threads"])
    if "execution_mode" in knobs:
        so.execution_mode = getattr(ort.ExecutionMode, knobs["execution_mode"])
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                          knobs["graph_optimization_level"])
    for key in CONFIG_ENTRIES:
        if key in knobs and knobs[key] != "":
            so.add_session_config_entry(key, str(knobs[key]))
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return so


def reported_options(so: Any) -> dict[str, Any]:
    """What the session options hold, as ONNX Runtime reports them."""
    out: dict[str, Any] = {
        "intra_op_num_threads": so.intra_op_num_threads,
        "inter_op_num_threads": so.inter_op_num_threads,
        "execution_mode": str(so.execution_mode).split(".")[-1],
        "graph_optimization_level": str(so.graph_optimization_level).split(".")[-1],
    }
    for key in CONFIG_ENTRIES:
        try:
            out[key] = so.get_session_config_entry(key)
        except RuntimeError:  # an entry never set: ONNX Runtime raises
            out[key] = None
    return out


def code(knobs: Mapping[str, Any]) -> list[str]:
    """The lines that make ``knobs`` a session's options in a user's program,
    as :func:`session_options` does (``so``, passed to the session)."""
    lines = ["import onnxruntime as ort",
             "so = ort.SessionOptions()",
             f"so.intra_op_num_threads = {int(knobs['intra_op_num_threads'])}",
             f"so.inter_op_num_threads = {int(knobs['inter_op_num_threads'])}",
             f"so.execution_mode = ort.ExecutionMode.{knobs['execution_mode']}",
             "so.graph_optimization_level = "
             f"ort.GraphOptimizationLevel.{knobs['graph_optimization_level']}"]
    lines += [f"so.add_session_config_entry({key!r}, {str(knobs[key])!r})"
              for key in CONFIG_ENTRIES if key in knobs and knobs[key] != ""]
    lines.append('session = ort.InferenceSession("model.onnx", so)  # your model')
    return lines


def open_session(ort: Any, model: str | bytes, so: Any, knobs: Mapping[str, Any]) -> Any:
    """An InferenceSession of ``model`` under ``so`` (made from ``knobs``).

    Raises
    ------
    ValueError
        ONNX Runtime refused the options (its message, with the thread
        knobs named): e.g. thread affinities that do not match the intra-op
        thread count, or name CPUs the machine lacks.
    """
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except (RuntimeError, ValueError) as e:
        named = ", ".join(f"{k}={knobs[k]!r}" for k in ("intra_op_num_threads",
                                                       "inter_op_num_threads", *CONFIG_ENTRIES)
                          if k in knobs)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"ONNX Runtime refused the session options ({named}): {first}") from None
