"""PyTorch's optimizers and initializer fans, the references of crates/nn/tests/nn/pytorch_optim.rs.

Every optimizer runs `STEPS` steps from the same float64 parameters, each step on gradients
given outright (`p.grad` set, no loss), so that the test can give rcannl the same gradients (the
gradient of `sum(x * w)` is `x`). Writes, beside this script:

- `<param>.npy`: the starting values of each parameter, `w` (a dense weight, `|3 -> 2` in rcannl,
  stored (2, 3)), `b` (a bias, 2) and `head` (a dense weight `|2 -> 2`);
- `<param>.grads.npy`: its gradients, one per step (steps first); their sizes shrink then grow,
  so that the second moments fall and AMSGrad's largest one differs from the last;
- `<case>.<param>.npy`: each parameter after the steps of each case below;
- `fans.npy`: `[fan_in, fan_out]` of `torch.nn.init._calculate_fan_in_and_fan_out` for each
  kernel in `KERNELS`, in order.

Regenerate (needs torch and numpy; deterministic), from any folder:

    /path/to/python crates/nn/tests/pytorch/optim/reference.py
"""

from pathlib import Path

import numpy as np
import torch

FOLDER = Path(__file__).resolve().parent
STEPS = 5
SCALES = [1.0, 0.01, 0.3, 0.001, 2.0]  # the size of each step's gradients
WARMUP = 3  # the schedule case: the rate rises linearly over 3 steps

rng = np.random.default_rng(20240917)
SHAPES = {"w": (2, 3), "b": (2,), "head": (2, 2)}
start = {name: rng.standard_normal(shape) for name, shape in SHAPES.items()}
grads = {
    name: np.stack([scale * rng.standard_normal(shape) for scale in SCALES])
    for name, shape in SHAPES.items()
}


def params():
    return {name: torch.tensor(value, dtype=torch.float64) for name, value in start.items()}


def run(make, schedule=None):
    """The parameters after `STEPS` steps of the optimizer `make(params)` builds."""
    p = params()
    optimizer = make(p)
    scheduler = None
    if schedule is not None:
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    for step in range(STEPS):
        for name, t in p.items():
            t.grad = torch.tensor(grads[name][step], dtype=torch.float64)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return {name: t.numpy() for name, t in p.items()}


def groups(p, *settings):
    """Parameter groups: `settings` pairs a list of parameter names with the group's options."""
    return [dict(params=[p[n] for n in names], **options) for names, options in settings]


CASES = {
    "sgd_dampening": lambda p: torch.optim.SGD(
        p.values(), lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01
    ),
    "sgd_nesterov": lambda p: torch.optim.SGD(
        p.values(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01
    ),
    "sgd_groups": lambda p: torch.optim.SGD(
        groups(p, (["w", "head"], {}), (["b"], {"lr": 0.05, "weight_decay": 0.0})),
        lr=0.1,
        momentum=0.9,
        weight_decay=0.01,
    ),
    "adam": lambda p: torch.optim.Adam(p.values(), lr=0.01),
    "adam_coupled": lambda p: torch.optim.Adam(p.values(), lr=0.01, weight_decay=0.1),
    "adamw": lambda p: torch.optim.AdamW(p.values(), lr=0.01, weight_decay=0.1),
    "adam_amsgrad": lambda p: torch.optim.Adam(
        p.values(), lr=0.01, weight_decay=0.1, amsgrad=True
    ),
    "adamw_amsgrad": lambda p: torch.optim.AdamW(
        p.values(), lr=0.01, weight_decay=0.1, amsgrad=True
    ),
    # Decay for the weights only, a rate three times the default for the head.
    "adamw_groups": lambda p: torch.optim.AdamW(
        groups(p, (["w"], {}), (["b"], {"weight_decay": 0.0}), (["head"], {"lr": 0.03})),
        lr=0.01,
        weight_decay=0.1,
    ),
}

for name, value in start.items():
    np.save(FOLDER / f"{name}.npy", value)
    np.save(FOLDER / f"{name}.grads.npy", grads[name])
results = {case: run(make) for case, make in CASES.items()}
# The same groups under a linear warm-up, which scales every group's rate alike.
results["adamw_groups_warmup"] = run(
    CASES["adamw_groups"], schedule=lambda step: min(1.0, (step + 1) / WARMUP)
)
for case, values in results.items():
    for name, value in values.items():
        np.save(FOLDER / f"{case}.{name}.npy", value)

# AMSGrad must change the result for the test to tell it apart.
for plain, amsgrad in [("adam_coupled", "adam_amsgrad"), ("adamw", "adamw_amsgrad")]:
    gap = max(abs(results[plain][n] - results[amsgrad][n]).max() for n in SHAPES)
    assert gap > 1e-6, f"{amsgrad} is {plain} within {gap}"

# PyTorch's kernels: (out_channels, in_channels / groups, *window).
KERNELS = [
    (128, 64),  # a dense weight
    (128, 64, 3, 3),  # a 3x3 convolution from 64 to 128 channels
    (32, 1, 3, 3),  # a depthwise 3x3 convolution of 32 channels
    (16, 8, 5),  # a 1-D convolution of window 5
]
fans = [torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(k)) for k in KERNELS]
np.save(FOLDER / "fans.npy", np.array(fans, dtype=np.float64))

print(f"wrote {len(list(FOLDER.glob('*.npy')))} arrays to {FOLDER}")
