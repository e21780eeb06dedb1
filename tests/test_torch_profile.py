"""torch.profiler's events charged to the graph's op types: under autocast a
scripted graph runs its casts as ops of their own, before the op they feed;
they are charged to that op, as eager autocast's casts (inside the op) are."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from pyparbench.frameworks.torch.profile import record  # noqa: E402


def _mlp() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 8)).eval()


@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")
@pytest.mark.parametrize("scripted", [False, True], ids=["eager", "script"])
def test_autocast_casts_are_charged_to_the_linear_they_feed(scripted: bool) -> None:
    model = _mlp()
    x = torch.randn(4, 64)
    if scripted:
        with torch.inference_mode():
            model = torch.jit.freeze(torch.jit.script(model))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(x)

    with torch.inference_mode():  # the scripted graph specialises on its first calls
        for _ in range(3):
            step()
    profile = record(step, 3)
    by_op: dict[str, list[str]] = {}
    for k in profile.kernels:
        by_op.setdefault(k.op, []).append(k.name)
    assert not any("autocast" in name or name == "aten::to" for name in by_op.get("other", [])), \
        by_op
    assert "linear" in by_op and "eltwise" in by_op, by_op
    if scripted:  # the casts are kernels of their own, on the linear row
        assert "aten::_autocast_to_reduced_precision" in by_op["linear"], by_op
        linear_calls = sum(k.calls for k in profile.kernels if k.op == "linear"
                           and k.name == "aten::linear")
        assert linear_calls == 2
