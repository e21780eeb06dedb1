"""The native side of a comparison: pyparbench's executor on the same graph.

* :mod:`.runtime`: the compiled plan under the settings: latency, outputs,
  audit, per-node trace;
* :mod:`.kernels`: each node as an isolated prepared kernel (the kernel sum);
* :mod:`.profile`: the per-node trace by op type.

Imported in the native child process (pyparbench's core loaded, no framework).
"""

from pyparbench.frameworks.native.kernels import node_kernel
from pyparbench.frameworks.native.runtime import NativeModel, prepare

__all__ = ["NativeModel", "node_kernel", "prepare"]
