"""PyTorch's side of the `custom_op` practitioner program.

An MLP 3 -> 5 -> 2 whose hidden activation is swish, `x * sigmoid(x)`, trained on the mean Huber
loss (delta 1) against targets with Adam. The Rust program defines both swish and the Huber loss
as new operations with `cd!` (forward formula and hand-written gradients); here they are
PyTorch's ops differentiated by autograd (the loss is `torch.nn.functional.huber_loss`, checked
against the same formula written with `torch.where`).

It writes, beside itself, every array the Rust program reads, in rcannl's memory order (batch,
then output, then input axes, row-major; a weight `|in->out` is [out, in], as torch's
`Linear.weight`):

- the starting parameters (`w1`, `b1`, `w2`, `b2`), the inputs `x` and the `targets`;
- the hidden activations, the predictions and the loss, and the gradient of the loss with
  respect to every parameter (`grad.<label>.npy`);
- every parameter after three Adam steps (lr 0.05, betas 0.9 and 0.999, eps 1e-8) on the same
  batch (`trained.<label>.npy`);
- every parameter after three steps of centered RMSprop with momentum and weight decay (lr 0.01,
  alpha 0.99, eps 1e-8, momentum 0.9, weight decay 0.01), which the Rust program writes with
  `cd!` over state declared with no shape (`rmsprop.<label>.npy`).

Regenerate (from the repository root):

    /tmp/torchenv/bin/python crates/rcannl/tests/practitioner/custom_op/reference.py

(any Python with torch and numpy). It is deterministic: a fixed numpy seed, f64 throughout.
"""

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
BATCH, INPUTS, HIDDEN, OUTPUTS = 8, 3, 5, 2
DELTA, LR, STEPS = 1.0, 0.05, 3
RMS_LR, RMS_ALPHA, RMS_EPS, RMS_MOMENTUM, RMS_DECAY = 0.01, 0.99, 1e-8, 0.9, 0.01

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(7)


def save(name, array):
    np.save(HERE / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float64))


params = {
    "w1": 0.8 * rng.standard_normal((HIDDEN, INPUTS)),
    "b1": 0.3 * rng.standard_normal(HIDDEN),
    "w2": 0.8 * rng.standard_normal((OUTPUTS, HIDDEN)),
    "b2": 0.3 * rng.standard_normal(OUTPUTS),
}
x = rng.standard_normal((BATCH, INPUTS))
targets = 1.5 * rng.standard_normal((BATCH, OUTPUTS))
for name, value in params.items():
    save(name, value)
save("x", x)
save("targets", targets)


def swish(t):
    return t * torch.sigmoid(t)


def model(p):
    hidden = swish(torch.as_tensor(x) @ p["w1"].T + p["b1"])
    return hidden, hidden @ p["w2"].T + p["b2"]


def loss_of(prediction):
    loss = F.huber_loss(prediction, torch.as_tensor(targets), delta=DELTA)
    d = prediction - torch.as_tensor(targets)
    by_hand = torch.where(d.abs() < DELTA, 0.5 * d * d, DELTA * (d.abs() - 0.5 * DELTA)).mean()
    assert abs(loss.item() - by_hand.item()) < 1e-15
    return loss


def fresh():
    return {n: torch.tensor(v, requires_grad=True) for n, v in params.items()}


# Forward values and gradients at the starting parameters.
p = fresh()
hidden, prediction = model(p)
residuals = (prediction - torch.as_tensor(targets)).abs()
# Both branches of the Huber loss are taken, none near the switch.
assert (residuals < DELTA - 0.05).any() and (residuals > DELTA + 0.05).any()
assert ((residuals - DELTA).abs() > 1e-3).all()
loss = loss_of(prediction)
loss.backward()
save("hidden", hidden.detach().numpy())
save("prediction", prediction.detach().numpy())
save("loss", loss.detach().numpy().reshape(1))
for name, value in p.items():
    save(f"grad.{name}", value.grad.numpy())


def train(make_optimizer, saved_as):
    """Three steps on the batch from the starting parameters, each saved as `saved_as.<name>`."""
    p = fresh()
    optimizer = make_optimizer(p.values())
    for _ in range(STEPS):
        optimizer.zero_grad()
        _, prediction = model(p)
        # No residual is near the Huber loss's switch at any step.
        assert (((prediction - torch.as_tensor(targets)).abs() - DELTA).abs() > 1e-3).all()
        loss_of(prediction).backward()
        optimizer.step()
    for name, value in p.items():
        save(f"{saved_as}.{name}", value.detach().numpy())


train(lambda ps: torch.optim.Adam(ps, lr=LR, betas=(0.9, 0.999), eps=1e-8), "trained")
# Centered RMSprop with momentum and weight decay.
train(
    lambda ps: torch.optim.RMSprop(
        ps,
        lr=RMS_LR,
        alpha=RMS_ALPHA,
        eps=RMS_EPS,
        weight_decay=RMS_DECAY,
        momentum=RMS_MOMENTUM,
        centered=True,
    ),
    "rmsprop",
)
