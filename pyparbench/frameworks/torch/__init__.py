"""Any Graph as a PyTorch ``nn.Module``, the way PyTorch's users write one.

* :mod:`.knobs`: thread counts and the convolution library, set before any work;
* :mod:`.translate`: the module's source generated from the graph, one line
  per node, and the module loaded with the graph's weights;
* :mod:`.runtime`: that module eager, frozen TorchScript or ``torch.compile``d,
  timed, run for its outputs and profiled;
* :mod:`.profile`: torch.profiler's events charged to the graph's op types.

Imported only in a framework child process, after PyTorch (see
:mod:`pyparbench.frameworks.child`). Every ``import torch`` here is
absolute: it is PyTorch, never this package.
"""

from pyparbench.frameworks.torch.knobs import configure
from pyparbench.frameworks.torch.runtime import TorchModel, prepare

__all__ = ["TorchModel", "configure", "prepare"]
