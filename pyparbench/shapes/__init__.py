"""Published standard shape lists, read from the data files in ``shapes/data/``.

The data files are transcriptions of public lists; each names its source in its
header. This module only reads them:

- :func:`gemm_problems` -- DeepBench GEMM sets (``gemm_deepbench.csv``).
- :func:`conv_problems` -- DeepBench convolution sets (``conv_deepbench.csv``)
  and oneDNN benchdnn topology sets (``benchdnn_conv_<topology>.txt``).
- :func:`parse_benchdnn_conv` -- one benchdnn convolution descriptor.
- :func:`dlrm_config` -- DLRM benchmark configurations (``dlrm_configs.json``).

Convolutions are described in PyTorch terms (:class:`ConvProblem`): NCHW input,
dilation 1 for a dense kernel, explicit padding on each side.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "ConvProblem",
    "GemmProblem",
    "benchdnn_lines",
    "conv_problems",
    "conv_sources",
    "dlrm_config",
    "gemm_problems",
    "parse_benchdnn_conv",
]

SHAPES_DIR = Path(__file__).resolve().parent / "data"

_GEMM_FILE = "gemm_deepbench.csv"
_CONV_FILE = "conv_deepbench.csv"
_DLRM_FILE = "dlrm_configs.json"
_BENCHDNN_PREFIX = "benchdnn_conv_"
_BENCHDNN_SUFFIX = ".txt"

GEMM_SETS = ("training", "inference_server", "inference_device")
DEEPBENCH_CONV_SOURCES = {f"deepbench-{s.replace('_', '-')}": s for s in GEMM_SETS}


@dataclass(frozen=True)
class GemmProblem:
    """One DeepBench GEMM: C (m x n) = op(A) op(B), shared dimension k."""

    set: str
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool


@dataclass(frozen=True)
class ConvProblem:
    """A 2-D convolution in PyTorch convention.

    Attributes
    ----------
    name : str
        Where it comes from, e.g. ``"resnet_50:res2a_branch2a"`` (benchdnn name,
        without its quotes) or ``"deepbench-training#0"``.
    n, c, h, w : int
        Minibatch, input channels, input height and width.
    out_channels : int
        Output channels.
    kh, kw : int
        Kernel height and width.
    stride : tuple[int, int]
        (height, width).
    padding : tuple[int, int, int, int]
        (top, bottom, left, right).
    dilation : tuple[int, int]
        (height, width); 1 means a dense kernel (benchdnn's ``dh`` + 1).
    groups : int
        Number of groups; ``groups == c == out_channels`` is depthwise.
    """

    name: str
    n: int
    c: int
    h: int
    w: int
    out_channels: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    def __post_init__(self) -> None:
        positive = {
            "n": self.n, "c": self.c, "h": self.h, "w": self.w,
            "out_channels": self.out_channels, "kh": self.kh, "kw": self.kw,
            "stride_h": self.stride[0], "stride_w": self.stride[1],
            "dilation_h": self.dilation[0], "dilation_w": self.dilation[1],
            "groups": self.groups,
        }
        for key, value in positive.items():
            if value < 1:
                raise ValueError(f"{self.name}: {key} must be >= 1, got {value}")
        if len(self.padding) != 4 or min(self.padding) < 0:
            raise ValueError(f"{self.name}: padding must be 4 values >= 0, got {self.padding}")
        if self.c % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"{self.name}: groups={self.groups} must divide c={self.c} "
                f"and out_channels={self.out_channels}"
            )
        oh, ow = self.output_hw()
        if oh < 1 or ow < 1:
            raise ValueError(f"{self.name}: empty output {oh}x{ow}")

    def output_hw(self) -> tuple[int, int]:
        """Output (height, width), as ``torch.nn.Conv2d`` computes it (floor)."""
        top, bottom, left, right = self.padding
        oh = (self.h + top + bottom - self.dilation[0] * (self.kh - 1) - 1) // self.stride[0] + 1
        ow = (self.w + left + right - self.dilation[1] * (self.kw - 1) - 1) // self.stride[1] + 1
        return oh, ow


# ---------------------------------------------------------------- helpers


def _data_rows(path: Path) -> list[dict[str, str]]:
    """CSV rows of a data file, skipping its '#' header comment lines."""
    with path.open(newline="") as f:
        lines = [line for line in f if line.strip() and not line.lstrip().startswith("#")]
    return list(csv.DictReader(lines))


def _bool01(text: str, where: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(f"{where}: expected 0 or 1, got {text!r}")
    return text == "1"


def _unknown(kind: str, name: object, valid: list[str]) -> ValueError:
    return ValueError(f"unknown {kind} {name!r}; valid: {', '.join(valid)}")


# ---------------------------------------------------------------- GEMM


@cache
def _all_gemm() -> tuple[GemmProblem, ...]:
    out = []
    for i, row in enumerate(_data_rows(SHAPES_DIR / _GEMM_FILE)):
        where = f"{_GEMM_FILE} data row {i + 1}"
        out.append(
            GemmProblem(
                set=row["set"],
                m=int(row["m"]),
                n=int(row["n"]),
                k=int(row["k"]),
                trans_a=_bool01(row["trans_a"], where),
                trans_b=_bool01(row["trans_b"], where),
            )
        )
    return tuple(out)


def gemm_problems(set: str | None = None) -> list[GemmProblem]:  # noqa: A002 - the source's word
    """DeepBench GEMM problems, in source order.

    Parameters
    ----------
    set : str or None
        ``"training"``, ``"inference_server"`` or ``"inference_device"``
        (hyphens are accepted for underscores); ``None`` for all three, in
        that order.

    Raises
    ------
    ValueError
        For any other set name.
    """
    problems = _all_gemm()
    if set is None:
        return list(problems)
    key = set.replace("-", "_")
    if key not in GEMM_SETS:
        raise _unknown("GEMM set", set, list(GEMM_SETS))
    return [p for p in problems if p.set == key]


# ---------------------------------------------------------------- convolution


def _benchdnn_files() -> dict[str, Path]:
    files = sorted(SHAPES_DIR.glob(f"{_BENCHDNN_PREFIX}*{_BENCHDNN_SUFFIX}"))
    return {p.name[len(_BENCHDNN_PREFIX):-len(_BENCHDNN_SUFFIX)]: p for p in files}


def conv_sources() -> list[str]:
    """Every name :func:`conv_problems` accepts."""
    return list(DEEPBENCH_CONV_SOURCES) + list(_benchdnn_files())


@cache
def _deepbench_conv(set_name: str) -> tuple[ConvProblem, ...]:
    out = []
    source = f"deepbench-{set_name.replace('_', '-')}"
    index = 0
    for row in _data_rows(SHAPES_DIR / _CONV_FILE):
        if row["set"] != set_name:
            continue
        ph, pw = int(row["pad_h"]), int(row["pad_w"])
        out.append(
            ConvProblem(
                name=f"{source}#{index}",
                n=int(row["n"]),
                c=int(row["c"]),
                h=int(row["h"]),
                w=int(row["w"]),
                out_channels=int(row["k"]),
                kh=int(row["kh"]),
                kw=int(row["kw"]),
                stride=(int(row["stride_h"]), int(row["stride_w"])),
                padding=(ph, ph, pw, pw),
            )
        )
        index += 1
    return tuple(out)


def benchdnn_lines(path: Path) -> list[str]:
    """The problem lines of a benchdnn batch file (comments and blanks dropped)."""
    lines = []
    for raw in path.read_text().splitlines():
        body = raw.split("#", 1)[0].strip()
        if body:
            lines.append(body)
    return lines


@cache
def _benchdnn_conv(path: Path) -> tuple[ConvProblem, ...]:
    return tuple(parse_benchdnn_conv(line) for line in benchdnn_lines(path))


def conv_problems(source: str) -> list[ConvProblem]:
    """Convolution problems of one published list, in source order.

    Parameters
    ----------
    source : str
        ``"deepbench-training"``, ``"deepbench-inference-server"``,
        ``"deepbench-inference-device"``, or a benchdnn topology with a file
        ``pyparbench/shapes/data/benchdnn_conv_<topology>.txt`` (e.g. ``"resnet_50"``).
        :func:`conv_sources` lists them.

    Raises
    ------
    ValueError
        For an unknown source (the message lists the valid ones), or a
        benchdnn line that does not parse or whose stated output size
        disagrees with its other values.
    """
    if source in DEEPBENCH_CONV_SOURCES:
        return list(_deepbench_conv(DEEPBENCH_CONV_SOURCES[source]))
    files = _benchdnn_files()
    if source in files:
        return list(_benchdnn_conv(files[source]))
    raise _unknown("convolution source", source, conv_sources())


_BENCHDNN_KEYS = (
    "g", "mb",
    "ic", "id", "ih", "iw",
    "oc", "od", "oh", "ow",
    "kd", "kh", "kw",
    "sd", "sh", "sw",
    "pd", "ph", "pw",
    "dd", "dh", "dw",
)
# A field is a key followed by digits; 'n' (the name) runs to the end.
_TOKEN = re.compile(r"(" + "|".join(sorted(_BENCHDNN_KEYS, key=len, reverse=True)) + r")(\d+)")


def parse_benchdnn_conv(line: str, *, allow_asymmetric_padding: bool = False) -> ConvProblem:
    """Parse one benchdnn convolution problem descriptor.

    ``mb1ic64ih56oc64oh56kh1ph0n"resnet_50:res2a_branch2a"`` and the like:
    ``g`` groups (default 1), ``mb`` minibatch (default 2, as in benchdnn),
    ``ic/ih/iw``, ``oc/oh/ow``, ``kh/kw``, ``sh/sw`` stride (default 1),
    ``ph/pw`` padding, ``dh/dw`` dilation counted from 0 (default 0), ``n``
    the name (to the end; surrounding quotes are removed). ``_`` separators
    are ignored. A missing w-value takes the h-value. If the h-values are
    all missing, it is a 1-D problem and h, kh, oh = 1.

    Padding: a missing ``ph`` is 0 when ``oh`` is not given; when ``oh`` is
    given and ``ph`` is not, it is deduced from ``oh`` as benchdnn does,
    ``((oh - 1) * sh - ih + (kh - 1) * (dh + 1) + 1) / 2`` (truncated, and
    not below 0). Padding is symmetric (bottom = top, right = left); the
    output size is computed with PyTorch's floor rule and must equal a
    stated ``oh``/``ow``.

    benchdnn itself accepts a stated ``oh`` that symmetric padding does not
    give, by padding the bottom with ``(oh - 1) * sh - ih + (kh - 1) * (dh + 1)
    + 1 - ph`` (likewise the right side). With ``allow_asymmetric_padding``
    such a line is accepted that way when that bottom/right padding is >= 0;
    without it (the default) it raises.

    Leading ``--option`` words (``--reset --dir=FWD_B ...``) and a trailing
    ``# comment`` are ignored. 3-D descriptors (``id``, ``kd``, ...) are
    rejected.

    Raises
    ------
    ValueError
        Naming the line, when it holds no descriptor, has an unknown or
        repeated field, lacks ic/oc/input size/kernel, is 3-D, or states an
        output size that the other values do not give.
    """
    text = line.split("#", 1)[0].strip()
    words = [w for w in text.split() if not w.startswith("--")]
    if len(words) != 1:
        raise ValueError(f"expected one benchdnn descriptor, got {len(words)} in line {line!r}")
    desc = words[0]

    name = ""
    pos = 0
    values: dict[str, int] = {}
    while pos < len(desc):
        if desc[pos] == "_":
            pos += 1
            continue
        m = _TOKEN.match(desc, pos)
        if m is None:
            if desc[pos] == "n":
                name = desc[pos + 1:]
                break
            raise ValueError(f"unrecognised text {desc[pos:]!r} in benchdnn line {line!r}")
        key, number = m.group(1), int(m.group(2))
        if key in values:
            raise ValueError(f"{key!r} given twice in benchdnn line {line!r}")
        values[key] = number
        pos = m.end()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1]

    three_d = [k for k in ("id", "od", "kd", "sd", "pd", "dd") if k in values]
    if three_d:
        raise ValueError(f"3-D descriptor ({', '.join(three_d)}) not supported: {line!r}")
    for key in ("ic", "oc"):
        if key not in values:
            raise ValueError(f"missing {key!r} in benchdnn line {line!r}")

    h_keys = ("ih", "oh", "kh", "sh", "ph", "dh")
    w_keys = ("iw", "ow", "kw", "sw", "pw", "dw")
    has_h = any(k in values for k in h_keys)
    has_w = any(k in values for k in w_keys)
    if not has_h and not has_w:
        raise ValueError(f"no spatial size in benchdnn line {line!r}")

    def side(keys: tuple[str, ...], fallback: tuple[str, ...]) -> dict[str, int | None]:
        """Values of one axis keyed by their first letter; a missing one takes
        the same field of ``fallback`` (the other axis) when given."""
        got: dict[str, int | None] = {}
        for i, key in enumerate(keys):
            if key in values:
                got[key[0]] = values[key]
            elif fallback and fallback[i] in values:
                got[key[0]] = values[fallback[i]]
            else:
                got[key[0]] = None
        return got

    hv: dict[str, int | None]
    if has_h:
        hv = side(h_keys, ())
        wv = side(w_keys, h_keys)
    else:  # 1-D: only w given
        hv = {"i": 1, "o": 1, "k": 1, "s": 1, "p": 0, "d": 0}
        wv = side(w_keys, ())

    def resolve(
        v: dict[str, int | None], axis: str
    ) -> tuple[int, int, int, tuple[int, int], int, int | None]:
        """(input, kernel, stride, (pad before, pad after), dilation, stated output)."""
        i, k = v["i"], v["k"]
        if i is None or k is None:
            raise ValueError(f"missing i{axis} or k{axis} in benchdnn line {line!r}")
        s = 1 if v["s"] is None else v["s"]
        d = 0 if v["d"] is None else v["d"]
        o = v["o"]
        extent = (k - 1) * (d + 1) + 1
        p = v["p"]
        if p is None:
            p = 0 if o is None else max(0, int(((o - 1) * s - i + extent) / 2))
        after = p
        if o is not None and (i + 2 * p - extent) // s + 1 != o and allow_asymmetric_padding:
            benchdnn_after = (o - 1) * s - i + extent - p
            if benchdnn_after >= 0:
                after = benchdnn_after
        return i, k, s, (p, after), d, o

    ih, kh, sh, (pt, pb), dh, oh_stated = resolve(hv, "h")
    iw, kw, sw, (pl, pr), dw, ow_stated = resolve(wv, "w")

    try:
        problem = ConvProblem(
            name=name,
            n=values.get("mb", 2),
            c=values["ic"],
            h=ih,
            w=iw,
            out_channels=values["oc"],
            kh=kh,
            kw=kw,
            stride=(sh, sw),
            padding=(pt, pb, pl, pr),
            dilation=(dh + 1, dw + 1),
            groups=values.get("g", 1),
        )
    except ValueError as exc:
        raise ValueError(f"{exc} (benchdnn line {line!r})") from None

    oh, ow = problem.output_hw()
    if (oh_stated is not None and oh != oh_stated) or (ow_stated is not None and ow != ow_stated):
        raise ValueError(
            f"computed output {oh}x{ow} does not match stated "
            f"oh={oh_stated} ow={ow_stated} in benchdnn line {line!r}"
        )
    return problem


# ---------------------------------------------------------------- DLRM


@cache
def _dlrm_file() -> dict[str, Any]:
    with (SHAPES_DIR / _DLRM_FILE).open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def dlrm_config(name: str) -> dict[str, Any]:
    """One DLRM configuration from ``dlrm_configs.json`` (a fresh copy).

    Parameters
    ----------
    name : str
        ``"dlrm_s_benchmark"`` (the CPU benchmark script) or
        ``"dlrm_s_criteo_kaggle"`` (the Criteo Kaggle script).

    Raises
    ------
    ValueError
        For any other name.
    """
    configs: dict[str, Any] = _dlrm_file()["configs"]
    if name not in configs:
        raise _unknown("DLRM configuration", name, list(configs))
    copied: dict[str, Any] = json.loads(json.dumps(configs[name]))
    return copied
