"""PyTorch's side of `crates/nn/tests/losses.rs`: cross-entropy against class ids over sequences.

Logits of 2 sequences of 5 positions over 4 classes, laid out `batch | -> t, classes` as rcannl
lays them out (row-major [2, 5, 4]), and the ids of each position ([2, 5]). PyTorch takes the
classes on axis 1, so its call is `F.cross_entropy(logits.transpose(1, 2), ids, ...)`.

It writes, beside itself:

- `logits`, `ids` (id 0 pads the ends of the sequences and also occurs inside them) and
  `outside_ids` (the same with the padding written -100, PyTorch's usual `ignore_index`, which is
  no class);
- per case, `<case>.loss` (the reduced loss, or the per-position losses for `reduction="none"`)
  and, for reduced cases, `<case>.grad` (its gradient with respect to the logits):

  case       ids          ignore_index  label_smoothing  reduction
  plain      ids          (none)        0                mean
  ignore     ids          0             0                mean
  smooth     ids          (none)        0.1              mean
  both       ids          0             0.1              mean
  both_sum   ids          0             0.1              sum
  both_none  ids          0             0.1              none
  outside    outside_ids  -100          0.2              mean

Regenerate (from the repository root):

    /tmp/torchenv/bin/python crates/nn/tests/pytorch/cross_entropy/reference.py

(any Python with torch and numpy). It is deterministic: a fixed numpy seed, f64 throughout.
"""

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
BATCH, TIME, CLASSES = 2, 5, 4

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(42)


def save(name, array):
    np.save(HERE / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float64))


logits = 1.5 * rng.standard_normal((BATCH, TIME, CLASSES))
ids = np.array([[3, 0, 2, 0, 0], [1, 3, 3, 2, 0]])
outside_ids = np.where(np.arange(TIME) >= np.array([[3], [4]]), -100, ids)
save("logits", logits)
save("ids", ids)
save("outside_ids", outside_ids)

CASES = {
    "plain": (ids, {}),
    "ignore": (ids, {"ignore_index": 0}),
    "smooth": (ids, {"label_smoothing": 0.1}),
    "both": (ids, {"ignore_index": 0, "label_smoothing": 0.1}),
    "both_sum": (ids, {"ignore_index": 0, "label_smoothing": 0.1, "reduction": "sum"}),
    "both_none": (ids, {"ignore_index": 0, "label_smoothing": 0.1, "reduction": "none"}),
    "outside": (outside_ids, {"ignore_index": -100, "label_smoothing": 0.2}),
}

for case, (targets, options) in CASES.items():
    x = torch.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x.transpose(1, 2), torch.as_tensor(targets), **options)
    save(f"{case}.loss", loss.detach().numpy().reshape(-1))
    if loss.dim() == 0:
        loss.backward()
        save(f"{case}.grad", x.grad.numpy())
