"""PyTorch's computation of the practitioner program `encoder_decoder`
(crates/rcannl/tests/practitioner/encoder_decoder.rs).

An encoder-decoder transformer learning to reverse digit strings, as rcannl's `seq2seq` example
does, on one batch: sources padded to 4 tokens (padding masked as keys of the encoder's
self-attention and of the decoder's cross-attention), targets of 5 positions under teacher
forcing (causal self-attention), the loss the mean cross-entropy over the scored target positions.
Two configurations, each in its folder: `post_norm` (the example's: two post-norm encoder and two
decoder blocks, sinusoidal positions) and `pre_norm` (one pre-norm block each, learned positions,
a final layer norm at the end of each stack).

Writes, into each configuration's folder, in rcannl's memory order (batch, then output, then input
axes): every parameter's starting values (`<label>.npy`, f32-representable so that the f32 and
f64 programs start from the same values), the sequences and their masks, the logits and the loss,
and the loss's gradient with respect to every parameter (`<label>.grad.npy`), computed in float64.

Regenerate (needs torch and numpy; deterministic), from any folder:

    /path/to/python crates/rcannl/tests/practitioner/encoder_decoder/reference.py
"""

import math
from pathlib import Path

import numpy as np
import torch

FOLDER = Path(__file__).resolve().parent
BATCH, MODEL, HEADS, HIDDEN = 2, 8, 2, 16
HEAD = MODEL // HEADS
DIGITS, SOURCE_PAD, SOURCE_VOCABULARY = 6, 6, 7  # digits 0..5, then padding
END, START, TARGET_VOCABULARY = 6, 7, 8  # digits 0..5, the end token, the start token
SOURCE_TIME, LENGTHS = 4, (2, 4)
TARGET_TIME = SOURCE_TIME + 1  # the reversed digits and the end token
EPSILON = 1e-5  # rcannl's LayerNorm: (x - mean) / sqrt(biased variance + 1e-5)
MASKED = -1e9  # rcannl adds this to the scores of masked keys
LABEL = "model"

rng = np.random.default_rng(20240612)


def f32_exact(a):
    """`a` rounded to float32 values, held in float64."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def normal(shape, scale):
    return f32_exact(scale * rng.standard_normal(shape))


def sequences():
    """The batch as rcannl's `SequencePairs` holds it: ids and masks, (batch, time) each."""
    source, source_mask, target_inputs, targets, target_mask = ([] for _ in range(5))
    for length in LENGTHS:
        digits = list(rng.integers(0, DIGITS, size=length))
        source.append(digits + [SOURCE_PAD] * (SOURCE_TIME - length))
        source_mask.append([1] * length + [0] * (SOURCE_TIME - length))
        target = digits[::-1] + [END]
        scored = len(target)
        targets.append(target + [END] * (TARGET_TIME - scored))
        target_mask.append([1] * scored + [0] * (TARGET_TIME - scored))
        target_inputs.append(([START] + target + [END] * TARGET_TIME)[:TARGET_TIME])
    arrays = (source, source_mask, target_inputs, targets, target_mask)
    names = ("source", "source_mask", "target_inputs", "targets", "target_mask")
    return {name: np.array(a, dtype=np.int64) for name, a in zip(names, arrays)}


def attention_params(label):
    """Projections in rcannl's memory order: `|model -> heads, head` is (heads, head, model),
    the output `|heads, head -> model` is (model, heads, head)."""
    return {
        f"{label}.query": normal((HEADS, HEAD, MODEL), 0.5),
        f"{label}.key": normal((HEADS, HEAD, MODEL), 0.5),
        f"{label}.value": normal((HEADS, HEAD, MODEL), 0.4),
        f"{label}.output": normal((MODEL, HEADS, HEAD), 0.4),
    }


def dense_params(label, inputs, outputs, scale):
    """A dense layer `|inputs -> outputs`: its weight is stored (outputs, inputs)."""
    return {f"{label}.w": normal((outputs, inputs), scale), f"{label}.b": normal(outputs, 0.1)}


def norm_params(label):
    gain = f32_exact(1.0 + normal(MODEL, 0.2))
    return {f"{label}.gain": gain, f"{label}.bias": normal(MODEL, 0.1)}


def make_params(encoder_blocks, decoder_blocks, learned_positions, final_norms):
    """Every parameter, named by its rcannl label. An embedding table `|vocabulary -> model` is
    stored (model, vocabulary); learned positions (time, model)."""
    params = {
        f"{LABEL}.source_embedding.table": normal((MODEL, SOURCE_VOCABULARY), 0.8),
        f"{LABEL}.target_embedding.table": normal((MODEL, TARGET_VOCABULARY), 0.8),
    }
    if learned_positions:
        params[f"{LABEL}.source_positions.table"] = normal((SOURCE_TIME, MODEL), 0.3)
        params[f"{LABEL}.target_positions.table"] = normal((TARGET_TIME, MODEL), 0.3)
    for i in range(encoder_blocks):
        block = f"{LABEL}.encoder{i}"
        params.update(attention_params(f"{block}.attention"))
        params.update(dense_params(f"{block}.mlp.up", MODEL, HIDDEN, 0.4))
        params.update(dense_params(f"{block}.mlp.down", HIDDEN, MODEL, 0.3))
        params.update(norm_params(f"{block}.norm1"))
        params.update(norm_params(f"{block}.norm2"))
    for i in range(decoder_blocks):
        block = f"{LABEL}.decoder{i}"
        params.update(attention_params(f"{block}.self_attention"))
        params.update(attention_params(f"{block}.cross_attention"))
        params.update(dense_params(f"{block}.mlp.up", MODEL, HIDDEN, 0.4))
        params.update(dense_params(f"{block}.mlp.down", HIDDEN, MODEL, 0.3))
        for n in (1, 2, 3):
            params.update(norm_params(f"{block}.norm{n}"))
    if final_norms:
        params.update(norm_params(f"{LABEL}.encoder_norm"))
        params.update(norm_params(f"{LABEL}.decoder_norm"))
    params.update(dense_params(f"{LABEL}.head", MODEL, TARGET_VOCABULARY, 0.5))
    return params


def sinusoidal(time):
    """rcannl's fixed encoding: at position p, value 2i is sin(p / 10000^(2i/model)), value
    2i + 1 is cos of the same."""
    table = np.zeros((time, MODEL))
    for p in range(time):
        for e in range(MODEL):
            angle = p / 10_000 ** ((e // 2 * 2) / MODEL)
            table[p, e] = math.sin(angle) if e % 2 == 0 else math.cos(angle)
    return torch.tensor(table)


def layer_norm(x, p, label):
    centered = x - x.mean(-1, keepdim=True)
    variance = (centered * centered).mean(-1, keepdim=True)
    return centered / torch.sqrt(variance + EPSILON) * p[f"{label}.gain"] + p[f"{label}.bias"]


def attention(x, memory, p, label, mask):
    """Queries from x (batch, t, model) over memory (batch, s, model); `mask` (1 = attend)
    broadcasts against the scores (batch, heads, t, s)."""
    q = torch.einsum("btd,hed->bhte", x, p[f"{label}.query"])
    k = torch.einsum("bsd,hed->bhse", memory, p[f"{label}.key"])
    v = torch.einsum("bsd,hed->bhse", memory, p[f"{label}.value"])
    scores = torch.einsum("bhte,bhse->bhts", q, k) * (1.0 / math.sqrt(HEAD))
    scores = scores + (mask - 1.0) * -MASKED
    weights = torch.softmax(scores, dim=-1)
    mixed = torch.einsum("bhts,bhse->bhte", weights, v)
    return torch.einsum("bhte,dhe->btd", mixed, p[f"{label}.output"])


def dense(x, p, label):
    return torch.einsum("btd,fd->btf", x, p[f"{label}.w"]) + p[f"{label}.b"]


def feed_forward(x, p, label):
    return dense(torch.relu(dense(x, p, f"{label}.up")), p, f"{label}.down")


def sublayer(x, p, norm, pre_norm, f):
    """The residual sublayer f around x, its norm before f (pre-norm) or after the sum."""
    if pre_norm:
        return x + f(layer_norm(x, p, norm))
    return layer_norm(x + f(x), p, norm)


def logits_of(p, data, encoder_blocks, decoder_blocks, learned_positions, pre_norm):
    source_mask = data["source_mask"].to(torch.float64)[:, None, None, :]  # per key
    causal = torch.tril(torch.ones(TARGET_TIME, TARGET_TIME, dtype=torch.float64))
    embed = lambda name, ids: p[f"{LABEL}.{name}_embedding.table"].T[ids]

    def positions(name, time):
        if learned_positions:
            return p[f"{LABEL}.{name}_positions.table"]
        return sinusoidal(time)

    h = embed("source", data["source"]) + positions("source", SOURCE_TIME)
    for i in range(encoder_blocks):
        b = f"{LABEL}.encoder{i}"
        h = sublayer(h, p, f"{b}.norm1", pre_norm,
                     lambda x: attention(x, x, p, f"{b}.attention", source_mask))
        h = sublayer(h, p, f"{b}.norm2", pre_norm, lambda x: feed_forward(x, p, f"{b}.mlp"))
    memory = layer_norm(h, p, f"{LABEL}.encoder_norm") if pre_norm else h

    h = embed("target", data["target_inputs"]) + positions("target", TARGET_TIME)
    for i in range(decoder_blocks):
        b = f"{LABEL}.decoder{i}"
        h = sublayer(h, p, f"{b}.norm1", pre_norm,
                     lambda x: attention(x, x, p, f"{b}.self_attention", causal))
        h = sublayer(h, p, f"{b}.norm2", pre_norm,
                     lambda x: attention(x, memory, p, f"{b}.cross_attention", source_mask))
        h = sublayer(h, p, f"{b}.norm3", pre_norm, lambda x: feed_forward(x, p, f"{b}.mlp"))
    if pre_norm:
        h = layer_norm(h, p, f"{LABEL}.decoder_norm")
    return dense(h, p, f"{LABEL}.head")


def loss_of(logits, data):
    """The mean cross-entropy over the positions the target mask scores."""
    per_position = torch.nn.functional.cross_entropy(
        logits.reshape(-1, TARGET_VOCABULARY), data["targets"].reshape(-1), reduction="none"
    )
    mask = data["target_mask"].reshape(-1).to(torch.float64)
    return (per_position * mask).sum() / mask.sum()


def write(folder, encoder_blocks, decoder_blocks, learned_positions, pre_norm):
    folder.mkdir(exist_ok=True)
    params = make_params(encoder_blocks, decoder_blocks, learned_positions, pre_norm)
    arrays = sequences()
    p = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True) for n, v in params.items()}
    data = {n: torch.tensor(a) for n, a in arrays.items()}
    logits = logits_of(p, data, encoder_blocks, decoder_blocks, learned_positions, pre_norm)
    loss = loss_of(logits, data)
    loss.backward()

    def save(name, array):
        np.save(folder / f"{name}.npy", np.asarray(array))

    for name, value in params.items():
        save(name, value)
        save(f"{name}.grad", p[name].grad.numpy())
    for name, array in arrays.items():
        save(name, array)
    save("logits", logits.detach().numpy())  # (batch, target time, target vocabulary)
    save("loss", loss.detach().numpy().reshape(1))
    print(f"{folder.name}: loss {loss.item():.6f}, {len(params)} parameters")


write(FOLDER / "post_norm", 2, 2, learned_positions=False, pre_norm=False)
write(FOLDER / "pre_norm", 1, 1, learned_positions=True, pre_norm=True)
