"""The same graphs in TensorFlow, PyTorch and ONNX Runtime, against pyparbench's executor.

Any :class:`~pyparbench.graph.Graph` becomes each framework's model the way
its users write one (:mod:`.tensorflow`, :mod:`.torch`, :mod:`.onnxruntime`;
:mod:`.native` is pyparbench's executor on the same graph), with the
graph's own weights. Each framework's package holds its knobs, its
translation of the graph, its runtime wrapper and its profile attribution
apart; what they share is :mod:`._common`. Every run happens in a fresh
process pinned before the framework is imported, so the frameworks'
thread pools and their own OpenMP / oneDNN runtimes never meet pyparbench's
(:mod:`.launch`, :mod:`.child`). pyparbench's settings map onto each
framework's knobs as :mod:`.mapping` tabulates; what does not map is listed
in the result as not applicable.

* :func:`run_framework` — one graph in one framework: latency, reported
  thread settings, threading audit, optional outputs and profile, as a
  :class:`FrameworkRun` (:mod:`.answer`: a child's answer read once); a
  child that fails or times out is a :class:`ChildFailed` where a result
  is needed (:func:`framework_outputs`).
* :func:`run_lockstep` — runtimes each in its own process, taking turns run
  by run: the paired ratio a slow spell of a shared machine cancels out of.
* :func:`framework_outputs` — the outputs of graphs in a framework, to
  compare with the executor or the float64 reference.
* :func:`measure_overhead` — a model natively and in each framework: latency,
  kernel sum, overhead overall and per op type, dispatch cost per node
  (:func:`measure_dispatch`, at one thread and at all).
* :func:`operator_scaling` — the model's heavy ops at 1..N threads,
  natively and in each framework.
* :func:`deployment` — a setting as each framework takes it: launch lines,
  environment, code (``recommend --for/--emit``).
"""

from pyparbench.child_process import ChildFailed
from pyparbench.frameworks.answer import ChildAnswer, FrameworkRun, JobAnswer
from pyparbench.frameworks.deploy import Deployment, deployment
from pyparbench.frameworks.launch import (
    TARGETS,
    Job,
    framework_outputs,
    run_child,
    run_framework,
)
from pyparbench.frameworks.lockstep import Contender, LockstepResult, PairedRatio, run_lockstep
from pyparbench.frameworks.mapping import (
    DEFAULT_MODES,
    FRAMEWORKS,
    MODES,
    FrameworkConfig,
    NotApplicable,
    map_settings,
)
from pyparbench.frameworks.overhead import (
    DISPATCH_NODES,
    dispatch_graph,
    heavy_op_graphs,
    measure_dispatch,
    measure_overhead,
    operator_scaling,
)
from pyparbench.frameworks.spec import ModelRef, build_graph, graph_to_spec, to_spec

__all__ = [
    "DEFAULT_MODES",
    "DISPATCH_NODES",
    "FRAMEWORKS",
    "MODES",
    "TARGETS",
    "ChildAnswer",
    "ChildFailed",
    "Contender",
    "Deployment",
    "FrameworkConfig",
    "FrameworkRun",
    "Job",
    "JobAnswer",
    "LockstepResult",
    "ModelRef",
    "NotApplicable",
    "PairedRatio",
    "build_graph",
    "deployment",
    "dispatch_graph",
    "framework_outputs",
    "graph_to_spec",
    "heavy_op_graphs",
    "map_settings",
    "measure_dispatch",
    "measure_overhead",
    "operator_scaling",
    "run_child",
    "run_framework",
    "run_lockstep",
    "to_spec",
]
