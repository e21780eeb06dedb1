"""DLRM (Naumov et al. 2019), as facebookresearch/dlrm's ``dlrm_s_pytorch.py`` builds it.

dense features -> bottom MLP (ReLU on every layer); one embedding bag (sum)
per sparse feature; the "dot" interaction: concat(bottom output, bags)
reshaped to (batch, features, dim), its Gram matrix T·Tᵀ, the strictly lower
triangle flattened row by row (no self-interaction), concatenated after the
bottom output; -> top MLP (ReLU on every layer but the last) -> sigmoid.

Two configurations:

* :func:`dlrm` -- the repository's CPU benchmark (``bench/dlrm_s_benchmark.sh``):
  8 tables of 1,000,000 rows, dim 64, 100 lookups per sample, bottom MLP
  512-512-64, top MLP 1024-1024-1024-1 (after the interaction's 100 = 36 + 64
  features). Batch 2048 there.
* :func:`dlrm_kaggle` -- the Criteo Kaggle configuration: 26 tables of the
  data set's sizes, dim 16, one lookup per sample, bottom MLP 13-512-256-64-16,
  top MLP 512-256-1 (after 367 = 351 + 16 features).

Table rows are capped by ``max_rows`` so the graph fits small machines
(the Kaggle tables hold 33.8 M rows uncapped).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import cap_rows, check_batch, mlp
from pyparbench.models._criteo import KAGGLE_TABLE_ROWS

__all__ = ["dlrm", "dlrm_kaggle", "dlrm_graph"]


def dlrm_graph(name: str, batch: int, *, dense_features: int, bottom: Sequence[int],
               top: Sequence[int], table_rows: Sequence[int], dim: int, lookups: int,
               max_rows: int | None, seed: int) -> Graph:
    """Any DLRM with the dot interaction.

    Parameters
    ----------
    name
        Graph name.
    batch
        Samples per pass (>= 1).
    dense_features
        Width of the dense input.
    bottom
        Bottom MLP widths; the last must equal ``dim``.
    top
        Top MLP widths after the interaction (the last is the output).
    table_rows
        Rows of each embedding table (each capped at ``max_rows``).
    dim
        Embedding width.
    lookups
        Indices per sample per table (a fixed bag size).
    max_rows
        Cap on any table's rows (None: no cap).
    seed
        Seed of the random weights.
    """
    if not bottom or not top or bottom[-1] != dim:
        raise ValueError(f"the bottom MLP must end at the embedding width {dim}, got bottom "
                         f"{tuple(bottom)} and top {tuple(top)}")
    if not table_rows or lookups < 1:
        raise ValueError(f"dlrm needs tables and lookups >= 1, got {len(table_rows)} tables, "
                         f"{lookups} lookups")
    rows = cap_rows(table_rows, max_rows)
    n = check_batch(batch)
    b = GraphBuilder(name, seed)
    x = mlp(b, b.input("dense", (n, dense_features)), bottom, relu_last=True, name="bottom")
    with b.scope("emb"):
        bags = [b.embedding_bag(b.input(f"sparse{i}", (n, lookups), "int64"), r, dim,
                                name=f"table{i}")
                for i, r in enumerate(rows)]
    with b.scope("interaction"):
        features = len(bags) + 1
        t = b.reshape(b.concat([x, *bags], name="concat"), (n, features, dim), name="reshape")
        z = b.tril_flatten(b.matmul(t, t, trans_b=True, name="gram"), name="tril")
        r = b.concat([x, z], name="concat_dense")
    y = mlp(b, r, top, relu_last=False, name="top")
    meta = {"batch": n, "dense_features": dense_features, "bottom": list(bottom),
            "top": list(top), "table_rows": rows, "dim": dim, "lookups": lookups}
    return b.build(b.eltwise(y, "sigmoid", name="prob"), meta)


def dlrm(batch: int = 1, *, tables: int = 8, rows: int = 1_000_000, dim: int = 64,
         lookups: int = 100, max_rows: int | None = 1_000_000, seed: int = 0) -> Graph:
    """The dlrm repository's CPU benchmark configuration.

    Parameters
    ----------
    batch
        Samples per pass (>= 1).
    tables, rows, dim
        Number of embedding tables, rows of each (capped at ``max_rows``), width.
    lookups
        Indices per sample per table.
    max_rows
        Cap on any table's rows (None: no cap).
    seed
        Seed of the random weights.
    """
    return dlrm_graph("dlrm", batch, dense_features=512, bottom=(512, dim),
                      top=(1024, 1024, 1024, 1), table_rows=[rows] * tables, dim=dim,
                      lookups=lookups, max_rows=max_rows, seed=seed)


def dlrm_kaggle(batch: int = 1, *, table_rows: Sequence[int] = KAGGLE_TABLE_ROWS,
                max_rows: int | None = 1_000_000, seed: int = 0) -> Graph:
    """The Criteo Kaggle configuration (26 tables, dim 16).

    Parameters
    ----------
    batch
        Samples per pass (>= 1).
    table_rows
        Rows of each embedding table (capped at ``max_rows``).
    max_rows
        Cap on any table's rows (None: no cap).
    seed
        Seed of the random weights.
    """
    return dlrm_graph("dlrm_kaggle", batch, dense_features=13, bottom=(512, 256, 64, 16),
                      top=(512, 256, 1), table_rows=table_rows, dim=16, lookups=1,
                      max_rows=max_rows, seed=seed)
