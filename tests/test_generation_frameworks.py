"""Generation in PyTorch (transformers' LlamaForCausalLM on a DynamicCache)
and in ONNX Runtime (that model exported with its cache): the native greedy
tokens at 1 and 2 threads, batch 1 and 2, records whose figures agree with
their step times and name the runtime's thread knobs, ``pyparbench generate
--framework torch|onnxruntime --json``, and a missing package named."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyparbench.cli import main
from pyparbench.frameworks import generation_run
from pyparbench.frameworks.generation import (
    GenerationRecord,
    GenerationRequest,
    bytes_per_token,
    prompt_ids,
)
from pyparbench.frameworks.generation_run import missing_packages, run_generation
from pyparbench.frameworks.native.generation import CachedDecoder
from pyparbench.harness.operators import generation_frameworks

THREADS = (1, 2) if len(os.sched_getaffinity(0)) >= 2 else (1,)
PROMPT, NEW = 5, 4


def _needs(framework: str) -> None:
    missing = missing_packages(framework)
    if missing:
        pytest.skip(f"{framework}'s generation needs {', '.join(missing)}")


def _native_tokens(batch: int) -> list[list[int]]:
    decoder = CachedDecoder(batch, size="llama-tiny", prompt=PROMPT, context=PROMPT + NEW)
    tokens, _, _ = decoder.greedy(prompt_ids(batch, PROMPT, 2048), NEW)
    out: list[list[int]] = tokens.tolist()
    return out


def _check_record(record: GenerationRecord, framework: str, batch: int, threads: int) -> None:
    """The figures follow from the step times; the settings are the
    runtime's own thread knobs; the child kept to ``threads`` CPUs."""
    assert (record.model, record.framework, record.batch, record.prompt, record.new) == \
        ("llama-tiny", framework, batch, PROMPT, NEW)
    assert len(record.tokens) == batch and all(len(row) == NEW for row in record.tokens)
    assert len(record.step_ms) == NEW - 1 and all(s > 0 for s in record.step_ms)
    assert record.ttft_ms > 0
    assert record.tpot_ms == pytest.approx(statistics.median(record.step_ms))
    assert record.tokens_per_s == pytest.approx(batch / (record.tpot_ms / 1e3))
    assert record.bytes_per_token == bytes_per_token(
        GenerationRequest("llama-tiny", PROMPT, NEW).config, batch, PROMPT, NEW)
    knobs = {"torch": ("num_threads", "num_interop_threads"),
             "onnxruntime": ("intra_op_num_threads", "inter_op_num_threads")}[framework]
    assert (record.settings[knobs[0]], record.settings[knobs[1]]) == (threads, 1)
    assert len(record.settings["process_cpus"]) == threads


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("framework", ["torch", "onnxruntime"])
def test_a_framework_generates_the_native_tokens(framework: str, threads: int,
                                                 batch: int) -> None:
    """5 prompt tokens, 4 new, per sequence: the tokens of the native
    greedy generation of the same prompts."""
    _needs(framework)
    record = run_generation(GenerationRequest("llama-tiny", PROMPT, NEW, batch=batch,
                                              threads=threads, framework=framework))
    assert record.tokens == _native_tokens(batch)
    _check_record(record, framework, batch, threads)


@pytest.mark.parametrize("framework", ["torch", "onnxruntime"])
def test_generate_json_of_a_framework(framework: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    _needs(framework)
    assert main(["generate", "llama-tiny", "--prompt", str(PROMPT), "--new", str(NEW),
                 "--framework", framework, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    record = GenerationRecord.from_dict(out)
    assert out["tokens_count"] == NEW and record.tokens == _native_tokens(1)
    _check_record(record, framework, 1, 1)


def test_the_exported_decoder_takes_a_past_of_any_length(tmp_path: Path) -> None:
    """One file for the prefill and the token steps: its interface names,
    and a prefill of the whole prompt giving the logits of a prefill of its
    first tokens followed by one step against their presents."""
    _needs("onnxruntime")
    import onnxruntime as ort  # noqa: PLC0415 (optional)

    from pyparbench.frameworks.torch.llama_onnx import (  # noqa: PLC0415 (needs torch)
        cached_decoder_names,
        export_cached_decoder,
    )
    from pyparbench.models.llama import llama_prefill  # noqa: PLC0415

    path = export_cached_decoder(llama_prefill(1, size="llama-tiny"), tmp_path / "d.onnx")
    inputs, outputs = cached_decoder_names(2)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == inputs
    assert [o.name for o in sess.get_outputs()] == outputs
    ids = prompt_ids(2, PROMPT, 2048)
    empty = {n: np.zeros((2, 2, 0, 32), np.float32) for n in inputs[1:]}
    whole = sess.run(None, {"input_ids": ids, **empty})
    first = sess.run(None, {"input_ids": ids[:, :-1], **empty})
    step = sess.run(None, {"input_ids": ids[:, -1:], **dict(zip(inputs[1:], first[1:],
                                                                  strict=True))})
    assert whole[0].shape == (2, 2048) and whole[1].shape == (2, 2, PROMPT, 32)
    np.testing.assert_allclose(step[0], whole[0], rtol=0, atol=1e-4 * np.abs(whole[0]).max())
    for got, want in zip(step[1:], whole[1:], strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("framework, absent", [("torch", "transformers"),
                                               ("onnxruntime", "onnxruntime"),
                                               ("llamacpp", "gguf")])
def test_a_missing_package_is_named(framework: str, absent: str,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    find_spec = generation_run.importlib.util.find_spec

    def without(name: str, *args: Any) -> Any:
        return None if name == absent else find_spec(name, *args)

    monkeypatch.setattr(generation_run.importlib.util, "find_spec", without)
    named = f"{framework} is not installed: pip install "
    with pytest.raises(ValueError, match=f"{named}.*{absent}"):
        run_generation(GenerationRequest("llama-tiny", PROMPT, NEW, framework=framework))
    with pytest.raises(SystemExit) as e:
        main(["generate", "llama-tiny", "--framework", framework])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert named in err and absent in err and "Traceback" not in err
    assert framework not in generation_frameworks()


def test_bad_values_are_refused_by_name(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="framework 'tensorflow' is not one of native, "
                                         "llamacpp, torch, onnxruntime"):
        GenerationRequest("llama-tiny", PROMPT, NEW, framework="tensorflow")
    with pytest.raises(ValueError, match="framework 'jax' is not one of"):
        missing_packages("jax")
    with pytest.raises(SystemExit):
        main(["generate", "llama-tiny", "--framework", "tensorflow"])
    assert "invalid choice: 'tensorflow'" in capsys.readouterr().err
    _needs("onnxruntime")
    from pyparbench.frameworks.onnxruntime.generation import OrtCachedDecoder  # noqa: PLC0415

    config = GenerationRequest("llama-tiny", PROMPT, NEW).config
    with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
        OrtCachedDecoder(tmp_path / "none.onnx", config, threads=0)
    with pytest.raises(FileNotFoundError, match="no exported decoder at"):
        OrtCachedDecoder(tmp_path / "none.onnx", config, threads=1)
