"""dynamic_quantized_linear on oneDNN's int8 matmul: where the library has
int8 dot products (VNNI, AMX) the node's integer product runs there, u8 x s8
-> s32 with the zero points compensated around it, and its output is bit
for bit the file's semantics (the exact integer sums of (q - z)(w - wz),
float32 scales, the bias added last) at odd shapes, with int8 and uint8
weights of nonzero zero points per output, at 1, 2 and 3 threads; under an
ISA cap without int8 dot products (oneDNN's vpmaddubsw pairs would saturate)
the node keeps its int16 loops and stays exact."""

from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest
from _support import run_isa_capped

from pyparbench.executor import compile_graph
from pyparbench.graph import GraphBuilder
from pyparbench.graph.ir import Graph
from pyparbench.machine.cpu_features import cpu_features
from pyparbench.reference import dynamic_grid
from pyparbench.settings import Settings

LOOPS = "native int16 loops"


def _weights(rng: np.random.Generator, n: int, k: int, dtype: str) -> dict[str, np.ndarray]:
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    w = rng.integers(lo, hi + 1, (n, k))
    w[0] = lo  # a full row at each end of the range: the largest sums
    w[-1] = hi
    return {"weight": w.astype(np.float32),
            "weight_zero_point": rng.integers(lo, hi + 1, n).astype(np.float32),
            "weight_scale": rng.uniform(0.001, 0.004, n).astype(np.float32),
            "bias": rng.standard_normal(n).astype(np.float32)}


def _graph(m: int, k: int, n: int, weights: dict[str, np.ndarray]) -> Graph:
    b = GraphBuilder("dynamic_linear")
    x = b.input("x", (m, k))
    y = b.dynamic_quantized_linear(x, n, name="fc")
    b.set_weights(y, weights)
    return b.build(y)


def _exact(x: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
    """The file's semantics, bit for bit: the sums in int64, then float32
    throughout (float(sum) · (x_scale · w_scale) + bias)."""
    scale, zp = dynamic_grid(x)
    s32 = np.float32(scale)
    q = (np.clip(np.rint(x / s32) + zp, 0, 255).astype(np.int64) if scale > 0
         else np.zeros(x.shape, np.int64))
    w = weights["weight"].astype(np.int64) - weights["weight_zero_point"].astype(np.int64)[:, None]
    sums = (q - zp) @ w.T
    assert np.abs(sums).max() < 2**31
    per_out = (s32 * weights["weight_scale"]).astype(np.float32)
    return (sums.astype(np.float32) * per_out + weights["bias"]).astype(np.float32)


def _input(rng: np.random.Generator, m: int, k: int) -> np.ndarray:
    x = (rng.standard_normal((m, k)) + 0.4).astype(np.float32)
    x[0, :] = x.max()  # a row of q = 255 against the full-range weight rows
    return x


def _int8_dot_products() -> bool:
    if os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"):
        return False
    flags = set(cpu_features()["flags"])
    return cpu_features()["arch"] == "aarch64" or bool(
        flags & {"avx512_vnni", "avx_vnni", "amx_int8"})


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize(("m", "k", "n"), [(5, 37, 19), (33, 130, 67), (1, 200, 3)])
def test_the_node_is_bit_for_bit_the_files_semantics(dtype: str, m: int, k: int,
                                                     n: int) -> None:
    rng = np.random.default_rng(m * k + n)
    weights = _weights(rng, n, k, dtype)
    g = _graph(m, k, n, weights)
    x = _input(rng, m, k)
    want = _exact(x, weights)
    cg = compile_graph(g)
    cg.set_inputs({"x": x})
    for threads in (1, 2, 3):
        settings = Settings(intra_op=threads)
        cg.run(settings, repeats=1, warmup=0)
        np.testing.assert_array_equal(cg.outputs()["fc"], want, err_msg=f"{threads} threads")
        impl = next(p.implementation for p in cg.node_precisions(settings) if p.name == "fc")
        assert (impl != LOOPS) == _int8_dot_products(), impl


def test_an_input_of_zeros_gives_the_bias() -> None:
    rng = np.random.default_rng(3)
    weights = _weights(rng, 9, 40, "uint8")
    cg = compile_graph(_graph(4, 40, 9, weights))
    cg.set_inputs({"x": np.zeros((4, 40), np.float32)})
    cg.run(Settings(intra_op=2), repeats=1, warmup=0)
    np.testing.assert_array_equal(cg.outputs()["fc"], np.broadcast_to(weights["bias"], (4, 9)))


CAPPED_RUN = textwrap.dedent("""
    import json, sys, numpy as np
    from pyparbench.executor import compile_graph
    from pyparbench.graph import GraphBuilder
    from pyparbench.settings import Settings
    args = json.loads(sys.argv[1])
    b = GraphBuilder("capped")
    x = b.input("x", tuple(args["x_shape"]))
    y = b.dynamic_quantized_linear(x, len(args["weights"]["bias"]), name="fc")
    b.set_weights(y, {k: np.asarray(v, np.float32) for k, v in args["weights"].items()})
    cg = compile_graph(b.build(y))
    cg.set_inputs({"x": np.asarray(args["x"], np.float32)})
    s = Settings(intra_op=2)
    cg.run(s, repeats=1, warmup=0)
    impl = next(p.implementation for p in cg.node_precisions(s) if p.name == "fc")
    print(json.dumps({"y": cg.outputs()["fc"].tolist(), "impl": impl}))
""")


def test_without_int8_dot_products_the_node_keeps_its_exact_loops() -> None:
    if cpu_features()["arch"] != "x86_64":
        pytest.skip("the ISA cap is x86's")
    rng = np.random.default_rng(7)
    weights = _weights(rng, 21, 70, "int8")
    x = _input(rng, 9, 70)
    args = json.dumps({"x_shape": list(x.shape), "x": x.tolist(),
                       "weights": {k: v.tolist() for k, v in weights.items()}})
    got = run_isa_capped(CAPPED_RUN.replace("sys.argv[1]", repr(args)), "AVX512_CORE")
    assert got["impl"] == LOOPS
    np.testing.assert_array_equal(np.asarray(got["y"], np.float32), _exact(x, weights))
