from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .threading import Audit

class NodeSpec:
    op: str
    name: str
    inputs: list[int]
    shape: list[int]
    int64: bool
    bf16: bool
    int8: bool
    precision: str
    kind: str
    mode: str
    kernel: list[int]
    stride: list[int]
    dilation: list[int]
    padding: list[int]
    groups: int
    axis: int
    start: int
    pad_id: int
    offset: int
    causal: bool
    scale: float
    causal_fill: float
    eps: float
    relu: bool
    trans_b: bool
    ceil_mode: bool
    count_include_pad: bool
    perm: list[int]
    activation: str
    layout: str
    input_layout: str
    inplace: int
    im2col: bool
    def __init__(self) -> None: ...
    def set_param(self, name: str, array: npt.NDArray[np.float32]) -> None: ...

class ExecSettings:
    scheduler: str
    operator: str
    inter_op: int
    intra_op: int
    library: str
    pool: str
    worker_cpus: list[list[int]]
    node_group: list[int]
    groups: int
    alone_below_ns: float
    def __init__(self) -> None: ...

class Plan:
    def __init__(self, nodes: Sequence[NodeSpec], outputs: Sequence[int], *,
                 reuse_buffers: bool = False, weights_in_place: bool = False) -> None: ...
    @property
    def weights_in_place(self) -> bool: ...
    def set_input(self, node: int, array: npt.NDArray[Any]) -> None: ...
    def bind_input(self, node: int, array: npt.NDArray[Any]) -> None: ...
    def outputs(self, nodes: Sequence[int]) -> list[npt.NDArray[Any]]: ...
    def run(self, settings: ExecSettings, *, repeats: int = 10, warmup: int = 2,
            trace: bool = False, audit: Audit | None = None) -> dict[str, Any]: ...
    def blocks(self, settings: ExecSettings) -> list[int]: ...
    def implementations(self, settings: ExecSettings) -> list[str]: ...
    def emulated(self, settings: ExecSettings) -> list[bool]: ...
    def node_threads(self, settings: ExecSettings) -> list[dict[str, Any]]: ...
    def time_node(self, settings: ExecSettings, node: int, *, repeats: int = 10,
                  warmup: int = 2, inner: int = 1000) -> npt.NDArray[np.float64]: ...
    @property
    def buffer_slots(self) -> list[int]: ...
    @property
    def allocated_bytes(self) -> int: ...

def run_instances(plans: Sequence[Plan], settings: Sequence[ExecSettings], *, repeats: int = 10,
                  warmup: int = 2) -> tuple[npt.NDArray[np.float64], list[npt.NDArray[np.float64]]]: ...
def work_rates() -> dict[str, float]: ...
def team_cost_ns(operator: str, pool: str, threads: int) -> float: ...
def preferred_layout() -> str: ...
