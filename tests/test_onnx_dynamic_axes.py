"""Transformers exported with dynamic axes, as users export them for serving
(``dynamic_axes`` with a symbolic batch and sequence; Hugging Face's own
exports name them so): the ids' shape is read in the file (``Shape`` of
``input_ids``), and the sizes are set at import (``batch=``, ``shapes=``).
Each family from both exporters, at two sizes of one file, matches ONNX
Runtime on the same inputs: random ids, a mask with left padding on one
sequence; and the decode step with a symbolic batch and past."""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import _transformers as tf  # noqa: E402
from _transformers import VOCAB, decode_step_names  # noqa: E402

from pyparbench.executor import compile_graph  # noqa: E402
from pyparbench.graph import from_onnx  # noqa: E402
from pyparbench.settings import Settings  # noqa: E402

torch = tf.torch
transformers = tf.transformers

pytestmark = pytest.mark.slow

FAMILIES = ["bert", "distilbert", "roberta", "albert", "electra", "llama", "qwen2", "gpt2"]
# (batch, seq) the one file is imported at.
SIZES = [(1, 12), (3, 20)]


def _model(family: str) -> tuple[Any, Any]:
    """The family's seeded tiny model and the wrapper that names its inputs."""
    table, wrapper = ((tf.FAMILIES, tf._Encoder) if family in tf.FAMILIES
                      else (tf.DECODERS, tf._Decoder))
    config_name, model_name, config = table[family]
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(getattr(transformers, config_name)(**config))
    return model, wrapper(model.eval()).eval()


def _export(module: Any, args: tuple[Any, ...], path: Path, dynamo: bool,
            inputs: list[str], outputs: list[str], axes: dict[str, dict[int, str]] | None,
            dynamic_shapes: tuple[Any, ...] | None = None) -> Path:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), dynamo=dynamo, input_names=inputs,
                          output_names=outputs, opset_version=18 if dynamo else 17,
                          dynamic_axes=axes, dynamic_shapes=dynamic_shapes)
    return path


@pytest.fixture(scope="module", params=[False, True], ids=["torchscript", "dynamo"])
def exports(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Path]:
    """Every family exported once per exporter, batch and sequence symbolic."""
    folder = tmp_path_factory.mktemp("dynamic")
    axes = {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "attention_mask")}
    out = {}
    for family in FAMILIES:
        _, wrapped = _model(family)
        ids = torch.randint(2, VOCAB, (2, 8))
        mask = torch.ones(2, 8, dtype=torch.int64)
        out[family] = _export(wrapped, (ids, mask), folder / f"{family}.onnx", request.param,
                              ["input_ids", "attention_mask"], ["last_hidden_state"], axes)
    return out


def _error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("family", FAMILIES)
def test_a_file_with_dynamic_axes_runs_at_each_size(exports: dict[str, Path],
                                                    family: str) -> None:
    path = exports[family]
    dims = [[d.dim_param for d in i.type.tensor_type.shape.dim]
            for i in onnx.load(str(path), load_external_data=False).graph.input]
    assert dims == [["batch", "sequence"]] * 2  # what the test is about: symbolic in the file
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(len(family))
    for batch, seq in SIZES:
        g = from_onnx(path, batch=batch, shapes={"sequence": seq})
        assert {g.nodes[i].name: g.nodes[i].shape for i in g.inputs} == {
            "input_ids": (batch, seq), "attention_mask": (batch, seq)}
        ids = rng.integers(2, VOCAB, (batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), np.int64)
        mask[0, :3] = 0  # left padding on the first sequence
        feeds = {"input_ids": ids, "attention_mask": mask}
        want = session.run(None, feeds)[0]
        cg = compile_graph(g)
        cg.set_inputs(feeds)
        for settings in (Settings(intra_op=1), Settings(intra_op=2)):
            cg.run(settings, repeats=1, warmup=0)
            (got,) = cg.outputs().values()
            assert got.shape == want.shape == (batch, seq, got.shape[-1])
            assert _error(got, want) <= 1e-4, (family, batch, seq, settings.intra_op)


def test_a_size_the_file_does_not_name_is_refused(exports: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="sequence"):
        from_onnx(exports["bert"], batch=2, shapes={"seq": 8})


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_a_decode_step_with_a_symbolic_batch_and_past(tmp_path: Path, dynamo: bool) -> None:
    """Llama's decode step (past keys / values in, presents out) exported
    with its batch, past and total lengths symbolic, imported at two sizes.
    The TorchScript exporter names the mask's length apart ("total_len");
    torch.export writes it as arithmetic on the past's ("past_len + 1"),
    which the past's size sizes."""
    model, _ = _model("llama")
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    kv_heads = model.config.num_key_value_heads
    head = tf.HIDDEN // heads
    step = tf._DecodeStep(model.eval(), layers).eval()
    inputs, outputs = decode_step_names(layers)
    past = [torch.randn(2, kv_heads, 5, head) for _ in range(2 * layers)]
    args = (torch.randint(2, VOCAB, (2, 1)), torch.ones(2, 6, dtype=torch.int64), *past)
    if dynamo:
        b, p = torch.export.Dim("batch"), torch.export.Dim("past_len", min=1, max=4096)
        shapes = ({0: b}, {0: b, 1: p + 1}, tuple({0: b, 2: p} for _ in past))
        path = _export(step, args, tmp_path / "step.onnx", dynamo, inputs, outputs, None, shapes)
    else:
        axes = ({"input_ids": {0: "batch"}, "attention_mask": {0: "batch", 1: "total_len"}}
                | {n: {0: "batch", 2: "past_len"} for n in inputs[2:]})
        path = _export(step, args, tmp_path / "step.onnx", dynamo, inputs, outputs, axes)
    mask_dims = [d.dim_param for d in onnx.load(str(path), load_external_data=False)
                 .graph.input[1].type.tensor_type.shape.dim]
    assert mask_dims == ["batch", "past_len + 1" if dynamo else "total_len"]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for batch, length in ((1, 9), (3, 30)):
        sizes = {"past_len": length} if dynamo else {"past_len": length, "total_len": length + 1}
        g = from_onnx(path, batch=batch, shapes=sizes)
        feeds: dict[str, np.ndarray] = {
            "input_ids": rng.integers(2, VOCAB, (batch, 1)).astype(np.int64),
            "attention_mask": np.ones((batch, length + 1), np.int64)}
        feeds["attention_mask"][0, :2] = 0
        for name in inputs[2:]:
            feeds[name] = rng.standard_normal((batch, kv_heads, length, head)).astype(np.float32)
        want = dict(zip(outputs, session.run(outputs, feeds), strict=True))
        cg = compile_graph(g)
        cg.set_inputs(feeds)
        cg.run(Settings(intra_op=2), repeats=1, warmup=0)
        got = cg.outputs()
        for name in outputs:
            assert got[name].shape == want[name].shape, name
            assert _error(got[name], want[name]) <= 1e-4, (name, batch, length)


def test_a_derived_dimension_is_sized_by_the_names_it_reads(tmp_path: Path) -> None:
    """A dimension torch.export writes as arithmetic ("2*s0", "past_len + 1")
    takes its size from its names'; a name the arithmetic reads without a
    size is asked for by name; a plain name with a '-' is a name."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", "2*s0", "s0 // 2"])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["b", "s0 + 1", "seq-len"])
    outs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, ["b", None, None])
            for n in ("rx", "ry")]
    nodes = [onnx.helper.make_node("Relu", ["x"], ["rx"]),
             onnx.helper.make_node("Relu", ["y"], ["ry"])]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "derived", [x, y], outs),
                                   opset_imports=[onnx.helper.make_opsetid("", 17)])
    g = from_onnx(model, batch=2, shapes={"s0": 3, "seq-len": 5})
    assert g.meta["onnx_input_shapes"] == {"x": [2, 6, 1], "y": [2, 4, 5]}
    assert g.meta["symbolic"] == {"s0": 3, "seq-len": 5}
    with pytest.raises(ValueError, match=r"'2\*s0'.*--shape s0=N"):
        from_onnx(model, batch=2, shapes={"seq-len": 5})
    with pytest.raises(ValueError, match=r"shapes names 'seq'.*dimensions: s0, seq-len\)"):
        from_onnx(model, batch=2, shapes={"s0": 3, "seq": 5})
    with pytest.raises(ValueError, match=r"'s0 // 2' at axis 2 is 0.*>= 1"):
        from_onnx(model, batch=2, shapes={"s0": 1, "seq-len": 5})
