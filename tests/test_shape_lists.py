"""The standard shape lists in pyparbench/shapes/data/ and their loader, pyparbench.shapes.

Counts and spot-checked rows are taken from the source files named in each data
file's header. Needs no compiled extension.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import pyparbench.shapes as sl

# ---------------------------------------------------------------- GEMM

# Rows per vector in DeepBench code/kernels/gemm_problems.h.
GEMM_COUNTS = {"training": 160, "inference_server": 75, "inference_device": 13}


@pytest.mark.parametrize("name", list(GEMM_COUNTS))
def test_gemm_row_counts(name: str) -> None:
    problems = sl.gemm_problems(name)
    assert len(problems) == GEMM_COUNTS[name]
    assert all(p.set == name for p in problems)


def test_gemm_all_sets_in_source_order() -> None:
    problems = sl.gemm_problems()
    assert len(problems) == sum(GEMM_COUNTS.values()) == 248
    assert [p.set for p in problems] == [
        s for s, n in GEMM_COUNTS.items() for _ in range(n)
    ]


def test_gemm_hyphenated_set_name() -> None:
    assert sl.gemm_problems("inference-server") == sl.gemm_problems("inference_server")


@pytest.mark.parametrize(
    ("name", "index", "m", "n", "k", "ta", "tb"),
    [
        ("training", 0, 1760, 16, 1760, False, False),
        ("training", 20, 1760, 16, 1760, True, False),
        ("training", 40, 1760, 7133, 1760, False, True),
        ("training", 78, 512, 8, 500000, False, False),
        ("training", 159, 1024, 32, 512, False, True),
        ("inference_server", 0, 5124, 700, 2048, False, False),
        ("inference_server", 14, 512, 1, 500000, False, False),
        ("inference_server", 74, 1024, 4, 512, False, False),
        ("inference_device", 3, 64, 1, 1216, False, False),
        ("inference_device", 12, 4224, 1, 128, False, False),
    ],
)
def test_gemm_spot_rows(name: str, index: int, m: int, n: int, k: int, ta: bool, tb: bool) -> None:
    p = sl.gemm_problems(name)[index]
    assert (p.m, p.n, p.k, p.trans_a, p.trans_b) == (m, n, k, ta, tb)


def test_gemm_transpose_flag_counts() -> None:
    training = sl.gemm_problems("training")
    assert sum(p.trans_a for p in training) == 73
    assert sum(p.trans_b for p in training) == 10
    inference = sl.gemm_problems("inference_server") + sl.gemm_problems("inference_device")
    assert not any(p.trans_a or p.trans_b for p in inference)


# ---------------------------------------------------------------- DeepBench conv

# Rows per vector in DeepBench code/kernels/conv_problems.h (commented-out entries excluded).
CONV_COUNTS = {
    "deepbench-training": 94,
    "deepbench-inference-server": 107,
    "deepbench-inference-device": 16,
}


@pytest.mark.parametrize("source", list(CONV_COUNTS))
def test_deepbench_conv_row_counts(source: str) -> None:
    assert len(sl.conv_problems(source)) == CONV_COUNTS[source]


def test_deepbench_conv_field_order() -> None:
    # Source tuple (700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2) is
    # w, h, c, n, k, filter_w, filter_h, pad_w, pad_h, wstride, hstride.
    first = sl.conv_problems("deepbench-training")[0]
    assert (first.n, first.c, first.h, first.w) == (4, 1, 161, 700)
    assert (first.out_channels, first.kh, first.kw) == (32, 5, 20)
    assert first.stride == (2, 2) and first.padding == (0, 0, 0, 0)
    assert first.dilation == (1, 1) and first.groups == 1
    # Its output feeds the next layer of the list, (341, 79, 32, 4, ...).
    assert first.output_hw() == (79, 341)
    nxt = sl.conv_problems("deepbench-training")[4]
    assert (nxt.c, nxt.h, nxt.w, nxt.kh, nxt.kw) == (32, 79, 341, 5, 10)


@pytest.mark.parametrize(
    ("source", "index", "n", "c", "h", "w", "k", "kh", "kw", "pad", "stride"),
    [
        ("deepbench-training", 8, 16, 1, 48, 480, 16, 3, 3, 1, 1),
        ("deepbench-training", 29, 16, 3, 224, 224, 64, 7, 7, 3, 2),
        ("deepbench-training", 44, 8, 2048, 7, 7, 512, 1, 1, 3, 2),
        ("deepbench-training", 93, 16, 2048, 7, 7, 512, 1, 1, 0, 1),
        ("deepbench-inference-server", 0, 1, 1, 161, 700, 32, 5, 20, 0, 2),
        ("deepbench-inference-server", 106, 2, 2048, 7, 7, 512, 1, 1, 0, 1),
        ("deepbench-inference-device", 0, 1, 64, 112, 112, 64, 1, 1, 0, 1),
        ("deepbench-inference-device", 12, 1, 512, 7, 7, 512, 3, 3, 1, 1),
        ("deepbench-inference-device", 15, 1, 2048, 7, 7, 512, 1, 1, 0, 1),
    ],
)
def test_deepbench_conv_spot_rows(
    source: str, index: int, n: int, c: int, h: int, w: int, k: int,
    kh: int, kw: int, pad: int, stride: int,
) -> None:
    p = sl.conv_problems(source)[index]
    assert (p.n, p.c, p.h, p.w, p.out_channels, p.kh, p.kw) == (n, c, h, w, k, kh, kw)
    assert p.padding == (pad,) * 4 and p.stride == (stride, stride)


def test_deepbench_commented_out_entry_absent() -> None:
    # "//std::make_tuple(151, 40, 1, 1, 32, 20, 5, 8, 8, 8, 2), ARM convolution seg faults"
    assert not any(p.w == 151 and p.h == 40 for p in sl.conv_problems("deepbench-inference-device"))


def test_deepbench_conv_names_are_unique() -> None:
    names = [p.name for s in CONV_COUNTS for p in sl.conv_problems(s)]
    assert len(names) == len(set(names))


# ---------------------------------------------------------------- benchdnn

SHAPES = sl.SHAPES_DIR
BENCHDNN_FILES = sorted(SHAPES.glob("benchdnn_conv_*.txt"))
# Problem lines (not commented out) per source file.
BENCHDNN_COUNTS = {"resnet_50": 20}


def _topology(path: Path) -> str:
    return path.name[len("benchdnn_conv_"):-len(".txt")]


def test_benchdnn_files_present() -> None:
    assert {_topology(p) for p in BENCHDNN_FILES} == set(BENCHDNN_COUNTS)


@pytest.mark.parametrize("topology", list(BENCHDNN_COUNTS))
def test_benchdnn_counts(topology: str) -> None:
    assert len(sl.conv_problems(topology)) == BENCHDNN_COUNTS[topology]


def test_resnet_50_verbatim_copy() -> None:
    text = (SHAPES / "benchdnn_conv_resnet_50.txt").read_text()
    marker = "# ---- verbatim copy of the source file follows ----\n"
    assert text.count(marker) == 1
    copy = text.split(marker, 1)[1]
    assert len(copy) == 3908  # the source file's length
    assert copy.startswith("# resnet_50\n\ng1mb1ic3ih224iw224oc64oh112ow112kh7kw7sh2sw2ph3pw3n")
    assert copy.count("\n") == 55


def test_resnet_50_multiplicities_cover_all_53_convolutions() -> None:
    # "*N" marks a shape that occurs N times; ResNet-50 has 53 convolutions.
    total = 0
    for p in sl.conv_problems("resnet_50"):
        m = re.search(r"\*(\d+)$", p.name)
        total += int(m.group(1)) if m else 1
    assert total == 53


def _stated(line: str, key: str) -> int | None:
    m = re.search(rf"(?<![a-z]){key}(\d+)", _fields(line))
    return int(m.group(1)) if m else None


def _fields(line: str) -> str:
    """The descriptor up to its name."""
    desc = line.split("#", 1)[0].split()[-1]
    return desc[: desc.index('n"')] if 'n"' in desc else desc


@pytest.mark.parametrize("path", BENCHDNN_FILES, ids=_topology)
def test_every_benchdnn_line_parses_and_matches_stated_output(path: Path) -> None:
    lines = sl.benchdnn_lines(path)
    assert lines
    for line in lines:
        p = sl.parse_benchdnn_conv(line)
        oh, ow = p.output_hw()
        stated_oh, stated_ow = _stated(line, "oh"), _stated(line, "ow")
        if stated_oh is not None:
            assert oh == stated_oh, line
            assert ow == (stated_ow if stated_ow is not None else stated_oh), line
        assert p.name and p.name in line


def test_parse_benchdnn_resnet_lines() -> None:
    p = sl.parse_benchdnn_conv('g1mb1ic3ih224iw224oc64oh112ow112kh7kw7sh2sw2ph3pw3n"resnet_50:conv1"')
    assert p == sl.ConvProblem(
        name="resnet_50:conv1", n=1, c=3, h=224, w=224, out_channels=64, kh=7, kw=7,
        stride=(2, 2), padding=(3, 3, 3, 3), dilation=(1, 1), groups=1,
    )
    # Short form: w-values default to the h-values, stride 1.
    q = sl.parse_benchdnn_conv('mb1ic64ih56oc64oh56kh3ph1n"resnet_50:res2a_branch2b*3"')
    assert (q.h, q.w, q.kh, q.kw, q.stride, q.padding) == (56, 56, 3, 3, (1, 1), (1, 1, 1, 1))
    assert q.name == "resnet_50:res2a_branch2b*3" and q.output_hw() == (56, 56)
    # Strided 1x1 (floor division) as in res3a_branch1.
    r = sl.parse_benchdnn_conv('g1mb1ic256ih56iw56oc512oh28ow28kh1kw1sh2sw2ph0pw0n"resnet_50:res3a_branch1"')
    assert r.output_hw() == (28, 28)


def test_parse_benchdnn_defaults_groups_and_dilation() -> None:
    # benchdnn: mb defaults to 2; dilation counts from 0 (PyTorch dilation = d + 1).
    p = sl.parse_benchdnn_conv('g32ic32ih112oc32oh112kh3ph1n"mobilenet:conv2_1/dw"')
    assert (p.n, p.groups, p.c, p.out_channels) == (2, 32, 32, 32)
    assert p.output_hw() == (112, 112)
    d = sl.parse_benchdnn_conv("ic8ih20oc8kh3dh1ph2n\"d\"")
    assert d.dilation == (2, 2) and d.output_hw() == (20, 20)
    # Output not stated: computed, padding 0.
    e = sl.parse_benchdnn_conv("mb4ic3ih10iw12oc5kh3kw5")
    assert e.padding == (0, 0, 0, 0) and e.output_hw() == (8, 8) and e.name == ""
    # Underscores are ignored; options and trailing comments are dropped.
    f = sl.parse_benchdnn_conv('--reset --dir=FWD_B ic3ih227iw227_oc96oh55ow55_kh11kw11_sh4sw4ph0pw0_n"alexnet:conv1"  # x')
    assert (f.stride, f.output_hw(), f.name) == ((4, 4), (55, 55), "alexnet:conv1")


def test_parse_benchdnn_padding_deduced_from_output() -> None:
    p = sl.parse_benchdnn_conv('mb1ic64ih56oc64oh56kh3n"x"')
    assert p.padding == (1, 1, 1, 1)


def test_parse_benchdnn_asymmetric_padding() -> None:
    line = 'ic4ih8iw8oc6oh4ow8kh3kw3sh2sw1ph1pw1dh1dw0n"dilated_conv:11"'
    with pytest.raises(ValueError, match="dilated_conv:11"):
        sl.parse_benchdnn_conv(line)
    p = sl.parse_benchdnn_conv(line, allow_asymmetric_padding=True)
    assert p.padding == (1, 2, 1, 1) and p.output_hw() == (4, 8)


@pytest.mark.parametrize(
    "line",
    [
        'mb1ic64ih56oc64oh55kh1ph0n"bad:oh"',  # stated oh disagrees
        'mb1ic64ih56iw56oc64oh56ow57kh1ph0n"bad:ow"',  # stated ow disagrees
        "# mb1ic64ih56oc64oh56kh1ph0n\"commented\"",
        "",
        'ic3id5ih5oc3kd3kh3n"3d"',
        "ic3ih5oc3kh3ic4",
        "ic3ih5oc3kh3zz1",
        "ih5oc3kh3",
        "ic3oc3",
        "ic3ih5oc3",
        "g3ic4ih5oc3kh1",
        "ic3ih2oc3kh5",
    ],
)
def test_parse_benchdnn_rejects(line: str) -> None:
    with pytest.raises(ValueError):
        sl.parse_benchdnn_conv(line)


def test_parse_benchdnn_error_names_line() -> None:
    line = 'mb1ic64ih56oc64oh55kh1ph0n"bad:oh"'
    with pytest.raises(ValueError, match=re.escape(line)):
        sl.parse_benchdnn_conv(line)


def test_conv_problem_is_frozen() -> None:
    p = sl.conv_problems("resnet_50")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.n = 8  # type: ignore[misc]


# ---------------------------------------------------------------- DLRM


def test_dlrm_benchmark_config() -> None:
    cfg = sl.dlrm_config("dlrm_s_benchmark")
    a = cfg["args"]
    assert a["mini_batch_size"] == 2048
    assert a["arch_embedding_size"] == [1_000_000] * 8
    assert a["arch_sparse_feature_size"] == 64
    assert a["num_indices_per_lookup"] == 100
    assert a["arch_mlp_bot"] == [512, 512, 64]
    assert a["arch_mlp_top"] == [1024, 1024, 1024, 1]
    assert a["arch_interaction_op"] == "dot"
    # The lists are the script's strings, split.
    v = cfg["source_variables"]
    assert a["arch_embedding_size"] == [int(x) for x in v["emb"].split("-")]
    assert a["arch_mlp_bot"] == [int(x) for x in v["bot_mlp"].split("-")]
    assert a["arch_mlp_top"] == [int(x) for x in v["top_mlp"].split("-")]
    # dlrm requires the bottom MLP to end at the embedding dimension.
    assert a["arch_mlp_bot"][-1] == a["arch_sparse_feature_size"]
    d = cfg["derived"]
    assert d["num_tables"] == len(a["arch_embedding_size"])
    nf = d["num_tables"] + 1
    assert d["top_mlp_input"] == nf * (nf - 1) // 2 + a["arch_mlp_bot"][-1]


def test_dlrm_criteo_kaggle_config() -> None:
    cfg = sl.dlrm_config("dlrm_s_criteo_kaggle")
    a = cfg["args"]
    assert a["arch_sparse_feature_size"] == 16
    assert a["arch_mlp_bot"] == [13, 512, 256, 64, 16]
    assert a["arch_mlp_top"] == [512, 256, 1]
    assert a["mini_batch_size"] == 128
    assert cfg["derived"]["num_tables"] == 26
    assert cfg["arch_embedding_size"] is None  # not published in the repo
    nf = cfg["derived"]["num_tables"] + 1
    assert cfg["derived"]["top_mlp_input"] == nf * (nf - 1) // 2 + 16


def test_dlrm_config_returns_a_copy() -> None:
    cfg = sl.dlrm_config("dlrm_s_benchmark")
    cfg["args"]["mini_batch_size"] = 1
    assert sl.dlrm_config("dlrm_s_benchmark")["args"]["mini_batch_size"] == 2048


# ---------------------------------------------------------------- bad names


@pytest.mark.parametrize(
    ("call", "valid"),
    [
        (lambda: sl.gemm_problems("train"), "training"),
        (lambda: sl.conv_problems("googlenet_v1"), "resnet_50"),
        (lambda: sl.conv_problems("deepbench-training-set"), "deepbench-inference-device"),
        (lambda: sl.dlrm_config("kaggle"), "dlrm_s_criteo_kaggle"),
    ],
)
def test_unknown_names_raise_listing_valid_ones(call: object, valid: str) -> None:
    with pytest.raises(ValueError, match=re.escape(valid)):
        call()  # type: ignore[operator]


# ---------------------------------------------------------------- data files


@pytest.mark.parametrize(
    "name",
    ["gemm_deepbench.csv", "conv_deepbench.csv", "benchdnn_conv_resnet_50.txt"],
)
def test_data_files_start_with_source_header(name: str) -> None:
    first = (SHAPES / name).read_text().splitlines()[0]
    assert first.startswith("# Source: ")


def test_dlrm_file_starts_with_source_header() -> None:
    text = (SHAPES / "dlrm_configs.json").read_text()
    assert text.lstrip().startswith('{\n  "_header": [\n    "Source: facebookresearch/dlrm')
