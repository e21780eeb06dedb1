"""Wide & Deep (Cheng et al. 2016) on Criteo-like features.

* Deep: one ``dim``-wide embedding per categorical feature (one index per
  sample), concatenated with the dense features, through ReLU layers
  1024-512-256 (the paper's) to one logit.
* Wide: a linear model over sparse ids, the categorical values and their
  cross-product transforms, hashed into one table of width 1 (an embedding
  bag summing ``wide_ids`` weights per sample), plus a linear term of the
  dense features.

The two logits are added and squashed by a sigmoid. The defaults use the
Criteo Kaggle data's 13 dense features and 26 tables (rows capped by
``max_rows``), 32-wide embeddings as in the paper, and 52 wide ids per
sample (the 26 categorical values and 26 crosses) hashed into 1M rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import cap_rows, check_batch, mlp
from pyparbench.models._criteo import DENSE_FEATURES, KAGGLE_TABLE_ROWS

__all__ = ["wide_deep"]


def wide_deep(batch: int = 1, *, table_rows: Sequence[int] = KAGGLE_TABLE_ROWS,
              dim: int = 32, dense_features: int = DENSE_FEATURES,
              deep: Sequence[int] = (1024, 512, 256), wide_rows: int = 1_000_000,
              wide_ids: int = 52, max_rows: int | None = 1_000_000, seed: int = 0) -> Graph:
    """Wide & Deep: a hashed linear model plus an MLP over embeddings.

    Parameters
    ----------
    batch
        Samples per pass (>= 1).
    table_rows
        Rows of each categorical feature's embedding table.
    dim
        Embedding width.
    dense_features
        Width of the dense input.
    deep
        Widths of the deep tower's ReLU layers.
    wide_rows, wide_ids
        Rows of the wide part's hashed table, and ids per sample.
    max_rows
        Cap on any table's rows (None: no cap).
    seed
        Seed of the random weights.
    """
    if not table_rows or min(dim, dense_features, wide_ids, *deep) < 1:
        raise ValueError("wide_deep needs tables, and dim, dense_features, wide_ids and deep "
                         f"widths >= 1; got {len(table_rows)} tables, dim {dim}, "
                         f"dense_features {dense_features}, wide_ids {wide_ids}, "
                         f"deep {tuple(deep)}")
    rows = cap_rows([*table_rows, wide_rows], max_rows)
    n = check_batch(batch)
    b = GraphBuilder("wide_deep", seed)
    dense = b.input("dense", (n, dense_features))
    with b.scope("deep"):
        embs = [b.embedding_bag(b.input(f"cat{i}", (n, 1), "int64"), r, dim, name=f"emb{i}")
                for i, r in enumerate(rows[:-1])]
        x = b.concat([dense, *embs], name="concat")
    x = mlp(b, x, deep, relu_last=True, name="deep")
    deep_logit = b.linear(x, 1, name="deep/logit")
    with b.scope("wide"):
        ids = b.input("wide_ids", (n, wide_ids), "int64")
        sparse = b.embedding_bag(ids, rows[-1], 1, name="sparse")
        wide_logit = b.add(sparse, b.linear(dense, 1, bias=False, name="dense"), name="logit")
    y = b.add(wide_logit, deep_logit, name="logit")
    meta = {"batch": n, "table_rows": rows[:-1], "dim": dim, "deep": list(deep),
            "wide_rows": rows[-1], "wide_ids": wide_ids}
    return b.build(b.eltwise(y, "sigmoid", name="prob"), meta)
