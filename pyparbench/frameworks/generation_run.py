"""A generation (:mod:`pyparbench.frameworks.generation`) in a fresh child
pinned to its threads' CPUs, as every framework run is: the native executor
on its cache kept in place (:mod:`pyparbench.frameworks.native.generation`);
llama.cpp on a GGUF file written, into a temporary folder, from the same
weights (float32 matrices and cache), its ``-t`` and ``-tb`` both the
threads; transformers' ``LlamaForCausalLM`` on the same weights in PyTorch
(:mod:`pyparbench.frameworks.torch.generation`, ``torch.set_num_threads``);
or ONNX Runtime on that model exported with its cache, into a temporary
folder, by this process (:mod:`pyparbench.frameworks.onnxruntime.generation`,
``intra_op_num_threads``). Only the native child loads the native core.

Each child generates once untimed (kernels prepared, pages touched), then
once timed.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pyparbench import child_process
from pyparbench.frameworks.generation import (
    GenerationRecord,
    GenerationRequest,
    prompt_ids,
    record_from_times,
)
from pyparbench.frameworks.file_room import check_room
from pyparbench.models.llama import config_of, llama_prefill, transformers_weights
from pyparbench.settings import Settings

__all__ = ["GENERATION_PACKAGES", "check_installed", "missing_packages", "run_generation"]

# What each framework's generation needs: (module, pip package), and the
# extra that installs them all.
GENERATION_PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "native": (),
    "llamacpp": (("llama_cpp", "llama-cpp-python"), ("gguf", "gguf")),
    "torch": (("torch", "torch"), ("transformers", "transformers")),
    # The decoder is exported by PyTorch (TorchScript's exporter writes with onnx).
    "onnxruntime": (("onnxruntime", "onnxruntime"), ("onnx", "onnx"), ("torch", "torch"),
                    ("transformers", "transformers")),
}
_EXTRAS = {"llamacpp": "llm", "torch": "frameworks", "onnxruntime": "frameworks"}


def missing_packages(framework: str) -> list[str]:
    """The pip packages ``framework``'s generation needs and this Python
    lacks (found, not imported); ValueError naming a framework generation
    does not run in."""
    if framework not in GENERATION_PACKAGES:
        raise ValueError(f"framework {framework!r} is not one of "
                         f"{', '.join(GENERATION_PACKAGES)}")
    return [pip for module, pip in GENERATION_PACKAGES[framework]
            if importlib.util.find_spec(module) is None]


def check_installed(framework: str) -> None:
    """ValueError naming what to install where ``framework``'s generation
    lacks a package."""
    missing = missing_packages(framework)
    if missing:
        raise ValueError(f"{framework} is not installed: pip install {' '.join(missing)} "
                         f"(or pip install 'pyparbench[{_EXTRAS[framework]}]')")


def run_generation(request: GenerationRequest, *, timeout: float = 600.0) -> GenerationRecord:
    """``request`` generated in a fresh child pinned to ``request.threads``
    CPUs (compact).

    Raises
    ------
    ValueError
        More threads than this machine has CPUs to pin, or a framework asked
        for and not installed (naming what to install).
    OSError, MemoryError
        Too little disk (ENOSPC) or memory to write the model file a
        llama.cpp or ONNX Runtime generation loads (the need named).
    pyparbench.child_process.ChildFailed
        The child crashed or ran past ``timeout`` seconds.
    """
    settings = Settings(intra_op=request.threads, affinity="compact")
    cpus = child_process.child_cpus(settings)
    if request.framework == "native":
        return _call(request, cpus, child_process.child_env(settings), timeout)
    check_installed(request.framework)
    framework_env = child_process.child_env(settings, core=False)
    if request.framework == "torch":
        return _call(request, cpus, framework_env, timeout)
    with tempfile.TemporaryDirectory(prefix=f"pyparbench-{request.framework}-") as tmp:
        with_file = _with_model_file(request, Path(tmp))
        # The writer's graph and model are gone: only the child holds the weights.
        gc.collect()
        return _call(with_file, cpus, framework_env, timeout)


# Memory a model file's writing takes at its peak, as a multiple of the
# weights' bytes: the exporter's peak on llama-3.2-1b was 9.9 GB for 6.0 GB
# of weights (its largest tensors copied again as it writes them); the GGUF
# writer holds the weights and copies of the query and key matrices.
_WRITER_MEMORY = {"onnxruntime": 1.7, "llamacpp": 1.1}


def _with_model_file(request: GenerationRequest, folder: Path) -> GenerationRequest:
    """``request`` with the model file its runtime loads, written into
    ``folder`` from the decoder's weights (made here, freed on return);
    OSError (ENOSPC) or MemoryError naming the need where the folder's disk
    or the memory available is short of it."""
    graph = llama_prefill(1, size=request.model, prompt=request.prompt)
    weights = 4 * graph.num_params
    largest = 4 * max(s.size for node in graph.nodes for s in node.params.specs.values())
    # The ONNX export's weights are gathered into one file from the
    # exporter's own, one tensor at a time: the largest is on disk twice.
    disk = weights + (largest if request.framework == "onnxruntime" else 0)
    check_room(f"{request.model}'s {request.framework} model file", folder, disk_bytes=disk,
               memory_bytes=int(_WRITER_MEMORY[request.framework] * weights))
    if request.framework == "llamacpp":
        from pyparbench.frameworks.llamacpp import write_llama_gguf  # noqa: PLC0415 (the llm extra)

        path = write_llama_gguf(folder / f"{request.model}.gguf", config_of(graph),
                                transformers_weights(graph),
                                context=request.prompt + request.new)
        return GenerationRequest(**{**request.as_dict(), "gguf": str(path)})
    from pyparbench.frameworks.torch.llama_onnx import export_cached_decoder  # noqa: PLC0415 (heavy, optional)

    path = export_cached_decoder(graph, folder / f"{request.model}.onnx")
    return GenerationRequest(**{**request.as_dict(), "onnx": str(path)})


def _call(request: GenerationRequest, cpus: list[int] | None, env: dict[str, str],
          timeout: float) -> GenerationRecord:
    out = child_process.call("pyparbench.frameworks.generation_run", request.as_dict(),
                             cpus=cpus, env=env, timeout=timeout)
    try:
        return GenerationRecord.from_dict(out)
    except (KeyError, TypeError, ValueError) as e:
        raise child_process.ChildFailed(f"the child's record does not read: {e!r}") from e


def _llamacpp(request: GenerationRequest) -> GenerationRecord:
    """In the child: llama.cpp's greedy generation of ``request``."""
    from pyparbench.frameworks.llamacpp.runtime import LlamaCppDecoder  # noqa: PLC0415 (llm extra)

    assert request.gguf is not None
    llm = LlamaCppDecoder(request.gguf, context=request.prompt + request.new,
                          threads=request.threads, batch_threads=request.threads,
                          all_logits=False, cache="fp32")
    ids = [int(t) for t in prompt_ids(1, request.prompt, request.config.vocab)[0]]
    llm.greedy(ids, request.new)  # warm
    tokens, ttft, steps = llm.greedy(ids, request.new)
    described: dict[str, Any] = {"n_threads": request.threads,
                                 "n_threads_batch": request.threads}
    return record_from_times(request, described, np.array([tokens], dtype=np.int64), ttft,
                             steps)


def _child_main() -> int:
    """In the fresh process: the request read from stdin, one JSON line
    with the record out."""
    request = GenerationRequest.from_dict(json.loads(sys.stdin.read()))
    if request.framework == "llamacpp":
        record = _llamacpp(request)
    elif request.framework == "torch":
        from pyparbench.frameworks.torch.generation import generate as torch_generate  # noqa: PLC0415 (its child alone)

        record = torch_generate(request)
    elif request.framework == "onnxruntime":
        from pyparbench.frameworks.onnxruntime.generation import generate as ort_generate  # noqa: PLC0415 (its child alone)

        record = ort_generate(request)
    else:
        from pyparbench.frameworks.native.generation import generate  # noqa: PLC0415 (native core only in its child)

        record = generate(request)
    out = record.as_dict()
    out["settings"] = {**out["settings"], "process_cpus": sorted(os.sched_getaffinity(0))}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
