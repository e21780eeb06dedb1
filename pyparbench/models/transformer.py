"""One Transformer encoder layer at BERT-base sizes (Devlin et al. 2019).

Post-LN, as BERT: x1 = LayerNorm(x + Attention(x)); out = LayerNorm(x1 +
FFN(x1)), with 12 heads of 64 over hidden 768, a 3072-wide GELU (erf) feed
forward and LayerNorm epsilon 1e-12. Query, key and value are three separate
projections (three independent heavy ops); the attention is one batched
matmul over batch x heads. The 1/sqrt(head size) scaling of the scores is
folded into the query projection's weights, which are random anyway, so the
graph needs no scalar op. No attention mask (every sequence full length).
7,087,872 parameters (one of BERT-base's 12 layers).
"""

from __future__ import annotations

from pyparbench.graph import Graph, GraphBuilder
from pyparbench.models._blocks import check_batch

__all__ = ["transformer_encoder"]


def _heads(b: GraphBuilder, x: int, n: int, seq: int, heads: int, name: str) -> int:
    """(n, seq, hidden) -> (n * heads, seq, head size)."""
    y = b.reshape(x, (n, seq, heads, -1), name=f"{name}_split")
    y = b.transpose(y, (0, 2, 1, 3), name=f"{name}_heads")
    return b.reshape(y, (n * heads, seq, -1), name=f"{name}_batch")


def transformer_encoder(batch: int = 1, *, seq_len: int = 128, hidden: int = 768,
                        heads: int = 12, ffn: int = 3072, seed: int = 0) -> Graph:
    """A post-LN encoder layer on a (batch, seq_len, hidden) input.

    Parameters
    ----------
    batch
        Sequences per pass (>= 1).
    seq_len
        Tokens per sequence.
    hidden, heads, ffn
        Hidden width, attention heads (dividing ``hidden``), feed-forward width.
    seed
        Seed of the random weights.
    """
    if min(seq_len, hidden, heads, ffn) < 1 or hidden % heads:
        raise ValueError(f"need seq_len, hidden, heads, ffn >= 1 and heads dividing hidden; "
                         f"got {seq_len}, {hidden}, {heads}, {ffn}")
    n = check_batch(batch)
    b = GraphBuilder("transformer", seed)
    x = b.input("hidden_states", (n, seq_len, hidden))
    with b.scope("attention"):
        # Scores are q·kᵀ / sqrt(head size): the divisor is folded into the query.
        scale = {"query": (hidden // heads) ** -0.5, "key": 1.0, "value": 1.0}
        q, k, v = (_heads(b, b.linear(x, hidden, weight_scale=s, name=p), n, seq_len, heads, p)
                   for p, s in scale.items())
        probs = b.softmax(b.matmul(q, k, trans_b=True, name="scores"), name="probs")
        ctx = b.reshape(b.matmul(probs, v, name="context"), (n, heads, seq_len, -1),
                        name="context_split")
        ctx = b.reshape(b.transpose(ctx, (0, 2, 1, 3), name="context_tokens"),
                        (n, seq_len, hidden), name="context_merge")
        y = b.add(b.linear(ctx, hidden, name="output"), x, name="residual")
        x1 = b.layer_norm(y, eps=1e-12, name="layer_norm")
    with b.scope("ffn"):
        h = b.eltwise(b.linear(x1, ffn, name="intermediate"), "gelu", name="gelu")
        y = b.add(b.linear(h, hidden, name="output"), x1, name="residual")
        out = b.layer_norm(y, eps=1e-12, name="layer_norm")
    meta = {"batch": n, "seq_len": seq_len, "hidden": hidden, "heads": heads, "ffn": ffn}
    return b.build(out, meta)
