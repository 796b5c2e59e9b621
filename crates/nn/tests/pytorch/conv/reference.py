"""PyTorch's side of `crates/nn/tests/nn/pytorch_conv.rs`: convolutions and pooling with
PyTorch's options, the weights copied across, in f64.

Images are channels-last, as rcannl lays them out (`batch | -> h, w, c`: PyTorch's NCHW
transposed), and a kernel is laid out `groups, out/groups, kh, kw, in/groups` (its output axes,
then its window and input channels; no groups axis for one group), PyTorch's `(out, in/groups, kh, kw)` permuted. It writes,
beside itself, for each case `<case>`: the input `<case>.x`, the output `<case>.y`, the weights
`<case>.r` of the loss `sum(y·r)` and the input's gradient `<case>.grad_x`; a convolution also
its kernel `<case>.kernel`, bias `<case>.bias` and their gradients `<case>.grad_kernel`,
`<case>.grad_bias`.

Convolutions (`nn.Conv2d(in, out, window, ...)` over a (2, in, h, w) input):

- `conv_stride`: 3 → 4 channels, 3×3, stride 2, no padding, over 8×8 (output floored: 3×3);
- `conv_padded`: 3 → 4, 3×3, stride 2, padding (1, 2), dilation (2, 1), over 7×9;
- `conv_groups`: 4 → 6, 3×2, groups 2, padding 1, over 5×6;
- `conv_same`: 2 → 3, 4×4, padding 'same' (the odd position after), over 6×5.

Pooling over a (2, 3, h, w) input:

- `max_floor`: `max_pool2d(2)` over 7×7;
- `max_ceil`: `max_pool2d(3, stride=2, padding=1, ceil_mode=True)` over 6×7;
- `max_dilated`: `max_pool2d((2, 3), stride=(1, 2), dilation=(2, 1))` over 6×7;
- `avg_pad`: `avg_pool2d(3, stride=2, padding=1)` over 7×6 (padding counted);
- `avg_pad_excluded`: the same with `count_include_pad=False`;
- `avg_ceil`: `avg_pool2d(3, stride=2, padding=1, ceil_mode=True)` over 6×6;
- `avg_ceil_excluded`: the same with `count_include_pad=False`;
- `max_ties`: `max_pool2d(3, stride=2, padding=1)` over 7×6, and `max_ties_overlap`:
  `max_pool2d(2, stride=1)` over 5×5, both of inputs holding only 0, 1 and 2 (ties everywhere):
  PyTorch gives the gradient to the first maximum of each window.

Other inputs are distinct values (no ties in a max). Regenerate (from the repository root):

    /tmp/torchenv/bin/python crates/nn/tests/pytorch/conv/reference.py

(any Python with torch ≥ 2.4 and numpy). It is deterministic: a fixed numpy seed, f64 throughout.
"""

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__).resolve().parent

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(11)


def save(name, array):
    if isinstance(array, torch.Tensor):
        array = array.detach().numpy()
    np.save(HERE / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float64))


def channels_last(t):
    return t.permute(0, 2, 3, 1)


def image(case, channels, h, w, tied=False):
    """A (2, channels, h, w) input of distinct values (or of 0, 1 and 2 when `tied`), saved
    channels-last."""
    if tied:
        x = rng.integers(0, 3, size=(2, channels, h, w)).astype(np.float64)
    else:
        x = rng.permutation(2 * channels * h * w).reshape(2, channels, h, w) / 10.0 - 3.0
    x = torch.tensor(x, requires_grad=True)
    save(f"{case}.x", channels_last(x))
    return x


def finish(case, x, y):
    """Saves the output and the loss weights channels-last, and the input's gradient."""
    r = torch.tensor(rng.standard_normal(y.shape))
    (y * r).sum().backward()
    save(f"{case}.y", channels_last(y))
    save(f"{case}.r", channels_last(r))
    save(f"{case}.grad_x", channels_last(x.grad))


def kernel_layout(weight, groups):
    """(out, in/groups, kh, kw) as (groups, out/groups, kh, kw, in/groups), without the groups
    axis when there is one group."""
    out, per_group, kh, kw = weight.shape
    grouped = weight.reshape(groups, out // groups, per_group, kh, kw).permute(0, 1, 3, 4, 2)
    return grouped[0] if groups == 1 else grouped


def conv(case, channels, out, window, size, groups=1, **options):
    x = image(case, channels, *size)
    layer = nn.Conv2d(channels, out, window, groups=groups, **options)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(rng.standard_normal(layer.weight.shape)))
        layer.bias.copy_(torch.tensor(rng.standard_normal(layer.bias.shape)))
    save(f"{case}.kernel", kernel_layout(layer.weight, groups))
    save(f"{case}.bias", layer.bias)
    finish(case, x, layer(x))
    save(f"{case}.grad_kernel", kernel_layout(layer.weight.grad, groups))
    save(f"{case}.grad_bias", layer.bias.grad)


conv("conv_stride", 3, 4, 3, (8, 8), stride=2)
conv("conv_padded", 3, 4, 3, (7, 9), stride=2, padding=(1, 2), dilation=(2, 1))
conv("conv_groups", 4, 6, (3, 2), (5, 6), groups=2, padding=1)
conv("conv_same", 2, 3, 4, (6, 5), padding="same")


def pool(case, size, function, *args, tied=False, **options):
    x = image(case, 3, *size, tied=tied)
    finish(case, x, function(x, *args, **options))


pool("max_floor", (7, 7), F.max_pool2d, 2)
pool("max_ceil", (6, 7), F.max_pool2d, 3, stride=2, padding=1, ceil_mode=True)
pool("max_dilated", (6, 7), F.max_pool2d, (2, 3), stride=(1, 2), dilation=(2, 1))
pool("avg_pad", (7, 6), F.avg_pool2d, 3, stride=2, padding=1)
pool("avg_pad_excluded", (7, 6), F.avg_pool2d, 3, stride=2, padding=1, count_include_pad=False)
pool("avg_ceil", (6, 6), F.avg_pool2d, 3, stride=2, padding=1, ceil_mode=True)
pool(
    "avg_ceil_excluded",
    (6, 6),
    F.avg_pool2d,
    3,
    stride=2,
    padding=1,
    ceil_mode=True,
    count_include_pad=False,
)
pool("max_ties", (7, 6), F.max_pool2d, 3, stride=2, padding=1, tied=True)
pool("max_ties_overlap", (5, 5), F.max_pool2d, 2, stride=1, tied=True)
