"""A decoder's ONNX export with its weights in one external data file beside
it, as a model over protobuf's 2 GB is written: forced on llama-tiny by the
size threshold, loaded by ONNX Runtime from the file's folder, the same
tokens and logits as the export that holds its weights; a model written one
file per tensor (as PyTorch's exporter writes one over 2 GB) gathered into
one; and the room a model file needs checked before it is written."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest

from pyparbench.frameworks.file_room import check_room
from pyparbench.frameworks.generation import prompt_ids
from pyparbench.frameworks.generation_run import missing_packages
from pyparbench.frameworks.onnx_external_data import external_data_files, weights_to_one_file
from pyparbench.models.llama import LLAMA_SIZES, llama_prefill

PROMPT, NEW = 5, 4
TINY = LLAMA_SIZES["llama-tiny"].config


@pytest.fixture(scope="module")
def in_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llama-tiny exported holding its weights (8 MB: under the threshold)."""
    missing = missing_packages("onnxruntime")
    if missing:
        pytest.skip(f"the export needs {', '.join(missing)}")
    from pyparbench.frameworks.torch.llama_onnx import export_cached_decoder  # noqa: PLC0415 (needs torch)

    path = export_cached_decoder(llama_prefill(1, size="llama-tiny"),
                                 tmp_path_factory.mktemp("in_file") / "d.onnx")
    assert external_data_files(path) == []
    return path


def _greedy(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The greedy tokens of 2 prompts, and the logits of their prefill."""
    from pyparbench.frameworks.onnxruntime.generation import OrtCachedDecoder  # noqa: PLC0415 (needs onnxruntime)

    decoder = OrtCachedDecoder(path, TINY, threads=1)
    ids = prompt_ids(2, PROMPT, TINY.vocab)
    tokens, _, _ = decoder.greedy(ids, NEW)
    empty = np.zeros((2, TINY.kv_heads, 0, TINY.head_dim), np.float32)
    logits = decoder.session.run(["logits"], {"input_ids": ids,
                                              **dict.fromkeys(decoder.past_names, empty)})[0]
    return tokens, logits


def test_weights_over_the_threshold_go_to_one_file_beside_the_model(
        in_file: Path, tmp_path: Path) -> None:
    from pyparbench.frameworks.torch.llama_onnx import export_cached_decoder  # noqa: PLC0415 (needs torch)

    path = export_cached_decoder(llama_prefill(1, size="llama-tiny"), tmp_path / "d.onnx",
                                 external_data_above=1 << 20)
    data = tmp_path / "d.onnx.data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.onnx", "d.onnx.data"]
    assert external_data_files(path) == [data]
    # The weights left the .onnx: what it keeps is the graph's structure.
    assert path.stat().st_size < in_file.stat().st_size // 10
    assert data.stat().st_size >= in_file.stat().st_size - path.stat().st_size
    tokens, logits = _greedy(path)
    want_tokens, want_logits = _greedy(in_file)
    np.testing.assert_array_equal(tokens, want_tokens)
    np.testing.assert_array_equal(logits, want_logits)


def test_one_file_per_tensor_is_gathered_into_one(in_file: Path, tmp_path: Path) -> None:
    import onnx  # noqa: PLC0415 (optional)

    model = onnx.load(str(in_file))
    path = tmp_path / "d.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True,
                    all_tensors_to_one_file=False, size_threshold=0)
    per_tensor = external_data_files(path)
    assert len(per_tensor) > 10
    data = weights_to_one_file(path)
    assert external_data_files(path) == [data]
    assert not any(p.exists() for p in per_tensor)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.onnx", "d.onnx.data"]
    # Gathered again from a file of the same name: nothing lost.
    weights_to_one_file(path)
    tokens, logits = _greedy(path)
    want_tokens, want_logits = _greedy(in_file)
    np.testing.assert_array_equal(tokens, want_tokens)
    np.testing.assert_array_equal(logits, want_logits)


def test_a_missing_external_file_is_named(in_file: Path, tmp_path: Path) -> None:
    import onnx  # noqa: PLC0415 (optional)

    path = tmp_path / "d.onnx"
    onnx.save_model(onnx.load(str(in_file)), str(path), save_as_external_data=True,
                    all_tensors_to_one_file=False, size_threshold=0)
    gone = external_data_files(path)[0]
    gone.unlink()
    with pytest.raises(FileNotFoundError, match=f"external data {gone} of tensor"):
        weights_to_one_file(path)
    with pytest.raises(FileNotFoundError, match="no ONNX file at"):
        weights_to_one_file(tmp_path / "absent.onnx")


def test_a_bad_threshold_is_refused_by_name(tmp_path: Path) -> None:
    if missing_packages("onnxruntime"):
        pytest.skip("the export needs torch and transformers")
    from pyparbench.frameworks.torch.llama_onnx import export_cached_decoder  # noqa: PLC0415 (needs torch)

    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=f"external_data_above must be an integer >= 0 "
                                             f"\\(bytes\\), got {bad!r}"):
            export_cached_decoder(llama_prefill(1, size="llama-tiny"), tmp_path / "d.onnx",
                                  external_data_above=bad)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


def test_too_little_room_is_named(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"llama-x's file needs 9000000.0 GB of disk in .*; it "
                                      r"has [0-9.]+ GB free") as e:
        check_room("llama-x's file", tmp_path, disk_bytes=9 * 10**15, memory_bytes=1)
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(MemoryError, match="llama-x's file needs about 10.2 GB of memory; this "
                                          "machine has 8.0 GB available"):
        check_room("llama-x's file", tmp_path, disk_bytes=1, memory_bytes=10_200_000_000,
                   available=8 * 10**9)
    check_room("llama-x's file", tmp_path, disk_bytes=1, memory_bytes=8 * 10**9,
               available=8 * 10**9)


@pytest.mark.parametrize("framework", ["onnxruntime", "llamacpp"])
def test_generate_names_the_memory_a_model_file_needs(framework: str,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before the file is written (the graph's weights not made)."""
    from pyparbench.cli import main  # noqa: PLC0415
    from pyparbench.frameworks import file_room  # noqa: PLC0415

    missing = missing_packages(framework)
    if missing:
        pytest.skip(f"{framework} needs {', '.join(missing)}")
    monkeypatch.setattr(file_room, "available_bytes", lambda: 10**6)
    with pytest.raises(SystemExit) as e:
        main(["generate", "llama-tiny", "--framework", framework])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert (f"llama-tiny's {framework} model file needs about " in err
            and "GB of memory; this machine has 0.0 GB available" in err), err
