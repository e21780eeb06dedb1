"""torch.profiler's events charged to the graph's op types.

Top-level ops are charged by name (their time includes the ops they call);
an op the names do not cover is looked into, down to ops that are; the
casts autocast writes into a scripted graph are charged to the op they feed;
inductor's fused kernels ("graph_0_cpp_fused_add_relu_3") are charged to the
first op their name holds, heavy ops first. One iteration per
``record_function`` window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from pyparbench.frameworks._common import Profile, aggregate

__all__ = ["ITERATION", "charge_event_name", "record"]

ITERATION = "ppb_iteration"
# Top-level profiler event names -> graph op type.
_ATEN: dict[str, str] = {}
for _op, _names in {
    "conv2d": ("aten::conv2d", "aten::convolution", "aten::_convolution",
               "aten::mkldnn_convolution", "aten::_slow_conv2d_forward", "aten::thnn_conv2d",
               "aten::_conv_depthwise2d", "mkldnn::_convolution_pointwise",
               "aten::_nnpack_spatial_convolution"),
    "linear": ("aten::linear", "aten::addmm", "mkldnn::_linear_pointwise",
               "aten::_addmm_activation"),
    "matmul": ("aten::matmul", "aten::bmm", "aten::mm", "aten::baddbmm"),
    "embedding_bag": ("aten::embedding_bag", "aten::_embedding_bag",
                      "aten::_embedding_bag_forward_only"),
    "eltwise": ("aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_",
                "aten::relu6", "aten::sigmoid", "aten::sigmoid_", "aten::tanh", "aten::tanh_",
                "aten::gelu", "aten::gelu_", "aten::clamp", "aten::clamp_", "aten::silu",
                "aten::silu_", "aten::hardswish", "aten::hardswish_"),
    "add": ("aten::add", "aten::add_"),
    "mul": ("aten::mul", "aten::mul_"),
    "concat": ("aten::cat", "aten::concat"),
    "pool2d": ("aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::avg_pool2d",
               "aten::mkldnn_max_pool2d"),
    "global_avg_pool": ("aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d",
                        "aten::mean"),
    "batch_norm": ("aten::batch_norm", "aten::_batch_norm_impl_index",
                   "aten::native_batch_norm", "aten::_native_batch_norm_legit_no_training",
                   "aten::_native_batch_norm_legit"),
    "layer_norm": ("aten::layer_norm", "aten::native_layer_norm"),
    "rms_norm": ("aten::rms_norm", "aten::_fused_rms_norm"),
    "attention": ("aten::scaled_dot_product_attention",
                  "aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_attention_math"),
    "softmax": ("aten::softmax", "aten::_softmax"),
    "reshape": ("aten::reshape", "aten::view", "aten::flatten", "aten::_unsafe_view"),
    "transpose": ("aten::permute", "aten::transpose", "aten::contiguous", "aten::clone"),
    "tril_flatten": ("aten::index",),
}.items():
    for _n in _names:
        _ATEN[_n] = _op
# The casts autocast writes into a TorchScript graph (eager runs them inside
# the op they feed).
_AUTOCAST_CASTS = ("aten::_autocast_to_reduced_precision", "aten::_autocast_to_full_precision")
# Inductor's fused kernels: the op names they may hold, heavy ops first.
_FUSED = (("convolution", "conv2d"), ("scaled_dot_product", "attention"),
          ("flash_attention", "attention"), ("addmm", "linear"), ("bmm", "matmul"),
          ("mm", "linear"),
          ("embedding_bag", "embedding_bag"), ("batch_norm", "batch_norm"),
          ("layer_norm", "layer_norm"), ("rms_norm", "rms_norm"), ("softmax", "softmax"), ("pool", "pool2d"),
          ("mean", "global_avg_pool"), ("cat", "concat"), ("add", "add"), ("mul", "mul"),
          ("relu", "eltwise"), ("hardtanh", "eltwise"), ("sigmoid", "eltwise"),
          ("tanh", "eltwise"), ("gelu", "eltwise"), ("erf", "eltwise"), ("silu", "eltwise"),
          ("hardswish", "eltwise"), ("clone", "transpose"),
          ("index", "tril_flatten"))

def charge_event_name(name: str) -> str | None:
    """The graph op type a profiler event's name stands for (None: unknown)."""
    op = _ATEN.get(name)
    if op is not None:
        return op
    if "cpp_fused" in name or name.startswith("graph_"):
        for key, kind in _FUSED:
            if key in name:
                return kind
        return "fused"
    return None


def record(step: Callable[[], None], iterations: int) -> Profile:
    """Kernel times of ``iterations`` calls of ``step`` under ``torch.profiler``
    (after one call outside it), under ``torch.inference_mode``."""
    with torch.inference_mode():
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(iterations):
                with record_function(ITERATION):
                    step()
    events: list[tuple[float, str, str, float]] = []
    windows: list[tuple[float, float]] = []

    def add(e: Any, op: str) -> None:
        events.append((float(e.time_range.start) * 1e3, op, e.name,
                       float(e.cpu_time_total) * 1e3))

    def charge(e: Any) -> str:
        """Charges ``e`` and returns the op its time went to (the first one)."""
        op = charge_event_name(e.name)
        if op is not None or not e.cpu_children:
            add(e, op or "other")
            return op or "other"
        return charge_all(e.cpu_children)

    def charge_all(siblings: Any) -> str:
        # An autocast cast in a scripted graph is an op of its own before
        # the op it feeds (eager autocast casts inside that op): charged to
        # the next op, as eager's are.
        first = ""
        casts: list[Any] = []
        for e in siblings:
            if e.name in _AUTOCAST_CASTS:
                casts.append(e)
                continue
            op = charge(e)
            first = first or op
            for cast in casts:
                add(cast, op)
            casts = []
        for cast in casts:
            add(cast, "other")
        return first or "other"

    for e in prof.events():
        if e.name == ITERATION:
            windows.append((float(e.time_range.start) * 1e3, float(e.time_range.end) * 1e3))
    charge_all(e for e in prof.events() if e.cpu_parent is None)
    return aggregate(events, windows)
