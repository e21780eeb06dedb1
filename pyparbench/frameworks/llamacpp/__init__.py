"""llama.cpp, the runtime LLM users run on CPUs, on the built-in decoder's
weights.

* :mod:`.gguf_file`: a Llama decoder's weights (transformers' names) written
  as the GGUF file llama.cpp loads, at f32, bf16 or f16;
* :mod:`.runtime`: that file run by llama.cpp through ``llama-cpp-python``
  (prefill, decode steps against its cache, their times) under its
  ``-t`` / ``-tb`` / ``--numa`` knobs.

Both import their package (``gguf``, ``llama_cpp``: the ``llm`` extra) only
when called.
"""

from pyparbench.frameworks.llamacpp.gguf_file import (
    GGUF_PRECISIONS,
    weight_shapes,
    write_llama_gguf,
)

__all__ = ["GGUF_PRECISIONS", "weight_shapes", "write_llama_gguf"]
