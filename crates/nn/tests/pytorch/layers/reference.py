"""PyTorch's side of `crates/nn/tests/nn/pytorch_layers.rs`: the layers a PyTorch user reaches for
first, with the weights copied across, in f64.

Arrays are row-major and laid out as rcannl lays its tensors out: a parameter's output axes
first, then its input axes (an `nn.Linear` weight `(out, in)` as it is), and images
channels-last (`batch | -> h, w, c`, PyTorch's NCHW transposed). It writes, beside itself:

- linear: `linear.x` (2, 5, 4), `linear.w` (3, 4), `linear.b` (3), `linear.r` (2, 5, 3; weights
  of the loss `sum(y·r)`), `linear.y` = `nn.Linear(4, 3)(x)`, `linear.y_nobias` (the same with
  `bias=False`), `linear.grad_w`, `linear.grad_b`; `linear.heads.y` (2, 5, 2, 3) =
  `nn.Linear(4, 6)(x)` reshaped, its weight `linear.heads.w` (2, 3, 4) and bias
  `linear.heads.b` (2, 3); `linear.flat.x` (2, 3, 4), `linear.flat.w` (5, 3, 4),
  `linear.flat.b` (5), `linear.flat.y` (2, 5) = `nn.Linear(12, 5)(x.flatten(1))`.
- norms over the last two axes: `norm.x` (2, 3, 4, 5), `norm.r` (the same shape),
  `layer_norm.gain`, `layer_norm.bias` (4, 5), `layer_norm.y` = `nn.LayerNorm((4, 5))(x)`,
  `layer_norm.grad_x`, `layer_norm.grad_gain`, `layer_norm.grad_bias` (of `sum(y·r)`);
  `rms_norm.gain`, `rms_norm.y` = `nn.RMSNorm((4, 5), eps=1e-6)(x)`, `rms_norm.grad_x`,
  `rms_norm.grad_gain`.
- batch norm with `momentum=None` after 3 training steps: `bn1d.x.<k>` (8, 3), `bn1d.y.<k>`
  (train-mode outputs), `bn1d.running_mean`, `bn1d.running_var` after steps 1, 2 and 3
  (`bn1d.running_mean.<k>`); `bn2d.x.<k>` (4, 3, 3, 2) channels-last, `bn2d.running_mean`,
  `bn2d.running_var` after the 3 steps.
- attention: `nn.MultiheadAttention(8, 2, bias=True, batch_first=True)` with nonzero biases,
  queries `mha.queries` (2, 5, 8) over `mha.memory` (2, 6, 8); `mha.query`, `mha.key`,
  `mha.value` (2, 4, 8) and `mha.output` (8, 2, 4) the projections, `mha.query_bias`, ...
  (2, 4) and `mha.output_bias` (8). Cases: `bool` with the boolean `attn_mask`
  `mha.attn_mask` (5, 6; true = masked) and `key_padding_mask` `mha.key_padding` (2, 6; true =
  padding), `additive` with the float mask `mha.additive` (5, 6, −inf in places), each giving
  `mha.<case>.y` (2, 5, 8) and per-head weights `mha.<case>.weights` (2, 2, 5, 6). Masks are
  saved as 0/1 floats.

Regenerate (from the repository root):

    /tmp/torchenv/bin/python crates/nn/tests/pytorch/layers/reference.py

(any Python with torch ≥ 2.4 and numpy). It is deterministic: a fixed numpy seed, f64 throughout.
"""

from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(7)


def save(name, array):
    if isinstance(array, torch.Tensor):
        array = array.detach().numpy()
    np.save(HERE / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float64))


def normal(*shape):
    return rng.standard_normal(shape)


def copy(parameter, values):
    with torch.no_grad():
        parameter.copy_(torch.tensor(values).reshape(parameter.shape))


# Linear over the last axis of a sequence, with and without a bias.
x, r = normal(2, 5, 4), normal(2, 5, 3)
w, b = normal(3, 4), normal(3)
for name, value in [("x", x), ("r", r), ("w", w), ("b", b)]:
    save(f"linear.{name}", value)
linear = nn.Linear(4, 3)
copy(linear.weight, w)
copy(linear.bias, b)
y = linear(torch.tensor(x))
(y * torch.tensor(r)).sum().backward()
save("linear.y", y)
save("linear.grad_w", linear.weight.grad)
save("linear.grad_b", linear.bias.grad)
unbiased = nn.Linear(4, 3, bias=False)
copy(unbiased.weight, w)
save("linear.y_nobias", unbiased(torch.tensor(x)))

# Output axes (2, 3): nn.Linear(4, 6) with its outputs reshaped.
heads_w, heads_b = normal(2, 3, 4), normal(2, 3)
save("linear.heads.w", heads_w)
save("linear.heads.b", heads_b)
heads = nn.Linear(4, 6)
copy(heads.weight, heads_w)
copy(heads.bias, heads_b)
save("linear.heads.y", heads(torch.tensor(x)).reshape(2, 5, 2, 3))

# Two contracted axes: nn.Linear(12, 5) of the flattened (3, 4).
flat_x, flat_w, flat_b = normal(2, 3, 4), normal(5, 3, 4), normal(5)
save("linear.flat.x", flat_x)
save("linear.flat.w", flat_w)
save("linear.flat.b", flat_b)
flat = nn.Linear(12, 5)
copy(flat.weight, flat_w)
copy(flat.bias, flat_b)
save("linear.flat.y", flat(torch.tensor(flat_x).flatten(1)))

# Layer and RMS normalization over the last two axes.
norm_x, norm_r = normal(2, 3, 4, 5), normal(2, 3, 4, 5)
save("norm.x", norm_x)
save("norm.r", norm_r)
gain, bias = 1.0 + 0.3 * normal(4, 5), 0.3 * normal(4, 5)
save("layer_norm.gain", gain)
save("layer_norm.bias", bias)
layer_norm = nn.LayerNorm((4, 5))
copy(layer_norm.weight, gain)
copy(layer_norm.bias, bias)
xs = torch.tensor(norm_x, requires_grad=True)
y = layer_norm(xs)
(y * torch.tensor(norm_r)).sum().backward()
save("layer_norm.y", y)
save("layer_norm.grad_x", xs.grad)
save("layer_norm.grad_gain", layer_norm.weight.grad)
save("layer_norm.grad_bias", layer_norm.bias.grad)

rms_gain = 1.0 + 0.3 * normal(4, 5)
save("rms_norm.gain", rms_gain)
rms_norm = nn.RMSNorm((4, 5), eps=1e-6)
copy(rms_norm.weight, rms_gain)
xs = torch.tensor(norm_x, requires_grad=True)
y = rms_norm(xs)
(y * torch.tensor(norm_r)).sum().backward()
save("rms_norm.y", y)
save("rms_norm.grad_x", xs.grad)
save("rms_norm.grad_gain", rms_norm.weight.grad)

# Batch normalization with a cumulative average of the batches' statistics.
bn1d = nn.BatchNorm1d(3, momentum=None)
bn2d = nn.BatchNorm2d(2, momentum=None)
bn1d.train()
bn2d.train()
for k in range(3):
    x1 = 2.0 + 1.5 * normal(8, 3)
    save(f"bn1d.x.{k}", x1)
    save(f"bn1d.y.{k}", bn1d(torch.tensor(x1)))
    save(f"bn1d.running_mean.{k}", bn1d.running_mean)
    save(f"bn1d.running_var.{k}", bn1d.running_var)
    x2 = -1.0 + 0.7 * normal(4, 3, 3, 2)  # channels-last
    save(f"bn2d.x.{k}", x2)
    bn2d(torch.tensor(x2).permute(0, 3, 1, 2))
save("bn2d.running_mean", bn2d.running_mean)
save("bn2d.running_var", bn2d.running_var)

# Multi-head attention with biases, boolean and additive masks.
MODEL, HEADS, HEAD = 8, 2, 4
attention = nn.MultiheadAttention(MODEL, HEADS, bias=True, batch_first=True)
projections = {n: 0.5 * normal(HEADS, HEAD, MODEL) for n in ("query", "key", "value")}
projections["output"] = 0.5 * normal(MODEL, HEADS, HEAD)
biases = {n: 0.5 * normal(HEADS, HEAD) for n in ("query", "key", "value")}
biases["output"] = 0.5 * normal(MODEL)
for n, value in projections.items():
    save(f"mha.{n}", value)
for n, value in biases.items():
    save(f"mha.{n}_bias", value)
copy(
    attention.in_proj_weight,
    np.concatenate([projections[n].reshape(MODEL, MODEL) for n in ("query", "key", "value")]),
)
copy(
    attention.in_proj_bias,
    np.concatenate([biases[n].reshape(MODEL) for n in ("query", "key", "value")]),
)
copy(attention.out_proj.weight, projections["output"])
copy(attention.out_proj.bias, biases["output"])

queries, memory = normal(2, 5, MODEL), normal(2, 6, MODEL)
save("mha.queries", queries)
save("mha.memory", memory)
# True = masked; every query keeps at least one key.
attn_mask = rng.random((5, 6)) < 0.3
attn_mask[:, 0] = False
key_padding = np.zeros((2, 6), dtype=bool)
key_padding[0, 4:] = True
key_padding[1, 5:] = True
additive = np.where(rng.random((5, 6)) < 0.25, -np.inf, normal(5, 6))
additive[:, 1] = 0.5
save("mha.attn_mask", attn_mask)
save("mha.key_padding", key_padding)
save("mha.additive", additive)

cases = {
    "bool": {
        "attn_mask": torch.tensor(attn_mask),
        "key_padding_mask": torch.tensor(key_padding),
    },
    "additive": {"attn_mask": torch.tensor(additive)},
}
for case, masks in cases.items():
    y, weights = attention(
        torch.tensor(queries),
        torch.tensor(memory),
        torch.tensor(memory),
        need_weights=True,
        average_attn_weights=False,
        **masks,
    )
    save(f"mha.{case}.y", y)
    save(f"mha.{case}.weights", weights)
