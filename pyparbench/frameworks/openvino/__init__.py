"""Any Graph, or a user's ONNX file, run by OpenVINO's CPU plugin.

The model reaches OpenVINO through its ONNX front end
(``openvino.Core().read_model``), not through its Python opset API: a
built-in graph is written as the same ONNX file ONNX Runtime runs
(:func:`pyparbench.frameworks.onnxruntime.translate.build_onnx`), and a
user's file is read as it is. One translation serves both runtimes, so a
difference between them is the runtimes', not two translators'; the file
read is the one a user serves (and hands to ``benchmark_app -m``); and the
ONNX front end is the path OpenVINO's own users take from a trained model.

* :mod:`.knobs`: the properties ``compile_model`` takes from the settings,
  what the compiled model reports back, and the same setting as a user's
  code or a ``benchmark_app`` command line;
* :mod:`.runtime`: the model compiled, timed (one infer request per
  stream, all started together), run for its outputs and profiled;
* :mod:`.profile`: OpenVINO's performance counters charged to the graph's
  op types.

Imported only in a framework child process (see
:mod:`pyparbench.frameworks.child`): OpenVINO's TBB threads never share a
process with the native core's OpenMP. Every ``import openvino`` here is
absolute: it is the real package, never this one.
"""

from pyparbench.frameworks.openvino.knobs import benchmark_app_command, code, configure
from pyparbench.frameworks.openvino.runtime import OvModel, prepare

__all__ = ["OvModel", "benchmark_app_command", "code", "configure", "prepare"]
