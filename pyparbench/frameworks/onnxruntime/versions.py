"""The ONNX IR version and opset pyparbench's models are written in, and a
check that the installed ONNX Runtime reads them.

Opset: :data:`OPSET` (17), fixed, because it is what the builder's nodes are
written for: LayerNormalization is new in opset 17 and ReduceMean still
takes its axes as an attribute (an input from opset 18 on). Every declared
runtime runs it (ONNX Runtime has run opset 17 since 1.13; pyproject
declares >= 1.20) and every declared onnx writes it (since 1.12; declared
>= 1.16).

IR version: the lowest the opset needs, from onnx's own release table
(``onnx.helper.VERSION_TABLE``: opset 17 came with IR 8, in onnx 1.12),
never the installed onnx's newest. ``onnx.helper.make_model`` stamps the
newest (IR 14 with onnx 1.23), which older runtimes refuse ("Unsupported
model IR version: 14, max supported IR version: 10" from onnxruntime
1.20). The model uses nothing a later IR version added (new element
types, function overloads), so IR 8 loses nothing, every runtime that runs
the opset reads it, and every runtime gets the same bytes: comparing two
ONNX Runtime versions compares the runtimes, not two stampings.

The runtime's side is probed, not looked up: once per process a tiny model
of exactly that IR version and opset (a LayerNormalization, new in opset
17) is loaded. A table of ONNX Runtime versions would have to follow every
release, and would still have to guess for a version newer than itself (or
for a custom build); the probe asks the runtime that will run the model,
at the cost of one small session. ONNX Runtime has no call that returns the
IR versions or opsets it reads, so loading is the only way to ask. Where
the probe fails there is no common version: :class:`NoCommonVersion` says
so in one line, naming both versions and the runtime's own reason.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["OPSET", "ModelVersions", "NoCommonVersion", "model_versions", "probe"]

OPSET = 17


class NoCommonVersion(RuntimeError):
    """The installed onnx and ONNX Runtime share no IR version / opset that
    pyparbench's models can be written in."""


@dataclass(frozen=True)
class ModelVersions:
    """What the models are written in: ``ir_version`` and ``opset`` (the
    default domain's), and the onnx that writes them."""

    ir_version: int
    opset: int
    onnx: str

    def as_dict(self) -> dict[str, Any]:
        return {"onnx_ir_version": self.ir_version, "onnx_opset": self.opset,
                "onnx_version": self.onnx}


def model_versions() -> ModelVersions:
    """The IR version and opset of :data:`OPSET` in the installed onnx.

    Raises
    ------
    NoCommonVersion
        The installed onnx does not know the opset.
    """
    import onnx
    from onnx import helper

    newest = onnx.defs.onnx_opset_version()
    if newest < OPSET:
        raise NoCommonVersion(f"onnx {onnx.__version__} writes opsets up to {newest}; "
                              f"pyparbench's ONNX models are opset {OPSET} (onnx >= 1.12)")
    ir = int(helper.find_min_ir_version_for([helper.make_opsetid("", OPSET)]))
    return ModelVersions(ir, OPSET, onnx.__version__)


def _tiny_model(versions: ModelVersions) -> bytes:
    """A one-node model (LayerNormalization, new in opset 17) in ``versions``."""
    from onnx import TensorProto, helper, numpy_helper

    one = numpy_helper.from_array(np.ones(2, np.float32), "scale")
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"], axis=-1)
    graph = helper.make_graph(
        [node], "ppb-probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", versions.opset)],
                              ir_version=versions.ir_version)
    data: bytes = model.SerializeToString()
    return data


@functools.cache
def probe(ort: Any) -> ModelVersions:
    """The versions the models are written in, once the runtime ``ort`` (the
    onnxruntime module) has loaded a tiny model in them; once per process.

    Raises
    ------
    NoCommonVersion
        The installed onnx cannot write the opset, or the runtime refuses a
        model of that IR version and opset (the message gives its reason).
    """
    import onnx

    versions = model_versions()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # a throwaway session: no thread pool to start
    so.inter_op_num_threads = 1
    try:
        ort.InferenceSession(_tiny_model(versions), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # ONNX Runtime raises its own exception types
        reason = " ".join(str(e).split())
        raise NoCommonVersion(
            f"onnxruntime {ort.__version__} cannot read ONNX IR version {versions.ir_version} "
            f"with opset {versions.opset}, the versions pyparbench writes with onnx "
            f"{onnx.__version__}: {reason}") from None
    return versions
