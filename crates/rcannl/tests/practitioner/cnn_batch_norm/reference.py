"""PyTorch's side of the `cnn_batch_norm` practitioner program.

A small ResNet-like CNN on 6x6 one-channel images: a 3x3 stem convolution (no bias) with batch
normalization and ReLU, 2x2 max-pooling, a residual block of two 3x3 convolutions with batch
normalization (ReLU between them, the identity shortcut added, then ReLU), global average
pooling and a dense head of 3 classes, trained on the mean cross-entropy against class ids.

It writes, beside itself, every array the Rust program reads, in rcannl's memory order
(batch, then output, then input axes, row-major: images NHWC, a kernel `|kh,kw,cin->cout` as
[cout, kh, kw, cin], a dense weight `|in->out` as [out, in]):

- the starting parameters (`<label>.npy`, the labels rcannl's blocks give them), the training
  batches (`images.<step>.npy`, `classes.<step>.npy`) and the test images;
- the logits and loss of the first batch and the gradient of that loss with respect to every
  parameter (`grad.<label>.npy`);
- every parameter and running statistic after three steps of SGD with momentum
  (`trained.<label>.npy`), and the eval-mode logits of the test images after them.

Regenerate (from the repository root):

    /tmp/torchenv/bin/python crates/rcannl/tests/practitioner/cnn_batch_norm/reference.py

(any Python with torch and numpy). It is deterministic: a fixed numpy seed, f64 throughout.
"""

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
BATCH, SIDE, CHANNELS, CLASSES, TEST = 4, 6, 4, 3, 3
STEPS, LR, MOMENTUM = 3, 0.1, 0.9

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(20240611)


def save(name, array):
    np.save(HERE / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float64))


# Parameters in rcannl's memory order, as the Rust program sets them.
params = {
    "stem.kernel": 0.5 * rng.standard_normal((CHANNELS, 3, 3, 1)),
    "stem.norm.gain": 1.0 + 0.2 * rng.standard_normal(CHANNELS),
    "stem.norm.bias": 0.2 * rng.standard_normal(CHANNELS),
    "block.first.kernel": 0.3 * rng.standard_normal((CHANNELS, 3, 3, CHANNELS)),
    "block.first.norm.gain": 1.0 + 0.2 * rng.standard_normal(CHANNELS),
    "block.first.norm.bias": 0.2 * rng.standard_normal(CHANNELS),
    "block.second.kernel": 0.3 * rng.standard_normal((CHANNELS, 3, 3, CHANNELS)),
    "block.second.norm.gain": 1.0 + 0.2 * rng.standard_normal(CHANNELS),
    "block.second.norm.bias": 0.2 * rng.standard_normal(CHANNELS),
    "head.w": 0.5 * rng.standard_normal((CLASSES, CHANNELS)),
    "head.b": 0.1 * rng.standard_normal(CLASSES),
}
# Images with an offset and a spread per batch, so that normalization has work to do.
batches = [
    (
        1.5 * rng.standard_normal((BATCH, SIDE, SIDE, 1)) + 0.5 * step,
        np.array([0, 2, 1, 2, 0, 1, 1, 0, 2, 2, 1, 0], dtype=np.float64)[
            step * BATCH : (step + 1) * BATCH
        ],
    )
    for step in range(STEPS)
]
test_images = 1.5 * rng.standard_normal((TEST, SIDE, SIDE, 1)) + 0.5

for name, value in params.items():
    save(name, value)
for step, (images, classes) in enumerate(batches):
    save(f"images.{step}", images)
    save(f"classes.{step}", classes)
save("test_images", test_images)


def to_torch(name, value):
    """A parameter in PyTorch's layout: kernels [cout, cin, kh, kw]."""
    if name.endswith("kernel"):
        value = value.transpose(0, 3, 1, 2)
    return torch.tensor(np.ascontiguousarray(value), requires_grad=True)


def to_rcannl(name, value):
    """A parameter's (or gradient's) values in rcannl's memory order."""
    value = value.detach().numpy()
    if name.endswith("kernel"):
        value = value.transpose(0, 2, 3, 1)
    return value


class Model(torch.nn.Module):
    """The network, with torch.nn.BatchNorm2d for each normalization (momentum 0.1, eps 1e-5,
    the batch's biased variance for normalizing, the unbiased one for the running variance), as
    rcannl's BatchNorm documents its conventions."""

    def __init__(self):
        super().__init__()
        self.p = torch.nn.ParameterDict(
            {n.replace(".", "_"): torch.nn.Parameter(to_torch(n, v)) for n, v in params.items()}
        )
        self.norms = torch.nn.ModuleDict(
            {
                n: torch.nn.BatchNorm2d(CHANNELS, eps=1e-5, momentum=0.1)
                for n in ["stem", "block_first", "block_second"]
            }
        )
        for n, norm in self.norms.items():
            # The norms' affine parameters are the model's gain and bias.
            norm.weight = self.p[f"{n}_norm_gain"]
            norm.bias = self.p[f"{n}_norm_bias"]

    def param(self, name):
        return self.p[name.replace(".", "_")]

    def conv_bn(self, x, name):
        # A 3x3 convolution padded by one on each side ("same", as `o=+k` pads a 3-window).
        convolved = F.conv2d(x, self.param(f"{name}.kernel"), padding=1)
        return self.norms[name.replace(".", "_")](convolved)

    def forward(self, images):
        x = torch.as_tensor(images).permute(0, 3, 1, 2)  # NHWC to NCHW
        h = F.relu(self.conv_bn(x, "stem"))
        h = F.max_pool2d(h, 2)
        residual = self.conv_bn(F.relu(self.conv_bn(h, "block.first")), "block.second")
        h = F.relu(residual + h)
        pooled = h.mean(dim=(2, 3))
        return pooled @ self.param("head.w").T + self.param("head.b")


def loss_of(logits, classes):
    return F.cross_entropy(logits, torch.as_tensor(classes).long())


model = Model()
model.train()

# (a) The first batch: logits, loss, every parameter's gradient (before any step).
images, classes = batches[0]
logits = model(images)
loss = loss_of(logits, classes)
loss.backward()
save("logits", logits.detach().numpy())
save("loss", loss.detach().numpy().reshape(1))
for name in params:
    save(f"grad.{name}", to_rcannl(name, model.param(name).grad))

# (b) Three steps of SGD with momentum, one per batch, from the same start (a fresh model: the
# pass above moved the running statistics once).
model = Model()
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
for images, classes in batches:
    optimizer.zero_grad()
    loss_of(model(images), classes).backward()
    optimizer.step()
for name in params:
    save(f"trained.{name}", to_rcannl(name, model.param(name)))
for name in ["stem", "block.first", "block.second"]:
    norm = model.norms[name.replace(".", "_")]
    save(f"trained.{name}.norm.running_mean", norm.running_mean.numpy())
    save(f"trained.{name}.norm.running_var", norm.running_var.numpy())

# (c) The trained model in eval mode (running statistics) on the test images.
model.eval()
with torch.no_grad():
    save("eval_logits", model(test_images).numpy())
