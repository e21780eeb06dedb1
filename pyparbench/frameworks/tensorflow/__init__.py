"""Any Graph as a TensorFlow model, the way TensorFlow's users write one.

* :mod:`.knobs`: thread pools and the scheduler, set before any op runs;
* :mod:`.translate`: the graph's weights as ``tf.Variable``s and its forward
  pass as ``tf.nn`` / ``tf.linalg`` ops (NHWC);
* :mod:`.runtime`: that forward pass as one ``tf.function``, timed, run for
  its outputs and profiled;
* :mod:`.profile`: TensorFlow's profiler trace read back and charged to the
  graph's op types.

Imported only in a framework child process, after TensorFlow (see
:mod:`pyparbench.frameworks.child`); every import of TensorFlow here is
absolute, so this package never stands in for it.
"""

from pyparbench.frameworks.tensorflow.knobs import configure
from pyparbench.frameworks.tensorflow.runtime import TFModel, prepare

__all__ = ["TFModel", "configure", "prepare"]
