"""Are pyparbench's framework models as fast as what the frameworks' users run?

  python bench/framework_fairness.py [--batches 1 8] [--threads 2] [--rounds 9] [--json out.json]

Side by side in one process per framework (pinned to ``--threads`` CPUs,
compact, as ``pyparbench overhead`` pins), in interleaved rounds so that
both see the same machine:

* TensorFlow: pyparbench's ResNet-50 (``pyparbench.frameworks.tf_backend``)
  against ``tf.keras.applications.ResNet50(weights=None)`` called in a
  ``tf.function``, same thread settings;
* PyTorch, eager and frozen TorchScript: pyparbench's generated module
  against a plain hand-written ``torch.nn`` ResNet-50 of the same
  architecture (Keras' variant: biased convolutions, the stride on the first
  1x1, batch norm epsilon 1.001e-5), loaded with the same weights and
  checked to give the same output and to run the same ops (torch.profiler's
  top-level op counts).

Each figure is the median over rounds of the per-call median; the ratio is
the median of per-round ratios (pyparbench / reference): 1.00 means as fast.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROUNDS_CALLS = 5  # calls per round and model


def _rounds(ours: Any, ref: Any, rounds: int) -> dict[str, Any]:
    """Interleaved rounds of ROUNDS_CALLS calls each; per-call medians."""
    def timed(fn: Any) -> float:
        ts = []
        for _ in range(ROUNDS_CALLS):
            t0 = time.perf_counter_ns()
            fn()
            ts.append(time.perf_counter_ns() - t0)
        return float(np.median(ts))

    for _ in range(3):
        ours()
        ref()
    a, b = [], []
    for _ in range(rounds):
        a.append(timed(ours))
        b.append(timed(ref))
    ratios = np.array(a) / np.array(b)
    return {"ours_ms": float(np.median(a)) / 1e6, "reference_ms": float(np.median(b)) / 1e6,
            "ratio": float(np.median(ratios)),
            "ratio_iqr": [float(np.percentile(ratios, 25)), float(np.percentile(ratios, 75))]}


# ------------------------------------------------------------------ children


def _child_tensorflow(batch: int, threads: int, rounds: int) -> dict[str, Any]:
    import tensorflow as tf

    from pyparbench.frameworks import tf_backend
    from pyparbench.models import build

    knobs = {"inter_op_parallelism_threads": 1, "intra_op_parallelism_threads": threads,
             "synchronous_execution": True, "jit_compile": False}
    tf_backend.configure(tf, knobs)
    graph = build("resnet50", batch)
    inputs = graph.random_inputs(seed=0)
    ours = tf_backend.prepare(tf, graph, inputs, knobs)
    keras = tf.keras.applications.ResNet50(weights=None)
    assert keras.count_params() == graph.num_params  # the same architecture
    fn = tf.function(lambda x: keras(x, training=False))
    x = tf.constant(np.ascontiguousarray(inputs["image"].transpose(0, 2, 3, 1)))
    out = _rounds(ours.step, lambda: fn(x), rounds)
    out["reference"] = "tf.keras.applications.ResNet50(weights=None) in a tf.function"
    return {"tensorflow": out}


def _torch_resnet50(torch: Any) -> Any:
    """A plain hand-written ResNet-50, Keras' variant (as pyparbench's graph)."""
    nn = torch.nn
    eps = 1.001e-5

    class Bottleneck(nn.Module):  # type: ignore[misc]
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            out = width * 4
            self.downsample = None
            if stride != 1 or cin != out:
                self.downsample = nn.Sequential(nn.Conv2d(cin, out, 1, stride),
                                                nn.BatchNorm2d(out, eps=eps))
            self.conv1 = nn.Conv2d(cin, width, 1, stride)
            self.bn1 = nn.BatchNorm2d(width, eps=eps)
            self.conv2 = nn.Conv2d(width, width, 3, 1, 1)
            self.bn2 = nn.BatchNorm2d(width, eps=eps)
            self.conv3 = nn.Conv2d(width, out, 1)
            self.bn3 = nn.BatchNorm2d(out, eps=eps)
            self.relu = nn.ReLU(inplace=True)

        # Unannotated: TorchScript takes the arguments as tensors.
        def forward(self, x):  # type: ignore[no-untyped-def]
            identity = x
            if self.downsample is not None:
                identity = self.downsample(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + identity)

    class ResNet50(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3)
            self.bn1 = nn.BatchNorm2d(64, eps=eps)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            blocks: list[Any] = []
            cin = 64
            for i, (width, n) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
                for j in range(n):
                    blocks.append(Bottleneck(cin, width, 2 if j == 0 and i > 0 else 1))
                    cin = width * 4
            self.layers = nn.Sequential(*blocks)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layers(x)
            return torch.softmax(self.fc(torch.flatten(self.avgpool(x), 1)), 1)

    return ResNet50()


def _load_graph_weights(torch: Any, model: Any, graph: Any) -> None:
    """The graph's weights, in node order, into the modules in definition order."""
    nn = torch.nn
    mods = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.BatchNorm2d, nn.Linear))]
    nodes = [n for n in graph.nodes if n.op in ("conv2d", "batch_norm", "linear")]
    assert len(mods) == len(nodes)
    with torch.no_grad():
        for m, n in zip(mods, nodes, strict=True):
            p = {k: torch.from_numpy(np.array(n.params[k])) for k in n.params}
            if n.op == "batch_norm":
                m.running_mean.copy_(p["mean"])
                m.running_var.copy_(p["var"])
                m.weight.copy_(p["scale"])
                m.bias.copy_(p["shift"])
            else:
                m.weight.copy_(p["weight"])
                m.bias.copy_(p["bias"])


def _ops(torch: Any, call: Any) -> dict[str, int]:
    """How many times each top-level op runs in one call (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
        call()
    counts: dict[str, int] = {}
    for e in prof.events():
        if e.cpu_parent is None:
            counts[e.name] = counts.get(e.name, 0) + 1
    return counts


def _child_torch(batch: int, threads: int, rounds: int) -> dict[str, Any]:
    import torch

    from pyparbench.frameworks import torch_backend
    from pyparbench.models import build

    knobs = {"num_threads": threads, "num_interop_threads": 1, "mkldnn": True,
             "fork_branches": False}
    torch_backend.configure(torch, knobs)
    graph = build("resnet50", batch)
    inputs = graph.random_inputs(seed=0)
    plain = _torch_resnet50(torch).eval()
    _load_graph_weights(torch, plain, graph)
    x = torch.from_numpy(inputs["image"])
    out: dict[str, Any] = {}
    for mode in ("eager", "script"):
        ours = torch_backend.prepare(torch, graph, inputs, mode, knobs)
        ref = plain if mode == "eager" else torch.jit.freeze(torch.jit.script(plain))
        with torch.inference_mode():
            want = ref(x).numpy()
            got = ours.outputs()["predictions"]
            res = _rounds(ours.step, lambda ref=ref: ref(x), rounds)
        res["max_abs_difference"] = float(np.abs(got - want).max())
        res["same_ops"] = _ops(torch, ours.step) == _ops(torch, lambda ref=ref: ref(x))
        res["reference"] = ("hand-written torch.nn ResNet-50" if mode == "eager" else
                            "hand-written torch.nn ResNet-50, torch.jit.freeze(torch.jit.script)")
        out[f"torch/{mode}"] = res
    return out


# -------------------------------------------------------------------- parent


def _run_child(framework: str, batch: int, threads: int, rounds: int) -> dict[str, Any]:
    from pyparbench.frameworks.launch import child_cpus
    from pyparbench.settings import Settings

    cpus = child_cpus(Settings(intra_op=threads, affinity="compact"))
    env = {**os.environ, "PYPARBENCH_NO_CORE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    if framework == "torch" and cpus:
        env["GOMP_CPU_AFFINITY"] = " ".join(map(str, cpus))
    proc = subprocess.run(
        [sys.executable, "-P", str(Path(__file__).resolve()), "--child", framework,
         "--batches", str(batch), "--threads", str(threads), "--rounds", str(rounds)],
        capture_output=True, text=True, env=env, cwd="/", check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    if proc.returncode != 0:
        raise RuntimeError(f"{framework} batch {batch}: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--threads", type=int, default=min(2, len(os.sched_getaffinity(0))))
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--frameworks", nargs="+", default=["tensorflow", "torch"],
                   choices=["tensorflow", "torch"])
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--child", choices=["tensorflow", "torch"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        run = _child_tensorflow if args.child == "tensorflow" else _child_torch
        print(json.dumps(run(args.batches[0], args.threads, args.rounds)))
        return 0
    rows = []
    print(f"ResNet-50, {args.threads} thread(s), pinned compact; median ms per call, "
          "ratio = pyparbench / reference (median [IQR] of per-round ratios)")
    for batch in args.batches:
        for fw in args.frameworks:
            for name, r in _run_child(fw, batch, args.threads, args.rounds).items():
                rows.append({"batch": batch, "runner": name, **r})
                diff = (f", outputs differ by {r['max_abs_difference']:.1e}, "
                        f"{'the same' if r['same_ops'] else 'different'} ops"
                        if "max_abs_difference" in r else "")
                print(f"  batch {batch:<2d} {name:14s} pyparbench {r['ours_ms']:8.2f}  "
                      f"reference {r['reference_ms']:8.2f}  ratio {r['ratio']:.3f} "
                      f"[{r['ratio_iqr'][0]:.3f}, {r['ratio_iqr'][1]:.3f}]{diff}  "
                      f"({r['reference']})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": args.threads, "rows": rows},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
