"""Builders of model-like graphs, one module per family, and their registry.

``build(name, batch)`` returns the :class:`~pyparbench.graph.Graph` of a
registered model; ``MODELS`` describes each one. Weights are seeded random;
shapes and structure follow the reference architecture named in each
module's docstring. A user's ONNX file is a model too: :func:`resolve` takes
its path and returns its name (``my.onnx@<sha256[:12]>``,
:mod:`pyparbench.models.files`), which ``build`` then loads;
:func:`attach_module` gives PyTorch the module such a file came from
(:mod:`pyparbench.models.modules`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pyparbench.graph import Graph
from pyparbench.models import files
from pyparbench.models.dlrm import dlrm, dlrm_kaggle
from pyparbench.models.googlenet import googlenet
from pyparbench.models.inception_v2 import inception_v2
from pyparbench.models.inception_v3 import inception_v3
from pyparbench.models.llama import LLAMA_SIZES, llama_prefill
from pyparbench.models.mlp import fc_mlp
from pyparbench.models.mobilenet_v2 import mobilenet_v2
from pyparbench.models.ncf import ncf
from pyparbench.models.resnet import resnet50, resnext50_32x4d
from pyparbench.models.squeezenet import squeezenet1_0
from pyparbench.models.transformer import transformer_encoder
from pyparbench.models.wide_deep import wide_deep
from pyparbench.models.modules import attach_module  # noqa: E402 (after the builders)

__all__ = [
    "MODELS",
    "ModelSpec",
    "attach_module",
    "build",
    "dlrm",
    "dlrm_kaggle",
    "fc_mlp",
    "googlenet",
    "inception_v2",
    "inception_v3",
    "llama_prefill",
    "mobilenet_v2",
    "ncf",
    "resolve",
    "resnet50",
    "resnext50_32x4d",
    "squeezenet1_0",
    "transformer_encoder",
    "wide_deep",
]

Kind = Literal["vision", "mlp", "recommendation", "nlp"]


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: how to build it and what it is.

    ``kwargs`` are fixed keyword arguments of the builder for this entry
    (e.g. the width of an MLP); ``build`` passes the caller's on top.
    """

    name: str
    builder: Callable[..., Graph]
    default_batch: int
    description: str
    family: str
    kind: Kind
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def build(self, batch: int | None = None, **kw: Any) -> Graph:
        graph = self.builder(self.default_batch if batch is None else batch,
                             **{**self.kwargs, **kw})
        graph.meta.setdefault("model", self.name)
        return graph


_SPECS = [
    ModelSpec("googlenet", googlenet, 16, "GoogLeNet / Inception-v1 (Szegedy 2014), 224x224",
              "inception", "vision"),
    ModelSpec("inception-v2", inception_v2, 16, "BN-Inception (Ioffe & Szegedy 2015), 224x224",
              "inception", "vision"),
    ModelSpec("inception-v3", inception_v3, 16, "Inception-v3 as Keras applications, 299x299",
              "inception", "vision"),
    ModelSpec("resnet50", resnet50, 16, "ResNet-50 as Keras applications, 224x224",
              "resnet", "vision"),
    ModelSpec("resnext50", resnext50_32x4d, 16, "ResNeXt-50 32x4d (Xie 2017), 224x224",
              "resnet", "vision"),
    ModelSpec("squeezenet", squeezenet1_0, 16, "SqueezeNet 1.0 (Iandola 2016), 224x224",
              "squeezenet", "vision"),
    ModelSpec("mobilenet-v2", mobilenet_v2, 16, "MobileNet-v2 as Keras applications, 224x224",
              "mobilenet", "vision"),
    ModelSpec("mlp-512", fc_mlp, 128, "the study's FC-512: 8 fully connected layers of 512",
              "mlp", "mlp", {"width": 512}),
    ModelSpec("mlp-4096", fc_mlp, 128, "the study's FC-4096: 8 fully connected layers of 4096",
              "mlp", "mlp", {"width": 4096}),
    ModelSpec("ncf", ncf, 2048, "NCF / NeuMF (He 2017), MLPerf's MovieLens-20M sizes",
              "ncf", "recommendation"),
    ModelSpec("wide-deep", wide_deep, 512, "Wide & Deep (Cheng 2016), Criteo-like features",
              "wide_deep", "recommendation"),
    ModelSpec("dlrm", dlrm, 2048, "DLRM, the dlrm repo's CPU benchmark: 8 x 1M x 64, 100 "
              "lookups", "dlrm", "recommendation"),
    ModelSpec("dlrm-kaggle", dlrm_kaggle, 128, "DLRM, Criteo Kaggle config: 26 tables, dim 16",
              "dlrm", "recommendation"),
    ModelSpec("transformer", transformer_encoder, 8, "one BERT-base encoder layer, seq 128",
              "transformer", "nlp"),
    *(ModelSpec(name, llama_prefill, 1, size.description, "llama", "nlp", {"size": name})
      for name, size in LLAMA_SIZES.items()),
]
MODELS: dict[str, ModelSpec] = {s.name: s for s in _SPECS}


def resolve(model: str, shapes: Mapping[str, int] | None = None) -> str:
    """The model name of ``model``: a key of ``MODELS`` as it is, an ONNX
    file's path as the file's name (``my.onnx@<sha256[:12]>``, registered
    for this process and its children, the file imported once to check it),
    with its symbolic dimensions sized by ``shapes`` (by name; part of the
    name: ``my.onnx@<sha256[:12]>:seq=16``). ``shapes`` is for files: a
    built-in model has none and takes its name as it is.

    Raises
    ------
    ValueError
        Neither a model's name nor a file; a file that does not import (one
        line; unsupported ops listed in one error; a symbolic dimension
        ``shapes`` leaves unsized, or one it names that the file lacks).
    """
    if model in MODELS:
        return model
    if files.looks_like_file(model):
        return files.register(model, shapes=shapes)
    if files.is_file_key(model):
        files.file_path(model)  # registered (by a parent): usable as it is
        if shapes:
            base = model.partition(":")[0]
            return files.register(files.file_path(base), shapes={**files.shapes_of(model),
                                                                 **shapes})
        return model
    raise ValueError(f"unknown model {model!r}; valid names: {', '.join(MODELS)}, "
                     "or an ONNX file's path")


def build(name: str, batch: int | None = None, **kw: Any) -> Graph:
    """The graph of registered model ``name``.

    Parameters
    ----------
    name
        A key of ``MODELS``, or an ONNX file's model name from :func:`resolve`
        (or its path).
    batch
        Batch size (>= 1); None: the model's default.
    **kw
        Further keyword arguments of the model's builder (seed, max_rows, ...).

    Raises
    ------
    ValueError
        An unknown name (listing the valid ones) or a bad batch size.
    """
    spec = MODELS.get(name)
    if spec is None:
        if files.is_file_key(name) or files.looks_like_file(name):
            key = name if files.is_file_key(name) else files.register(name, check=False)
            return files.load(key, batch, **kw)
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(MODELS)}")
    return spec.build(batch, **kw)
