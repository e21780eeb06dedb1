"""Model builders: shapes, parameter and multiply-add counts against their sources,
a reference forward pass of every model, the registry and the ``models`` command."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import pytest

from pyparbench.cli.models import add_command as add_models_command
from pyparbench.executor import compile_graph
from pyparbench.harness.levels import full_models
from pyparbench.memory import available_bytes, check_fits
from pyparbench.models import (
    MODELS,
    build,
    dlrm,
    dlrm_kaggle,
    googlenet,
    inception_v2,
    ncf,
    resnext50_32x4d,
    transformer_encoder,
)
from pyparbench.models._criteo import KAGGLE_TABLE_ROWS
from pyparbench.models.dlrm import dlrm_graph
from pyparbench.reference import reference_forward

# At batch 1: (parameters incl. BN statistics, multiply-adds, heavy ops, depth,
# max width, output shape less the batch). Pinned so that any change to an
# architecture shows; the sourced figures are checked separately below.
EXPECTED = {
    "googlenet": (7_020_392, 1_582_671_872, 58, 22, 4, (1000,)),
    "inception-v2": (11_305_256, 2_032_600_064, 70, 34, 4, (1000,)),
    "inception-v3": (23_851_784, 5_713_216_096, 95, 48, 6, (1000,)),
    "resnet50": (25_636_712, 3_857_973_248, 54, 50, 2, (1000,)),
    "resnext50": (25_097_128, 4_230_479_872, 54, 50, 2, (1000,)),
    "squeezenet": (1_248_424, 818_924_576, 26, 18, 2, (1000,)),
    "mobilenet-v2": (3_538_984, 300_774_272, 53, 53, 1, (1000,)),
    "mlp-512": (2_101_248, 2_097_152, 8, 8, 1, (512,)),
    "mlp-4096": (134_250_496, 134_217_728, 8, 8, 1, (4096,)),
    "ncf": (31_832_577, 106_624, 8, 5, 4, (1,)),
    "wide-deep": (180_740_174, 1_520_909, 32, 5, 28, (1,)),
    "dlrm": (514_499_137, 2_500_672, 15, 7, 9, (1,)),
    "dlrm-kaggle": (89_584_721, 486_032, 34, 8, 27, (1,)),
    "transformer": (7_087_872, 931_135_488, 8, 6, 3, (128, 768)),
    "llama-tiny": (2_467_072, 46_661_632, 16, 10, 3, (2048,)),
    "llama-bandwidth": (124_011_520, 11_827_937_280, 58, 34, 3, (16384,)),
    "llama-3.2-1b": (1_499_006_976, 125_890_461_696, 114, 66, 3, (128256,)),
    "llama-3.2-3b": (3_608_587_264, 363_989_827_584, 198, 114, 3, (128256,)),
    "llama-3.1-8b": (8_032_358_400, 898_173_501_440, 226, 130, 3, (128256,)),
}


def test_every_model_is_pinned() -> None:
    assert set(EXPECTED) == set(MODELS)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("batch", [1, 2])
def test_builds(name: str, batch: int) -> None:
    g = build(name, batch)
    params, macs, heavy, depth, width, out = EXPECTED[name]
    assert g.nodes[g.outputs[0]].shape == (batch, *out)
    assert (g.num_params, g.heavy_ops, g.depth, g.max_width) == (params, heavy, depth, width)
    assert g.macs == batch * macs
    assert g.avg_width == heavy / depth
    assert g.meta["model"] == name and g.meta["batch"] == batch
    assert all(not n.params.materialized for n in g)  # no weights made for this
    json.dumps(g.summary())
    json.loads(g.to_json())


# ------------------------------------------------------ counts from the sources


@pytest.mark.parametrize("name, keras_count", [
    ("resnet50", 25_636_712), ("inception-v3", 23_851_784), ("mobilenet-v2", 3_538_984)])
def test_keras_parameter_counts(name: str, keras_count: int) -> None:
    # tf.keras.applications.X(weights=None).count_params(), 1000 classes.
    assert build(name, 1).num_params == keras_count


def test_paper_figures_within_tolerance() -> None:
    # Multiply-adds the papers quote: ResNet-50 3.8 G (He 2016, Table 1),
    # ResNeXt-50 4.2 G and 25.0 M parameters (Xie 2017, Table 1),
    # MobileNet-v2 300 M (Sandler 2018), SqueezeNet 1,248,424 parameters
    # exactly (Iandola 2016, Table 1).
    assert build("resnet50", 1).macs == pytest.approx(3.8e9, rel=0.02)
    rx = resnext50_32x4d()
    assert rx.macs == pytest.approx(4.2e9, rel=0.01)
    assert rx.trainable_params == 25_028_904  # torchvision's count
    assert rx.trainable_params == pytest.approx(25.0e6, rel=0.005)
    assert build("mobilenet-v2", 1).macs == pytest.approx(300e6, rel=0.01)
    assert build("squeezenet", 1).num_params == 1_248_424


def test_googlenet_against_paper_table() -> None:
    # Szegedy 2014, Table 1: 6,798 K weights (K = 1024) and 1,502 M
    # multiply-adds in all, of which conv1 is listed at 34 M (a 7x7x3x64
    # convolution at 112x112 is 118 M: the table's one outlier).
    g = googlenet()
    weights = sum(n.params.specs["weight"].size for n in g if n.heavy)
    assert weights == pytest.approx(6798 * 1024, rel=0.01)
    conv1 = next(s.macs for s in g.stats if s.name == "conv1/conv")
    assert conv1 == 7 * 7 * 3 * 64 * 112 * 112
    assert g.macs - conv1 == pytest.approx((1502 - 34) * 1e6, rel=0.01)
    # the paper's 5x5 branch
    assert g["inception_3a/b5x5/conv"].params.shapes["weight"] == (32, 16, 5, 5)


def test_inception_v2_against_figure_5() -> None:
    # Ioffe & Szegedy 2015, Figure 5, transcribed here independently:
    # (#1x1, #3x3 reduce, #3x3, double reduce, double #3x3, proj; 0 = none).
    fig5 = [(64, 64, 64, 64, 96, 32), (64, 64, 96, 64, 96, 64), (0, 128, 160, 64, 96, 0),
            (224, 64, 96, 96, 128, 128), (192, 96, 128, 96, 128, 128),
            (160, 128, 160, 128, 160, 128), (96, 128, 192, 160, 192, 128),
            (0, 128, 192, 192, 256, 0), (352, 192, 320, 160, 224, 128),
            (352, 192, 320, 192, 224, 128)]

    def conv(cin: int, cout: int, k: int) -> int:  # no bias; BN: 4 per channel
        return cin * cout * k * k + 4 * cout if cout else 0

    total = conv(3, 64, 7) + conv(64, 64, 1) + conv(64, 192, 3)
    c = 192
    for c1, r3, c3, rd, cd, proj in fig5:
        total += (conv(c, c1, 1) + conv(c, r3, 1) + conv(r3, c3, 3) + conv(c, rd, 1)
                  + conv(rd, cd, 3) + conv(cd, cd, 3) + conv(c, proj, 1))
        c = c1 + c3 + cd + (proj or c)
    assert c == 1024
    g = inception_v2()
    assert g.num_params == total + 1024 * 1000 + 1000
    assert g["inception_4e/concat"].shape == (1, 1056, 7, 7)  # Figure 5 prints 1024


def test_transformer_is_a_bert_base_layer() -> None:
    g = transformer_encoder(1, seq_len=128)
    h, f, s = 768, 3072, 128
    assert g.num_params == 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h == 7_087_872
    assert g.macs == s * (4 * h * h + 2 * h * f) + 2 * s * s * h
    assert (g.heavy_ops, g.depth, g.max_width) == (8, 6, 3)  # q, k, v side by side


def test_recommendation_parameter_formulas() -> None:
    users, items = 138_493, 26_744
    assert ncf().num_params == (users + items) * (64 + 128) + (256 * 256 + 256) + (
        256 * 128 + 128) + (128 * 64 + 64) + (128 + 1)
    mlp = (512 * 512 + 512) + (512 * 64 + 64)
    top = (100 * 1024 + 1024) + 2 * (1024 * 1024 + 1024) + (1024 + 1)  # 100 = 8*9/2 + 64
    assert dlrm().num_params == 8 * 1_000_000 * 64 + mlp + top
    small = dlrm(max_rows=1000)
    assert small.num_params == 8 * 1000 * 64 + mlp + top
    assert all(n.params.shapes["table"] == (1000, 64) for n in small if n.op == "embedding_bag")
    assert small["sparse0"].shape == (1, 100)
    k = dlrm_kaggle(max_rows=None)
    kmlp = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 64 + 64) + (64 * 16 + 16)
    ktop = (367 * 512 + 512) + (512 * 256 + 256) + (256 + 1)  # 367 = 27*26/2 + 16
    assert k.num_params == sum(KAGGLE_TABLE_ROWS) * 16 + kmlp + ktop
    assert dlrm_kaggle().num_params == sum(min(r, 10**6) for r in KAGGLE_TABLE_ROWS) * 16 + (
        kmlp + ktop)


@pytest.mark.parametrize("name, published, tied, kv_width", [
    ("llama-3.2-1b", 1_235_814_400, True, 8 * 64), ("llama-3.2-3b", 3_212_749_824, True, 8 * 128),
    ("llama-3.1-8b", 8_030_261_248, False, 8 * 128)])
def test_llama_parameter_counts(name: str, published: int, tied: bool, kv_width: int) -> None:
    # The models' published parameter counts; the 1B and 3B tie lm_head to
    # the embedding, which the graph holds twice. The rotary tables are
    # derived, not weights. Eight key / value heads (grouped-query).
    g = build(name, 1)
    weights = sum(n.num_params for n in g if n.op != "rotary")
    assert weights == published + (128256 * g.meta["hidden"] if tied else 0)
    assert g["lm_head"].params.shapes["weight"] == (128256, g.meta["hidden"])
    assert g["layers.0/self_attn.k_proj"].params.shapes["weight"] == (kv_width, g.meta["hidden"])


@pytest.mark.parametrize("name, width, layers", [("mlp-512", 512, 8), ("mlp-4096", 4096, 8)])
def test_study_mlps(name: str, width: int, layers: int) -> None:
    g = build(name, 4)
    assert g.input_names == ["x"] and g[g.inputs[0]].shape == (4, width)
    assert g.num_params == layers * (width * width + width)
    assert build(name, 1, layers=10).heavy_ops == 10


# ---------------------------------------------------------- reference forward

# The decoder's shapes, one small layer of them.
LLAMA_SMALL = {"layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 96,
               "vocab": 128, "prompt": 8}
SMALL = {"dlrm": {"max_rows": 300}, "dlrm-kaggle": {"max_rows": 300},
         "wide-deep": {"max_rows": 300}, "ncf": {"max_rows": 300},
         "transformer": {"seq_len": 16},
         **{name: LLAMA_SMALL for name in MODELS if name.startswith("llama-")}}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_reference_forward_runs(name: str) -> None:
    spec = MODELS[name]
    batch = 1 if spec.kind == "vision" else 2  # full-resolution images cost ~1 s each
    g = build(name, batch, **SMALL.get(name, {}))
    inputs = g.random_inputs(seed=11)
    (out,) = reference_forward(g, inputs).values()
    assert out.shape == g.nodes[g.outputs[0]].shape
    assert np.all(np.isfinite(out))
    last = g.nodes[g.outputs[0]]
    if last.op == "softmax":
        np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-12)
        assert len(np.unique(out.round(12))) > 1  # not a saturated / constant output
    elif last.op == "eltwise":  # sigmoid
        assert np.all((out > 0) & (out < 1))
    else:
        assert np.abs(out).max() < 100  # activations stay O(1)


@pytest.mark.parametrize("name, kw", [
    ("transformer", {"seq_len": 8}), ("dlrm", {"max_rows": 200, "lookups": 5}),
    ("llama-tiny", {"prompt": 8}),
    ("ncf", {"max_rows": 200}), ("wide-deep", {"max_rows": 200}),
    ("squeezenet", {"image_size": 64}), ("mobilenet-v2", {"image_size": 32})])
def test_samples_are_independent(name: str, kw: dict[str, Any]) -> None:
    """Sample i of a batch-3 pass equals a batch-1 pass on sample i alone
    (weights do not depend on the batch size): no op mixes the batch."""
    g3, g1 = build(name, 3, **kw), build(name, 1, **kw)
    inputs = g3.random_inputs(seed=5)
    (out,) = reference_forward(g3, inputs).values()
    for i in range(3):
        (one,) = reference_forward(g1, {k: v[i:i + 1] for k, v in inputs.items()}).values()
        np.testing.assert_allclose(out[i:i + 1], one, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------- registry and errors


def test_registry() -> None:
    assert {s.kind for s in MODELS.values()} == {"vision", "mlp", "recommendation", "nlp"}
    assert all(s.name == k and s.description and s.family for k, s in MODELS.items())
    g = build("resnet50")
    assert g.meta["batch"] == MODELS["resnet50"].default_batch
    assert g[g.inputs[0]].shape == (16, 3, 224, 224)


def test_unknown_model_lists_names() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'resnet51'; valid names: googlenet, "):
        build("resnet51")


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("batch", [0, -1, 1.5, True])
def test_bad_batch(name: str, batch: Any) -> None:
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        build(name, batch)


@pytest.mark.parametrize("make, match", [
    (lambda: dlrm(max_rows=0), "max_rows must be >= 1"),
    (lambda: dlrm_graph("d", 1, dense_features=4, bottom=(8, 16), top=(1,), table_rows=[5],
                        dim=32, lookups=1, max_rows=None, seed=0),
     "must end at the embedding width 32"),
    (lambda: dlrm_kaggle(table_rows=[10, 0]), "table sizes must be >= 1"),
    (lambda: ncf(layers=(63, 32)), "first even"),
    (lambda: transformer_encoder(heads=7), "heads dividing hidden"),
    (lambda: build("mlp-512", width=0), "width and layers must be >= 1"),
    (lambda: build("inception-v3", 1, image_size=64),
     r"conv2d 'mixed8/b3x3_2/conv' would have output shape \(1, 320, 0, 0\)"),
    (lambda: build("wide-deep", 1, dim=0), "wide_deep needs"),
    (lambda: build("llama-tiny", 1, heads=7), "heads dividing hidden"),
    (lambda: build("llama-tiny", 1, kv_heads=3), "kv_heads dividing heads"),
    (lambda: build("llama-tiny", 1, prompt=0), "prompt must be an integer >= 1"),
    (lambda: build("llama-tiny", 1, size="llama-70b"), "unknown llama size 'llama-70b'"),
])
def test_bad_configuration(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_seeds() -> None:
    a, b, c = (build("squeezenet", 1, seed=s) for s in (3, 3, 4))
    w = a["conv1"].params["weight"]
    assert np.array_equal(w, b["conv1"].params["weight"])
    assert not np.array_equal(w, c["conv1"].params["weight"])


# ------------------------------------------------------------ models command


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pyparbench")
    add_models_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_models_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["models", "--json", "--batch", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in rows] == list(MODELS)
    for r in rows:
        params, macs, heavy, depth, width, _ = EXPECTED[r["model"]]
        assert r["batch"] == 2 and r["params"] == params and r["heavy_ops"] == heavy
        assert r["weight_bytes"] == 4 * params
        assert r["depth"] == depth and r["max_width"] == width
        assert r["avg_width"] == pytest.approx(heavy / depth)
        assert r["gflops"] >= 2 * 2 * macs / 1e9


def test_models_command_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["models"]) == 0
    out = capsys.readouterr().out
    for name in MODELS:
        assert name in out
    assert "102.5MB" in out and "32.1GB" in out  # ResNet-50's and Llama 3.1 8B's weights


@pytest.mark.parametrize("bad", ["0", "x"])
def test_models_command_bad_batch(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _run(["models", "--batch", bad])
    assert "batch must be" in capsys.readouterr().err


def test_a_model_larger_than_the_available_memory_fails_in_one_line() -> None:
    """Compiling allocates the weights: llama-3.1-8b (32 GB) on a machine with
    less available refuses first, naming the model and both sizes; the full
    level leaves out what does not fit and keeps what does."""
    g = build("llama-3.1-8b", 1)
    free = available_bytes()
    assert free is not None and free > 0  # Linux says
    if 4 * g.num_params <= free:
        pytest.skip(f"this machine has {free / 1e9:.0f} GB available: the 8B model fits")
    with pytest.raises(MemoryError, match=r"model 'llama-3.1-8b' needs 32\.1 GB of weights; "
                                          r"this machine has [\d.]+ GB available"):
        compile_graph(g)
    assert all(not n.params.materialized for n in g)  # refused before any weight was made
    with pytest.raises(MemoryError, match="'x' needs 2.0 GB of weights; this machine has 1.0 GB"):
        check_fits("'x'", 2 * 10**9, available=10**9)
    check_fits("'x'", 10**9, available=10**9)
    small = full_models(available=3 * 10**8)
    assert "llama-tiny" in small and "googlenet" in small
    assert not {"llama-bandwidth", "llama-3.2-1b", "llama-3.1-8b"} & set(small)
    assert set(full_models(available=10**12)) == set(MODELS)
