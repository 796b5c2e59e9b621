"""PyTorch's computation of the practitioner program `gpt` (crates/rcannl/tests/practitioner/gpt.rs).

A character-level GPT: token embedding, learned positions, two causal pre-norm transformer
blocks (layer norm, two-head causal self-attention without biases, ReLU MLP, residual sums), a
final layer norm and a dense head to the vocabulary's logits, scored by the mean cross-entropy
against the next token at every position.

Writes, beside this script, in rcannl's memory order (batch, then output, then input axes):
every parameter's starting values (`<label>.npy`, f32-representable so that the f32 and f64
programs start from the same values), the tokens and next tokens, the logits and the loss, the
loss's gradient with respect to every parameter (`<label>.grad.npy`) and every parameter after
two steps of `torch.optim.AdamW` (`<label>.adamw.npy`), all computed in float64.

Regenerate (needs torch and numpy; deterministic), from any folder:

    /path/to/python crates/rcannl/tests/practitioner/gpt/reference.py
"""

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

FOLDER = Path(__file__).resolve().parent
VOCABULARY, BATCH, TIME, MODEL, HEADS, HIDDEN, BLOCKS = 11, 2, 5, 8, 2, 16, 2
HEAD = MODEL // HEADS
EPSILON = 1e-5  # rcannl's LayerNorm: (x - mean) / sqrt(biased variance + 1e-5)
MASKED = -1e9  # rcannl adds this to the scores of masked keys
LEARNING_RATE, WEIGHT_DECAY, ADAMW_STEPS = 0.01, 0.1, 2

rng = np.random.default_rng(20240611)


def f32_exact(a):
    """`a` rounded to float32 values, held in float64."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def normal(shape, scale):
    return f32_exact(scale * rng.standard_normal(shape))


# Parameters in rcannl's memory order: a weight `|in -> out` is stored (out, in), an attention
# projection `|model -> heads, head` is (heads, head, model), its output `|heads, head -> model`
# is (model, heads, head), the embedding table `|vocabulary -> model` is (model, vocabulary).
params = {
    "embedding.table": normal((MODEL, VOCABULARY), 0.8),
    "positions.table": normal((TIME, MODEL), 0.3),
}
for i in range(BLOCKS):
    b = f"block{i}"
    params.update(
        {
            f"{b}.attention.query": normal((HEADS, HEAD, MODEL), 0.5),
            f"{b}.attention.key": normal((HEADS, HEAD, MODEL), 0.5),
            f"{b}.attention.value": normal((HEADS, HEAD, MODEL), 0.4),
            f"{b}.attention.output": normal((MODEL, HEADS, HEAD), 0.4),
            f"{b}.norm1.gain": f32_exact(1.0 + normal(MODEL, 0.2)),
            f"{b}.norm1.bias": normal(MODEL, 0.1),
            f"{b}.norm2.gain": f32_exact(1.0 + normal(MODEL, 0.2)),
            f"{b}.norm2.bias": normal(MODEL, 0.1),
            f"{b}.up.w": normal((HIDDEN, MODEL), 0.4),
            f"{b}.up.b": normal(HIDDEN, 0.1),
            f"{b}.down.w": normal((MODEL, HIDDEN), 0.3),
            f"{b}.down.b": normal(MODEL, 0.1),
        }
    )
params.update(
    {
        "final_norm.gain": f32_exact(1.0 + normal(MODEL, 0.2)),
        "final_norm.bias": normal(MODEL, 0.1),
        "head.w": normal((VOCABULARY, MODEL), 0.5),
        "head.b": normal(VOCABULARY, 0.1),
    }
)
sequences = rng.integers(0, VOCABULARY, size=(BATCH, TIME + 1))
tokens, next_tokens = sequences[:, :-1], sequences[:, 1:]


def layer_norm(x, gain, bias):
    centered = x - x.mean(-1, keepdim=True)
    variance = (centered * centered).mean(-1, keepdim=True)
    return centered / torch.sqrt(variance + EPSILON) * gain + bias


def causal_attention(x, query, key, value, output):
    """x: (batch, time, model); projections in rcannl's memory order."""
    q = torch.einsum("btd,hed->bhte", x, query)
    k = torch.einsum("btd,hed->bhte", x, key)
    v = torch.einsum("btd,hed->bhte", x, value)
    scores = torch.einsum("bhte,bhse->bhts", q, k) * (1.0 / math.sqrt(HEAD))
    attend = torch.tril(torch.ones(TIME, TIME, dtype=torch.float64))  # key s <= query t
    scores = scores + (attend - 1.0) * -MASKED
    weights = torch.softmax(scores, dim=-1)
    mixed = torch.einsum("bhts,bhse->bhte", weights, v)
    return torch.einsum("bhte,dhe->btd", mixed, output)


def dense(x, w, b):
    return torch.einsum("btd,fd->btf", x, w) + b


def logits_of(p, tokens):
    h = F.embedding(tokens, p["embedding.table"].T) + p["positions.table"]
    for i in range(BLOCKS):
        b = f"block{i}"
        attention = [p[f"{b}.attention.{n}"] for n in ("query", "key", "value", "output")]
        normalized = layer_norm(h, p[f"{b}.norm1.gain"], p[f"{b}.norm1.bias"])
        h = h + causal_attention(normalized, *attention)
        normalized = layer_norm(h, p[f"{b}.norm2.gain"], p[f"{b}.norm2.bias"])
        hidden = torch.relu(dense(normalized, p[f"{b}.up.w"], p[f"{b}.up.b"]))
        h = h + dense(hidden, p[f"{b}.down.w"], p[f"{b}.down.b"])
    h = layer_norm(h, p["final_norm.gain"], p["final_norm.bias"])
    return dense(h, p["head.w"], p["head.b"])


def loss_of(logits, next_tokens):
    return F.cross_entropy(logits.reshape(-1, VOCABULARY), next_tokens.reshape(-1))


def tensors():
    return {
        name: torch.tensor(value, dtype=torch.float64, requires_grad=True)
        for name, value in params.items()
    }


def save(name, array):
    np.save(FOLDER / f"{name}.npy", np.asarray(array))


tokens_t, next_tokens_t = torch.tensor(tokens), torch.tensor(next_tokens)

# Forward and gradients.
p = tensors()
logits = logits_of(p, tokens_t)
loss = loss_of(logits, next_tokens_t)
loss.backward()

for name, value in params.items():
    save(name, value)
    save(f"{name}.grad", p[name].grad.numpy())
save("tokens", tokens.astype(np.int64))
save("next_tokens", next_tokens.astype(np.int64))
save("logits", logits.detach().numpy())  # (batch, time, vocabulary)
save("loss", loss.detach().numpy().reshape(1))

# AdamW from the same starting point.
p = tensors()
adamw = torch.optim.AdamW(
    p.values(), lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-8, weight_decay=WEIGHT_DECAY
)
for _ in range(ADAMW_STEPS):
    adamw.zero_grad()
    loss_of(logits_of(p, tokens_t), next_tokens_t).backward()
    adamw.step()
for name, value in p.items():
    save(f"{name}.adamw", value.detach().numpy())

print(f"loss {loss.item():.6f}; wrote {len(list(FOLDER.glob('*.npy')))} arrays to {FOLDER}")
