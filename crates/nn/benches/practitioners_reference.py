"""The reference side of `cargo bench -p rcannl-nn --bench practitioners`: the six models of
`practitioners/models.rs` in PyTorch (eager, and `torch.compile`) and in JAX (`jax.jit`, CPU),
timed the way the harness times rcannl.

  --threads N --libraries L,... --rounds R time CASE REPEATS
      the best of R medians of REPEATS training steps (after warm-up steps) of model CASE, per
      library: prints `LIBRARY SECONDS`
  --threads N --libraries L,... check CASE STEPS
      the loss of the first and of the last of STEPS training steps: prints `LIBRARY FIRST LAST`

A library that fails prints `LIBRARY failed: WHY` and the others go on. A training step is what a
training loop pays per step: forward, gradients, the optimizer's update, the loss read back as a
Python float. `torch.compile` compiles the model and its loss (forward and, through
AOTAutograd, backward); the optimizer's step runs eagerly, as is usual. The JAX step is one
jitted function: `jax.value_and_grad` of the loss and a hand-written optimizer update (no flax
or optax), the parameters and the optimizer's state passed in and out.

The models are written as PyTorch and JAX users write them, with the sizes, layers, optimizers,
hyper-parameters and losses of the rcannl side: PyTorch's modules with their default
initialization, and JAX with the same initialization by hand. Images are laid out as each
library prefers (PyTorch NCHW, JAX NHWC); every value is random, drawn once, the same batch
every step."""
import argparse
import math

import numpy as np

# The timing and the thread settings are the suite's, so that both benchmarks time alike.
from suite_reference import best_median, set_threads, torch_threads

# The GPT: vocabulary, positions, width, heads, blocks, MLP width, batch; AdamW's rate and decay.
GPT_VOCABULARY, GPT_TIME, GPT_WIDTH, GPT_HEADS, GPT_BLOCKS, GPT_HIDDEN = 65, 16, 64, 4, 2, 256
GPT_BATCH, GPT_LR, GPT_DECAY = 32, 3e-3, 0.1
# The ResNet: image side and channels, classes, batch; SGD's rate, momentum and decay.
IMAGE, CHANNELS, CLASSES = 32, 3, 10
RESNET_BATCH, RESNET_LR, RESNET_MOMENTUM, RESNET_DECAY = 32, 0.05, 0.9, 5e-4
# The encoder-decoder: tokens 0..30, the source's padding, the target's end and start tokens;
# source lengths, positions, sizes, batch and Adam's rate.
SOURCE_PAD, SOURCE_VOCABULARY, END, START, TARGET_VOCABULARY = 30, 31, 30, 31, 32
SHORTEST, LONGEST, SEQ_TIME = 8, 15, 16
SEQ_WIDTH, SEQ_HEADS, SEQ_HIDDEN, SEQ_LAYERS, SEQ_BATCH, SEQ_LR = 64, 4, 128, 2, 32, 1e-3
# The VAE: pixels, hidden width, latent size, batch, Adam's rate.
PIXELS, VAE_HIDDEN, LATENT, VAE_BATCH, VAE_LR = 784, 256, 16, 64, 1e-3
# The GRU: steps, input features, hidden width, batch, Adam's rate (classes: CLASSES).
GRU_TIME, GRU_INPUT, GRU_HIDDEN, GRU_BATCH, GRU_LR = 16, 32, 128, 32, 1e-3
# The ViT: patch side, width, heads, blocks, MLP width, batch, Adam's rate.
PATCH, VIT_WIDTH, VIT_HEADS, VIT_BLOCKS, VIT_HIDDEN, VIT_BATCH, VIT_LR = 4, 64, 4, 2, 256, 32, 1e-3
PATCHES = (IMAGE // PATCH) ** 2
# LayerNorm's and BatchNorm's epsilon, BatchNorm's momentum (PyTorch's and rcannl's defaults).
EPSILON, BN_MOMENTUM = 1e-5, 0.1

RNG = np.random.default_rng(0)


# The data, drawn once per model as numpy arrays: images NHWC (PyTorch's side transposes them).


def gpt_data():
    sequences = RNG.integers(0, GPT_VOCABULARY, (GPT_BATCH, GPT_TIME + 1))
    return sequences[:, :-1], sequences[:, 1:]


def image_data(batch):
    images = RNG.standard_normal((batch, IMAGE, IMAGE, CHANNELS)).astype(np.float32)
    return images, RNG.integers(0, CLASSES, batch)


def seq2seq_data():
    """Random strings of 8 to 15 tokens padded to 16, their masks, and under teacher forcing
    the decoder's inputs (the start token, then the reversed string), the targets (the reversed
    string, then the end token) and their mask."""
    shape = (SEQ_BATCH, SEQ_TIME)
    source, source_mask = np.full(shape, SOURCE_PAD), np.zeros(shape, np.float32)
    inputs, targets = np.full(shape, END), np.full(shape, END)
    target_mask = np.zeros(shape, np.float32)
    for b in range(SEQ_BATCH):
        tokens = RNG.integers(0, SOURCE_PAD, RNG.integers(SHORTEST, LONGEST + 1))
        source[b, : len(tokens)], source_mask[b, : len(tokens)] = tokens, 1
        target = list(tokens[::-1]) + [END]
        targets[b, : len(target)], target_mask[b, : len(target)] = target, 1
        inputs[b, 0], inputs[b, 1 : len(target)] = START, target[:-1]
    return source, source_mask, inputs, targets, target_mask


def vae_data():
    return RNG.uniform(size=(VAE_BATCH, PIXELS)).astype(np.float32)


def gru_data():
    sequences = RNG.standard_normal((GRU_BATCH, GRU_TIME, GRU_INPUT)).astype(np.float32)
    return sequences, RNG.integers(0, CLASSES, GRU_BATCH)


def sinusoids(time, width):
    """At position p, value 2i is sin(p / 10000^(2i/width)) and value 2i+1 its cosine."""
    pair = (np.arange(width) // 2 * 2).astype(np.float64)
    angles = np.arange(time)[:, None] / 10000.0 ** (pair / width)[None, :]
    table = np.where(np.arange(width) % 2 == 0, np.sin(angles), np.cos(angles))
    return table.astype(np.float32)


# PyTorch.


def torch_cases(compiled):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    maybe_compile = torch.compile if compiled else (lambda f: f)

    def training(loss, optimizer):
        loss = maybe_compile(loss)

        def step():
            optimizer.zero_grad(set_to_none=True)
            value = loss()
            value.backward()
            optimizer.step()
            return value.item()

        return step

    class SelfAttention(nn.Module):
        """Multi-head self-attention without projection biases (as rcannl's `Attention`)."""

        def __init__(self, width, heads, causal):
            super().__init__()
            self.heads, self.causal = heads, causal
            self.qkv = nn.Linear(width, 3 * width, bias=False)
            self.out = nn.Linear(width, width, bias=False)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (
                z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                for z in self.qkv(x).split(c, dim=2)
            )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            return self.out(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        """The pre-norm transformer block: `x + attention(norm(x))`, `x + mlp(norm(x))`."""

        def __init__(self, width, heads, hidden, causal, activation):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.attention = SelfAttention(width, heads, causal)
            self.mlp = nn.Sequential(nn.Linear(width, hidden), activation, nn.Linear(hidden, width))

        def forward(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    def gpt():
        class Gpt(nn.Module):
            def __init__(self):
                super().__init__()
                self.tokens = nn.Embedding(GPT_VOCABULARY, GPT_WIDTH)
                self.positions = nn.Parameter(0.02 * torch.randn(GPT_TIME, GPT_WIDTH))
                self.blocks = nn.Sequential(
                    *(
                        Block(GPT_WIDTH, GPT_HEADS, GPT_HIDDEN, True, nn.GELU())
                        for _ in range(GPT_BLOCKS)
                    )
                )
                self.norm = nn.LayerNorm(GPT_WIDTH)
                self.head = nn.Linear(GPT_WIDTH, GPT_VOCABULARY)

            def forward(self, ids):
                x = self.tokens(ids) + self.positions
                return self.head(self.norm(self.blocks(x)))

        model = Gpt()
        x, y = (torch.from_numpy(a) for a in gpt_data())
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        optimizer = torch.optim.AdamW(
            [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=GPT_LR,
            weight_decay=GPT_DECAY,
        )
        return training(
            lambda: F.cross_entropy(model(x).view(-1, GPT_VOCABULARY), y.reshape(-1)), optimizer
        )

    class Residual(nn.Module):
        """ResNet's basic block: two 3x3 convolutions with batch norm, ReLU between them, the
        shortcut (a strided 1x1 convolution with batch norm where the shape changes) added,
        then ReLU."""

        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Identity()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )

        def forward(self, x):
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

    def resnet():
        model = nn.Sequential(
            nn.Conv2d(CHANNELS, 16, 3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            Residual(16, 16, 1),
            Residual(16, 32, 2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, CLASSES),
        )
        model.train()
        images, labels = image_data(RESNET_BATCH)
        x, y = torch.from_numpy(images.transpose(0, 3, 1, 2).copy()), torch.from_numpy(labels)
        optimizer = torch.optim.SGD(
            model.parameters(), lr=RESNET_LR, momentum=RESNET_MOMENTUM, weight_decay=RESNET_DECAY
        )
        return training(lambda: F.cross_entropy(model(x), y), optimizer)

    def seq2seq():
        def attention():
            return nn.MultiheadAttention(SEQ_WIDTH, SEQ_HEADS, bias=False, batch_first=True)

        def feed_forward():
            return nn.Sequential(
                nn.Linear(SEQ_WIDTH, SEQ_HIDDEN), nn.ReLU(), nn.Linear(SEQ_HIDDEN, SEQ_WIDTH)
            )

        class Encoder(nn.Module):
            """Post-norm: `norm(x + attention(x))`, then `norm(x + mlp(x))`."""

            def __init__(self):
                super().__init__()
                self.attention, self.mlp = attention(), feed_forward()
                self.norm1, self.norm2 = nn.LayerNorm(SEQ_WIDTH), nn.LayerNorm(SEQ_WIDTH)

            def forward(self, x, padding):
                a = self.attention(x, x, x, key_padding_mask=padding, need_weights=False)[0]
                x = self.norm1(x + a)
                return self.norm2(x + self.mlp(x))

        class Decoder(nn.Module):
            """Post-norm causal self-attention, cross-attention to the encoder, then the MLP."""

            def __init__(self):
                super().__init__()
                self.self_attention, self.cross_attention = attention(), attention()
                self.mlp = feed_forward()
                self.norms = nn.ModuleList(nn.LayerNorm(SEQ_WIDTH) for _ in range(3))

            def forward(self, x, memory, padding, causal):
                a = self.self_attention(x, x, x, attn_mask=causal, need_weights=False)[0]
                x = self.norms[0](x + a)
                a = self.cross_attention(
                    x, memory, memory, key_padding_mask=padding, need_weights=False
                )[0]
                x = self.norms[1](x + a)
                return self.norms[2](x + self.mlp(x))

        class EncoderDecoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.source_embedding = nn.Embedding(SOURCE_VOCABULARY, SEQ_WIDTH)
                self.target_embedding = nn.Embedding(TARGET_VOCABULARY, SEQ_WIDTH)
                self.register_buffer("positions", torch.from_numpy(sinusoids(SEQ_TIME, SEQ_WIDTH)))
                # True where a query may not look: the keys after it.
                causal = torch.ones(SEQ_TIME, SEQ_TIME, dtype=torch.bool).triu(1)
                self.register_buffer("causal", causal)
                self.encoder = nn.ModuleList(Encoder() for _ in range(SEQ_LAYERS))
                self.decoder = nn.ModuleList(Decoder() for _ in range(SEQ_LAYERS))
                self.head = nn.Linear(SEQ_WIDTH, TARGET_VOCABULARY)

            def forward(self, source, padding, inputs):
                memory = self.source_embedding(source) + self.positions
                for block in self.encoder:
                    memory = block(memory, padding)
                x = self.target_embedding(inputs) + self.positions
                for block in self.decoder:
                    x = block(x, memory, padding, self.causal)
                return self.head(x)

        model = EncoderDecoder()
        source, source_mask, inputs, targets, target_mask = (
            torch.from_numpy(a) for a in seq2seq_data()
        )
        padding = source_mask == 0

        def loss():
            logits = model(source, padding, inputs)
            each = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
            return (each * target_mask).sum() / target_mask.sum()

        return training(loss, torch.optim.Adam(model.parameters(), lr=SEQ_LR))

    def vae():
        class Vae(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(PIXELS, VAE_HIDDEN)
                self.mu = nn.Linear(VAE_HIDDEN, LATENT)
                self.log_var = nn.Linear(VAE_HIDDEN, LATENT)
                self.decoder = nn.Linear(LATENT, VAE_HIDDEN)
                self.pixels = nn.Linear(VAE_HIDDEN, PIXELS)

            def forward(self, x):
                h = torch.relu(self.encoder(x))
                mu, log_var = self.mu(h), self.log_var(h)
                z = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu)
                p = torch.sigmoid(self.pixels(torch.relu(self.decoder(z))))
                bce = F.binary_cross_entropy(p, x, reduction="sum")
                kl = -0.5 * torch.sum(1 + log_var - mu * mu - log_var.exp())
                return (bce + kl) / VAE_BATCH

        model = Vae()
        x = torch.from_numpy(vae_data())
        return training(lambda: model(x), torch.optim.Adam(model.parameters(), lr=VAE_LR))

    def gru():
        class Gru(nn.Module):
            """nn.GRUCell's equations from linear layers, unrolled, the last state classified."""

            def __init__(self):
                super().__init__()
                pair = lambda: nn.ModuleList(
                    [nn.Linear(GRU_INPUT, GRU_HIDDEN), nn.Linear(GRU_HIDDEN, GRU_HIDDEN)]
                )
                self.reset, self.update, self.candidate = pair(), pair(), pair()
                self.head = nn.Linear(GRU_HIDDEN, CLASSES)

            def forward(self, x):
                h = torch.zeros(x.shape[0], GRU_HIDDEN)
                for t in range(GRU_TIME):
                    x_t = x[:, t]
                    r = torch.sigmoid(self.reset[0](x_t) + self.reset[1](h))
                    z = torch.sigmoid(self.update[0](x_t) + self.update[1](h))
                    n = torch.tanh(self.candidate[0](x_t) + r * self.candidate[1](h))
                    h = (1 - z) * n + z * h
                return self.head(h)

        model = Gru()
        x, y = (torch.from_numpy(a) for a in gru_data())
        return training(
            lambda: F.cross_entropy(model(x), y), torch.optim.Adam(model.parameters(), lr=GRU_LR)
        )

    def vit():
        class Vit(nn.Module):
            def __init__(self):
                super().__init__()
                self.patches = nn.Conv2d(CHANNELS, VIT_WIDTH, PATCH, stride=PATCH)
                self.positions = nn.Parameter(0.02 * torch.randn(PATCHES, VIT_WIDTH))
                self.blocks = nn.Sequential(
                    *(
                        Block(VIT_WIDTH, VIT_HEADS, VIT_HIDDEN, False, nn.ReLU())
                        for _ in range(VIT_BLOCKS)
                    )
                )
                self.norm = nn.LayerNorm(VIT_WIDTH)
                self.head = nn.Linear(VIT_WIDTH, CLASSES)

            def forward(self, images):
                x = self.patches(images).flatten(2).transpose(1, 2) + self.positions
                return self.head(self.norm(self.blocks(x)).mean(1))

        model = Vit()
        images, labels = image_data(VIT_BATCH)
        x, y = torch.from_numpy(images.transpose(0, 3, 1, 2).copy()), torch.from_numpy(labels)
        return training(
            lambda: F.cross_entropy(model(x), y), torch.optim.Adam(model.parameters(), lr=VIT_LR)
        )

    return {"gpt": gpt, "resnet": resnet, "seq2seq": seq2seq, "vae": vae, "gru": gru, "vit": vit}


# JAX.


def jax_cases():
    import jax
    import jax.numpy as jnp
    from jax import lax

    tree_map = jax.tree_util.tree_map

    # PyTorch's default initializations, by hand.

    def uniform(shape, fan_in):
        bound = 1 / math.sqrt(fan_in)
        return RNG.uniform(-bound, bound, shape).astype(np.float32)

    def linear(fan_in, fan_out, bias=True):
        """nn.Linear's weight (as `x @ w`) and bias."""
        layer = {"w": uniform((fan_in, fan_out), fan_in)}
        if bias:
            layer["b"] = uniform((fan_out,), fan_in)
        return layer

    def apply(layer, x):
        return x @ layer["w"] + layer["b"] if "b" in layer else x @ layer["w"]

    def embedding(vocabulary, width):
        """nn.Embedding's table: standard normal values."""
        return RNG.standard_normal((vocabulary, width)).astype(np.float32)

    def norm_params(width):
        return {"gain": np.ones(width, np.float32), "bias": np.zeros(width, np.float32)}

    def layer_norm(p, x):
        centered = x - x.mean(-1, keepdims=True)
        variance = (centered * centered).mean(-1, keepdims=True)
        return centered / jnp.sqrt(variance + EPSILON) * p["gain"] + p["bias"]

    def cross_entropy(logits, labels):
        log_p = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(log_p, labels[..., None], -1))

    # Optimizers, as PyTorch defines them.

    def adam(lr, decay=None, weight_decay=0.0):
        """Adam with the usual betas and epsilon, bias-corrected; with `weight_decay`, AdamW's
        decoupled decay on the parameters where the tree `decay` is True."""
        b1, b2, eps = 0.9, 0.999, 1e-8

        def init(params):
            zeros = tree_map(jnp.zeros_like, params)
            return jnp.zeros((), jnp.float32), zeros, zeros

        def update(params, grads, state):
            t, m, v = state
            t = t + 1
            m = tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
            v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
            c1, c2 = 1 - b1**t, 1 - b2**t
            if weight_decay:
                params = tree_map(
                    lambda p, d: p * (1 - lr * weight_decay) if d else p, params, decay
                )
            params = tree_map(
                lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, m, v
            )
            return params, (t, m, v)

        return init, update

    def sgd(lr, momentum, weight_decay):
        """SGD with momentum and weight decay added to the gradient: `v <- momentum v + g +
        weight_decay w`, `w <- w - lr v`."""

        def init(params):
            return tree_map(jnp.zeros_like, params)

        def update(params, grads, velocities):
            velocities = tree_map(
                lambda v, g, p: momentum * v + g + weight_decay * p, velocities, grads, params
            )
            return tree_map(lambda p, v: p - lr * v, params, velocities), velocities

        return init, update

    def training(params, loss, optimizer, data, extra=None):
        """A step of `loss(params, extra, *data)`, compiled by jax.jit with the optimizer's
        update. `extra` is state that is no parameter (batch norm's running statistics, the
        noise's key), which `loss` returns updated beside the loss value."""
        init, update = optimizer
        params = tree_map(jnp.asarray, params)
        data = tuple(jnp.asarray(d) for d in data)
        state = init(params)

        @jax.jit
        def jitted(params, state, extra, data):
            (value, extra), grads = jax.value_and_grad(loss, has_aux=True)(params, extra, *data)
            params, state = update(params, grads, state)
            return params, state, extra, value

        def step():
            nonlocal params, state, extra
            params, state, extra, value = jitted(params, state, extra, data)
            return float(value)

        return step

    def attention_params(width):
        return {name: linear(width, width, bias=False) for name in ("q", "k", "v", "out")}

    def attend(p, x, memory, heads, mask):
        """Multi-head attention without projection biases of `x` (b, t, c) over `memory` (b, s,
        c); `mask` (broadcast to b, heads, t, s) is True where a key may be looked at."""
        b, t, c = x.shape
        split = lambda z: z.reshape(b, z.shape[1], heads, c // heads).transpose(0, 2, 1, 3)
        q = split(apply(p["q"], x))
        k, v = split(apply(p["k"], memory)), split(apply(p["v"], memory))
        scores = q @ k.swapaxes(-1, -2) / math.sqrt(c // heads)
        if mask is not None:
            scores = jnp.where(mask, scores, -jnp.inf)
        mixed = jax.nn.softmax(scores, -1) @ v
        return apply(p["out"], mixed.transpose(0, 2, 1, 3).reshape(b, t, c))

    def block_params(width, hidden):
        return {
            "norm1": norm_params(width),
            "attention": attention_params(width),
            "norm2": norm_params(width),
            "up": linear(width, hidden),
            "down": linear(hidden, width),
        }

    def block(p, x, heads, mask, activation):
        """The pre-norm transformer block."""
        normalized = layer_norm(p["norm1"], x)
        x = x + attend(p["attention"], normalized, normalized, heads, mask)
        return x + apply(p["down"], activation(apply(p["up"], layer_norm(p["norm2"], x))))

    def causal(time):
        return jnp.tril(jnp.ones((time, time), bool))

    def gpt():
        params = {
            "tokens": embedding(GPT_VOCABULARY, GPT_WIDTH),
            "positions": (0.02 * RNG.standard_normal((GPT_TIME, GPT_WIDTH))).astype(np.float32),
            "blocks": [block_params(GPT_WIDTH, GPT_HIDDEN) for _ in range(GPT_BLOCKS)],
            "norm": norm_params(GPT_WIDTH),
            "head": linear(GPT_WIDTH, GPT_VOCABULARY),
        }
        gelu = lambda x: jax.nn.gelu(x, approximate=False)

        def loss(p, extra, x, y):
            h = p["tokens"][x] + p["positions"]
            for b in p["blocks"]:
                h = block(b, h, GPT_HEADS, causal(GPT_TIME), gelu)
            return cross_entropy(apply(p["head"], layer_norm(p["norm"], h)), y), extra

        # AdamW's decay on the parameters of two axes or more, as PyTorch users split them.
        decay = tree_map(lambda a: a.ndim >= 2, params)
        return training(params, loss, adam(GPT_LR, decay, GPT_DECAY), gpt_data())

    def conv(x, kernel, stride, padding):
        return lax.conv_general_dilated(
            x, kernel, (stride, stride), padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    def conv_params(size, cin, cout):
        return uniform((size, size, cin, cout), size * size * cin)

    def bn_params(channels):
        return norm_params(channels), {
            "mean": np.zeros(channels, np.float32),
            "var": np.ones(channels, np.float32),
        }

    def batch_norm(p, running, x):
        """Train mode: the batch's statistics normalize; the running ones move towards them
        (the unbiased variance), as PyTorch's BatchNorm2d."""
        mean = x.mean((0, 1, 2))
        variance = ((x - mean) ** 2).mean((0, 1, 2))
        n = x.shape[0] * x.shape[1] * x.shape[2]
        running = {
            "mean": (1 - BN_MOMENTUM) * running["mean"] + BN_MOMENTUM * lax.stop_gradient(mean),
            "var": (1 - BN_MOMENTUM) * running["var"]
            + BN_MOMENTUM * lax.stop_gradient(variance) * n / (n - 1),
        }
        return (x - mean) / jnp.sqrt(variance + EPSILON) * p["gain"] + p["bias"], running

    def resnet():
        def conv_bn(size, cin, cout):
            norm, running = bn_params(cout)
            return {"kernel": conv_params(size, cin, cout), "norm": norm}, running

        def residual(cin, cout, stride):
            params, running = {}, {}
            for name, (size, a, b) in {"first": (3, cin, cout), "second": (3, cout, cout)}.items():
                params[name], running[name] = conv_bn(size, a, b)
            if stride != 1 or cin != cout:
                params["projection"], running["projection"] = conv_bn(1, cin, cout)
            return params, running

        params, running = {}, {}
        params["stem"], running["stem"] = conv_bn(3, CHANNELS, 16)
        params["stage1"], running["stage1"] = residual(16, 16, 1)
        params["stage2"], running["stage2"] = residual(16, 32, 2)
        params["head"] = linear(32, CLASSES)
        strides = {"stage1": 1, "stage2": 2}

        def conv_bn_apply(p, r, x, stride):
            return batch_norm(p["norm"], r, conv(x, p["kernel"], stride, "SAME"))

        def loss(p, running, x, y):
            updated = {}
            h, updated["stem"] = conv_bn_apply(p["stem"], running["stem"], x, 1)
            h = jax.nn.relu(h)
            for stage, stride in strides.items():
                q, r, u = p[stage], running[stage], {}
                out, u["first"] = conv_bn_apply(q["first"], r["first"], h, stride)
                out, u["second"] = conv_bn_apply(q["second"], r["second"], jax.nn.relu(out), 1)
                shortcut = h
                if "projection" in q:
                    shortcut, u["projection"] = conv_bn_apply(
                        q["projection"], r["projection"], h, stride
                    )
                h, updated[stage] = jax.nn.relu(out + shortcut), u
            logits = apply(p["head"], h.mean((1, 2)))
            return cross_entropy(logits, y), updated

        optimizer = sgd(RESNET_LR, RESNET_MOMENTUM, RESNET_DECAY)
        running = tree_map(jnp.asarray, running)
        return training(params, loss, optimizer, image_data(RESNET_BATCH), running)

    def seq2seq():
        def feed_forward():
            return {"up": linear(SEQ_WIDTH, SEQ_HIDDEN), "down": linear(SEQ_HIDDEN, SEQ_WIDTH)}

        def mlp(p, x):
            return apply(p["down"], jax.nn.relu(apply(p["up"], x)))

        params = {
            "source_embedding": embedding(SOURCE_VOCABULARY, SEQ_WIDTH),
            "target_embedding": embedding(TARGET_VOCABULARY, SEQ_WIDTH),
            "encoder": [
                {
                    "attention": attention_params(SEQ_WIDTH),
                    "mlp": feed_forward(),
                    "norm1": norm_params(SEQ_WIDTH),
                    "norm2": norm_params(SEQ_WIDTH),
                }
                for _ in range(SEQ_LAYERS)
            ],
            "decoder": [
                {
                    "self_attention": attention_params(SEQ_WIDTH),
                    "cross_attention": attention_params(SEQ_WIDTH),
                    "mlp": feed_forward(),
                    "norms": [norm_params(SEQ_WIDTH) for _ in range(3)],
                }
                for _ in range(SEQ_LAYERS)
            ],
            "head": linear(SEQ_WIDTH, TARGET_VOCABULARY),
        }
        positions = jnp.asarray(sinusoids(SEQ_TIME, SEQ_WIDTH))

        def loss(p, extra, source, source_mask, inputs, targets, target_mask):
            keys = source_mask[:, None, None, :] > 0  # (b, heads, t, s)
            memory = p["source_embedding"][source] + positions
            for b in p["encoder"]:
                attended = attend(b["attention"], memory, memory, SEQ_HEADS, keys)
                memory = layer_norm(b["norm1"], memory + attended)
                memory = layer_norm(b["norm2"], memory + mlp(b["mlp"], memory))
            x = p["target_embedding"][inputs] + positions
            for b in p["decoder"]:
                n = b["norms"]
                attended = attend(b["self_attention"], x, x, SEQ_HEADS, causal(SEQ_TIME))
                x = layer_norm(n[0], x + attended)
                x = layer_norm(n[1], x + attend(b["cross_attention"], x, memory, SEQ_HEADS, keys))
                x = layer_norm(n[2], x + mlp(b["mlp"], x))
            log_p = jax.nn.log_softmax(apply(p["head"], x))
            each = -jnp.take_along_axis(log_p, targets[..., None], -1)[..., 0]
            return (each * target_mask).sum() / target_mask.sum(), extra

        return training(params, loss, adam(SEQ_LR), seq2seq_data())

    def vae():
        params = {
            "encoder": linear(PIXELS, VAE_HIDDEN),
            "mu": linear(VAE_HIDDEN, LATENT),
            "log_var": linear(VAE_HIDDEN, LATENT),
            "decoder": linear(LATENT, VAE_HIDDEN),
            "pixels": linear(VAE_HIDDEN, PIXELS),
        }

        def loss(p, key, x):
            key, draw = jax.random.split(key)
            h = jax.nn.relu(apply(p["encoder"], x))
            mu, log_var = apply(p["mu"], h), apply(p["log_var"], h)
            z = mu + jnp.exp(0.5 * log_var) * jax.random.normal(draw, mu.shape)
            probability = jax.nn.sigmoid(apply(p["pixels"], jax.nn.relu(apply(p["decoder"], z))))
            bce = -jnp.sum(x * jnp.log(probability) + (1 - x) * jnp.log(1 - probability))
            kl = -0.5 * jnp.sum(1 + log_var - mu * mu - jnp.exp(log_var))
            return (bce + kl) / VAE_BATCH, key

        return training(params, loss, adam(VAE_LR), (vae_data(),), jax.random.PRNGKey(0))

    def gru():
        pair = lambda: [linear(GRU_INPUT, GRU_HIDDEN), linear(GRU_HIDDEN, GRU_HIDDEN)]
        params = {
            "reset": pair(),
            "update": pair(),
            "candidate": pair(),
            "head": linear(GRU_HIDDEN, CLASSES),
        }

        def loss(p, extra, x, y):
            h = jnp.zeros((x.shape[0], GRU_HIDDEN), jnp.float32)
            gate = lambda q, x_t, h: apply(q[0], x_t) + apply(q[1], h)
            for t in range(GRU_TIME):  # unrolled, as the other sides run it
                x_t = x[:, t]
                r = jax.nn.sigmoid(gate(p["reset"], x_t, h))
                z = jax.nn.sigmoid(gate(p["update"], x_t, h))
                n = jnp.tanh(apply(p["candidate"][0], x_t) + r * apply(p["candidate"][1], h))
                h = (1 - z) * n + z * h
            return cross_entropy(apply(p["head"], h), y), extra

        return training(params, loss, adam(GRU_LR), gru_data())

    def vit():
        params = {
            "patches": {
                "kernel": conv_params(PATCH, CHANNELS, VIT_WIDTH),
                "bias": uniform((VIT_WIDTH,), PATCH * PATCH * CHANNELS),
            },
            "positions": (0.02 * RNG.standard_normal((PATCHES, VIT_WIDTH))).astype(np.float32),
            "blocks": [block_params(VIT_WIDTH, VIT_HIDDEN) for _ in range(VIT_BLOCKS)],
            "norm": norm_params(VIT_WIDTH),
            "head": linear(VIT_WIDTH, CLASSES),
        }

        def loss(p, extra, x, y):
            grid = conv(x, p["patches"]["kernel"], PATCH, "VALID") + p["patches"]["bias"]
            h = grid.reshape(x.shape[0], PATCHES, VIT_WIDTH) + p["positions"]
            for b in p["blocks"]:
                h = block(b, h, VIT_HEADS, None, jax.nn.relu)
            logits = apply(p["head"], layer_norm(p["norm"], h).mean(1))
            return cross_entropy(logits, y), extra

        return training(params, loss, adam(VIT_LR), image_data(VIT_BATCH))

    return {"gpt": gpt, "resnet": resnet, "seq2seq": seq2seq, "vae": vae, "gru": gru, "vit": vit}


def cases(library):
    if library == "torch":
        return torch_cases(compiled=False)
    if library == "torch.compile":
        return torch_cases(compiled=True)
    if library == "jax":
        return jax_cases()
    raise SystemExit(f"unknown library {library}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--libraries", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("command", choices=["time", "check"])
    parser.add_argument("case")
    parser.add_argument("count", type=int, help="timed steps a round, or steps of the check")
    options = parser.parse_args()
    set_threads(options.threads)
    for library in options.libraries.split(","):
        try:
            torch_threads(library, options.threads)
            step = cases(library)[options.case]()
            if options.command == "time":
                print(library, best_median(step, options.count, options.rounds), flush=True)
            else:
                losses = [step() for _ in range(options.count)]
                print(library, losses[0], losses[-1], flush=True)
        except Exception as e:  # one library failing leaves the others their figures
            message = str(e).strip().splitlines()
            why = f"{type(e).__name__}: {message[-1] if message else ''}"
            print(f"{library} failed: {why}", flush=True)


if __name__ == "__main__":
    main()
