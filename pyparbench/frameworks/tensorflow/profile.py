"""TensorFlow's profiler trace, read back and charged to the graph's op types.

Each profiled iteration runs inside a ``ppb_iteration`` trace event; the
trace is read from the trace viewer's JSON (TensorFlow's own converter) or,
where that converter is missing, straight from the XSpace protobuf.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from pyparbench.frameworks._common import node_of_scope
from pyparbench.graph import Graph

__all__ = ["CONTAINERS", "ITERATION", "PARSERS", "Events", "Windows", "charge",
           "parse_trace_json", "parse_xplane", "record"]

_CONV_TYPES = ("Conv2D", "DepthwiseConv2dNative", "_FusedConv2D", "_MklNativeConv2D",
               "_MklNativeFusedConv2D", "_MklNativeDepthwiseConv2dNative",
               "_MklNativeFusedDepthwiseConv2dNative", "_FusedDepthwiseConv2dNative",
               "_MklNativePadWithConv2D", "_MklNativePadWithFusedConv2D")
_MATMUL_TYPES = ("MatMul", "_FusedMatMul", "_MklNativeMatMul", "_MklNativeFusedMatMul",
                 "BatchMatMulV2", "BatchMatMulV3", "_MklNativeBatchMatMulV2",
                 "_MklBatchMatMulV2", "_MklNativeFusedBatchMatMulV2", "_MklFusedBatchMatMulV2")
# Bookkeeping kernels: they run, but compute nothing of the model.
_BOOKKEEPING = frozenset({"ReadVariableOp", "Identity", "IdentityN", "Const", "NoOp", "_Arg",
                          "_Retval", "_Recv", "_Send", "Shape"})
# Function calls: their time is their kernels', counted once there.
CONTAINERS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
ITERATION = "ppb_iteration"
PARSERS = ("trace_json", "xplane")

Events = list[tuple[float, str, str, float]]  # (start ns, op name, op type, ns)
Windows = list[tuple[float, float]]


def record(tf: Any, step: Callable[[], None], iterations: int, parser: str
           ) -> tuple[Events, Windows, str]:
    """``iterations`` calls of ``step`` under ``tf.profiler.experimental``:
    the op events, the iteration windows and the parser that read them
    ("trace_json", or "xplane" where asked or where the converter is missing)."""
    if parser not in PARSERS:
        raise ValueError(f"parser must be 'trace_json' or 'xplane', got {parser!r}")
    step()
    logdir = tempfile.mkdtemp(prefix="ppb-tf-profile-")
    try:
        tf.profiler.experimental.start(logdir)
        try:
            for _ in range(iterations):
                with tf.profiler.experimental.Trace(ITERATION):
                    step()
        finally:
            tf.profiler.experimental.stop()
        paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
        if not paths:
            raise RuntimeError(f"the TensorFlow profiler wrote no trace under {logdir}")
        if parser == "trace_json":
            try:
                return (*parse_trace_json(paths[-1]), "trace_json")
            except ImportError:
                return (*parse_xplane(paths[-1]), "xplane (no trace converter)")
        return (*parse_xplane(paths[-1]), "xplane")
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


def charge(graph: Graph, name: str, kind: str, jit_compile: bool) -> str:
    """The graph op type a TensorFlow kernel (op ``name`` of type ``kind``) is charged to."""
    if kind in _BOOKKEEPING:
        return "other"
    nid = node_of_scope(name)
    op = graph.nodes[nid].op if nid is not None and nid < len(graph.nodes) else "other"
    # A fused kernel is charged to the heavy op it computes.
    if kind in _CONV_TYPES and op != "conv2d":
        return "conv2d"
    if kind in _MATMUL_TYPES and op not in ("linear", "matmul", "attention"):
        return "linear"
    if jit_compile and nid is None:
        return "xla"
    return op


def parse_trace_json(xplane_path: str) -> tuple[Events, Windows]:
    """Every TensorFlow op event (start, op name, op type, ns) in a profile and
    the iteration windows, from the trace viewer JSON that TensorFlow's
    profiler converter makes of it."""
    from tensorflow.python.profiler.internal import (  # type: ignore[import-untyped]
        _pywrap_profiler_plugin as plugin,
    )

    data, ok = plugin.xspace_to_tools_data([xplane_path], "trace_viewer@", {})
    if not ok:
        raise RuntimeError(f"TensorFlow could not convert the profile {xplane_path}")
    trace = json.loads(data)
    frames = trace.get("stackFrames", {})
    events: Events = []
    windows: Windows = []
    for e in trace.get("traceEvents", []):
        if e.get("ph") != "X":
            continue
        start, dur = float(e.get("ts", 0.0)) * 1e3, float(e.get("dur", 0.0)) * 1e3
        if e.get("name") == ITERATION:
            windows.append((start, start + dur))
            continue
        label = frames.get(str(e.get("sf")), {}).get("name", "") if "sf" in e else ""
        if ":" in label:
            name, kind = label.rsplit(":", 1)
            events.append((start, name, kind, dur))
    return events, windows


def parse_xplane(xplane_path: str) -> tuple[Events, Windows]:
    """The same, read straight from the XSpace protobuf: TensorFlow names an
    op's events 'op name:op type'."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # type: ignore[import-untyped]

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as fh:
        space.ParseFromString(fh.read())
    events: Events = []
    windows: Windows = []
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        meta = plane.event_metadata
        for line in plane.lines:
            for e in line.events:
                label = meta[e.metadata_id].name
                start = line.timestamp_ns + e.offset_ps / 1e3
                dur = e.duration_ps / 1e3
                if label == ITERATION:
                    windows.append((start, start + dur))
                    continue
                name, sep, kind = label.rpartition(":")
                if sep and name and kind and " " not in kind and not kind.startswith(":"):
                    events.append((start, name, kind, dur))
    return events, windows
