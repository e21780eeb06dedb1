"""NCF / NeuMF (He et al. 2017, "Neural Collaborative Filtering").

Two towers over (user, item) pairs, fused by one output unit:

* GMF: the element-wise product of a user and an item embedding (``factors``
  wide);
* MLP: the concatenation of separate user and item embeddings (each
  ``layers[0] / 2`` wide) through ReLU layers of widths ``layers[1:]``;

then concat(GMF, MLP) -> linear(1) -> sigmoid. The defaults are MLPerf's NCF
on MovieLens-20M (138,493 users, 26,744 items, 64 factors, MLP 256-256-128-64:
31,832,577 parameters); the paper's MovieLens-1M setting is
``num_users=6040, num_items=3706, factors=8, layers=(64, 32, 16, 8)``.
Each lookup is an embedding bag of one index per sample.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import cap_rows, check_batch, mlp

__all__ = ["ncf"]


def ncf(batch: int = 1, *, num_users: int = 138_493, num_items: int = 26_744,
        factors: int = 64, layers: Sequence[int] = (256, 256, 128, 64),
        max_rows: int | None = None, seed: int = 0) -> Graph:
    """NeuMF: GMF and MLP towers over user and item embeddings.

    Parameters
    ----------
    batch
        (user, item) pairs per pass (>= 1).
    num_users, num_items
        Rows of the user and item tables (each capped at ``max_rows``).
    factors
        Width of the GMF embeddings.
    layers
        MLP widths; the first is the concatenated user + item embedding (even).
    max_rows
        Cap on any table's rows (None: no cap).
    seed
        Seed of the random weights.
    """
    if len(layers) < 2 or layers[0] % 2 or min(layers) < 1 or factors < 1:
        raise ValueError(f"layers needs >= 2 positive widths, the first even, and factors "
                         f">= 1; got layers {tuple(layers)}, factors {factors}")
    users, items = cap_rows([num_users, num_items], max_rows)
    b = GraphBuilder("ncf", seed)
    n = check_batch(batch)
    user = b.input("user", (n, 1), "int64")
    item = b.input("item", (n, 1), "int64")
    with b.scope("gmf"):
        gmf = b.mul(b.embedding_bag(user, users, factors, name="user_emb"),
                    b.embedding_bag(item, items, factors, name="item_emb"), name="mul")
    with b.scope("mlp"):
        half = layers[0] // 2
        x = b.concat([b.embedding_bag(user, users, half, name="user_emb"),
                      b.embedding_bag(item, items, half, name="item_emb")], name="concat")
    x = mlp(b, x, layers[1:], relu_last=True, name="mlp")
    y = b.linear(b.concat([gmf, x], name="neumf_concat"), 1, name="predict")
    meta = {"batch": n, "num_users": users, "num_items": items, "factors": factors,
            "layers": list(layers)}
    return b.build(b.eltwise(y, "sigmoid", name="prob"), meta)
