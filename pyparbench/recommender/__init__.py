"""Thread-setting recommender: cost model + schedule simulation of the graph.

:func:`recommend` predicts the graph's latency (or throughput) under every
candidate setting of the knobs and returns the best, with the presets'
predictions beside it and the reasons::

    import pyparbench as ppb
    from pyparbench import models
    rec = ppb.recommend(models.build("googlenet", batch=1))
    print(rec.format())          # settings, prediction, presets, reasons
    rec.settings                 # a Settings, name "recommended"

(``ppb.recommend`` is this package's :func:`recommend`; the rest of the
recommender is imported from here, ``from pyparbench.recommender import
TableCostModel``, or from its modules.)

The steps (:mod:`~pyparbench.recommender.api`), one module each:

* the cost model (:mod:`~pyparbench.recommender.modelchoice`): op times
  measured on this machine and cached
  (:mod:`~pyparbench.recommender.calibrate`), or, for a machine that is not
  this one, a roofline with Amdahl-style scaling
  (:class:`~pyparbench.recommender.costmodel.AnalyticCostModel`);
* the search space (:mod:`~pyparbench.recommender.search`): the graph each
  instance count runs and the candidate settings, each predicted by the
  schedule simulation (:mod:`~pyparbench.recommender.simulate`), which
  replays the executor's scheduling of the graph the executor runs under
  that setting (:func:`pyparbench.graph.passes.executed_graph`: conv, batch
  norm and activation fused, channels-last);
* the choice (:mod:`~pyparbench.recommender.selection`): ties, the
  framework-mode margin, and on this machine the few best predicted
  settings measured whole, side by side
  (:mod:`~pyparbench.recommender.side_by_side`);
* the reasons (:mod:`~pyparbench.recommender.reasons`), on the result types
  (:mod:`~pyparbench.recommender.types`);
* the rule that settles between close settings by measuring them, stated
  once (:mod:`~pyparbench.recommender.decision`);
* a recommendation checked in the framework the user runs
  (:func:`check_in_framework`, :mod:`~pyparbench.recommender.framework_check`:
  ``recommend --framework``).

The study's tuner only counts heavy ops and divides the cores by the average
width; this recommender knows the ops' sizes, how each scales, what the
executor costs per node, and what running ops at once costs.
"""

from __future__ import annotations

from pyparbench.recommender.api import recommend
from pyparbench.recommender.costmodel import (
    AnalyticCostModel,
    CalibratedCostModel,
    CostModel,
    ExecutorCosts,
    MachineSpec,
    TableCostModel,
)
from pyparbench.recommender.framework_check import FrameworkCheck, check_in_framework
from pyparbench.recommender.search import candidates, instance_operators, predict
from pyparbench.recommender.selection import FRAMEWORK_MARGIN
from pyparbench.recommender.simulate import Resources, simulate
from pyparbench.recommender.types import OBJECTIVES, Prediction, Recommendation

__all__ = [
    "FRAMEWORK_MARGIN",
    "OBJECTIVES",
    "AnalyticCostModel",
    "CalibratedCostModel",
    "CostModel",
    "ExecutorCosts",
    "FrameworkCheck",
    "MachineSpec",
    "Prediction",
    "Recommendation",
    "Resources",
    "TableCostModel",
    "candidates",
    "check_in_framework",
    "instance_operators",
    "predict",
    "recommend",
    "simulate",
]
