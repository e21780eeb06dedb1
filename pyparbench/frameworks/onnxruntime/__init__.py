"""Any Graph as an ONNX model run by ONNX Runtime's CPU provider.

* :mod:`.versions`: the ONNX IR version and opset the models are written in,
  and the probe that the installed runtime reads them;
* :mod:`.translate`: the graph as an ONNX model, built with ``onnx.helper``;
* :mod:`.knobs`: session options from the settings (ONNX Runtime has no
  process-wide knobs);
* :mod:`.runtime`: the model in an inference session, timed, run for its
  outputs and profiled;
* :mod:`.profile`: ONNX Runtime's profile charged to the graph's op types.

Imported only in a framework child process, after ONNX Runtime (see
:mod:`pyparbench.frameworks.child`). Every ``import onnxruntime`` /
``import onnx`` here is absolute: it is the real package, never this one.
"""

from pyparbench.frameworks.onnxruntime.knobs import configure
from pyparbench.frameworks.onnxruntime.runtime import OrtModel, prepare
from pyparbench.frameworks.onnxruntime.versions import OPSET, NoCommonVersion

__all__ = ["OPSET", "NoCommonVersion", "OrtModel", "configure", "prepare"]
