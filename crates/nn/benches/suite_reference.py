"""The reference side of `cargo bench -p rcannl-nn --bench suite`: the suite's workloads in
PyTorch (eager, and `torch.compile`), JAX (`jax.jit`, CPU) and, for the matrix product, numpy,
timed the way the harness times rcannl.

  --threads N --libraries L,... --rounds R time CASE REPEATS
      the best of R medians of REPEATS steps (after warm-up steps) of workload CASE, per library
  --threads N --libraries L first CACHE CASE
      seconds from nothing built (the libraries imported) to workload CASE's first training
      step, the loss read; `torch.compile` keeps its kernels in CACHE (TORCHINDUCTOR_CACHE_DIR),
      JAX its compiled programs (the persistent compilation cache)

Prints `LIBRARY SECONDS` per line; a library that fails prints `LIBRARY failed: WHY` and the
others go on. A training step is what a training loop pays per step: gradients, the optimizer's
update, the loss read back as a Python float. `torch.compile` compiles the model and its loss
(forward and, through AOTAutograd, backward); the optimizer's step runs eagerly, as is usual.
The models, sizes, optimizers and losses are those of `suite/workloads.rs`; images are laid out
as each library prefers (PyTorch NCHW, JAX NHWC), the values are random. The convolution's
training step weights its output by fixed random values before summing, so that the output's
gradient is no constant a compiler could fold away."""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

# The transformer of the `names` example.
VOCABULARY, WINDOW, MODEL, HEADS, BLOCKS, TRANSFORMER_BATCH = 27, 8, 32, 4, 2, 64
HEAD = MODEL // HEADS
TRANSFORMER_LR = 0.005
# The MLP 784 -> 512 -> 512 -> 10.
MLP_BATCH, MLP_LR = 128, 0.001
# The digits example's CNN.
DIGITS_BATCH, DIGITS_LR = 32, 0.002
# The moons MLP.
MOONS_LR, MOONS_MOMENTUM = 0.1, 0.9
# The convolution: batch, channels, size, output channels.
CONV = (8, 64, 58, 64)

RNG = np.random.default_rng(0)


def normal(*shape, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


def best_median(step, repeats, rounds):
    """The best of `rounds` medians of `repeats` calls of `step`, each round after warm-up
    calls, as the harness times its own steps."""
    warmup = max(repeats // 10, 2)
    best = math.inf
    for _ in range(rounds):
        for _ in range(warmup):
            step()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        best = min(best, statistics.median(times))
    return best


def transformer_shapes():
    """The transformer's parameters: name -> (shape, init), in the example's order."""
    shapes = {"embedding": ((VOCABULARY, MODEL), "normal")}
    for i in range(BLOCKS):
        b = f"b{i}."
        shapes.update(
            {
                b + "norm1.gain": ((MODEL,), "ones"),
                b + "norm1.bias": ((MODEL,), "zeros"),
                b + "query": ((MODEL, HEADS, HEAD), "normal"),
                b + "key": ((MODEL, HEADS, HEAD), "normal"),
                b + "value": ((MODEL, HEADS, HEAD), "normal"),
                b + "output": ((HEADS, HEAD, MODEL), "normal"),
                b + "norm2.gain": ((MODEL,), "ones"),
                b + "norm2.bias": ((MODEL,), "zeros"),
                b + "up.w": ((MODEL, 4 * MODEL), "normal"),
                b + "up.b": ((4 * MODEL,), "zeros"),
                b + "down.w": ((4 * MODEL, MODEL), "normal"),
                b + "down.b": ((MODEL,), "zeros"),
            }
        )
    shapes.update(
        {
            "norm.gain": ((MODEL,), "ones"),
            "norm.bias": ((MODEL,), "zeros"),
            "head.w": ((MODEL, VOCABULARY), "normal"),
            "head.b": ((VOCABULARY,), "zeros"),
        }
    )
    return shapes


def transformer_init():
    make = {
        "normal": lambda s: normal(*s, scale=0.1),
        "ones": lambda s: np.ones(s, np.float32),
        "zeros": lambda s: np.zeros(s, np.float32),
    }
    return {name: make[init](shape) for name, (shape, init) in transformer_shapes().items()}


def rotary_tables():
    """cos and sin of `position * 10000^(-2i/HEAD)` for the pair i of each value: (WINDOW, HEAD)."""
    pairs = (np.arange(HEAD) // 2).astype(np.float64)
    angles = np.arange(WINDOW)[:, None] * 10000.0 ** (-2.0 * pairs / HEAD)[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def causal_mask():
    return np.triu(np.full((WINDOW, WINDOW), -1e9, np.float32), 1)


def windows():
    tokens = lambda: RNG.integers(0, VOCABULARY, (TRANSFORMER_BATCH, WINDOW))
    return tokens(), tokens()


def one_hot(labels, classes):
    return np.eye(classes, dtype=np.float32)[labels]


# PyTorch.


def torch_cases(compiled):
    import torch
    import torch.nn.functional as F

    maybe_compile = torch.compile if compiled else (lambda f: f)

    def training(loss, optimizer):
        loss = maybe_compile(loss)

        def step():
            optimizer.zero_grad(set_to_none=True)
            value = loss()
            value.backward()
            optimizer.step()
            value.item()

        return step

    def matmul():
        a, b = (torch.from_numpy(normal(1024, 1024)) for _ in range(2))
        product = maybe_compile(lambda a, b: a @ b)
        return lambda: product(a, b)

    def conv_operands():
        batch, channels, size, out = CONV
        x = torch.from_numpy(normal(batch, channels, size, size))
        k = torch.from_numpy(normal(out, channels, 3, 3, scale=0.1))
        return x, k

    def conv_forward():
        x, k = conv_operands()
        conv = maybe_compile(F.conv2d)

        def step():
            with torch.no_grad():
                conv(x, k)

        return step

    def conv_step():
        x, k = (t.requires_grad_() for t in conv_operands())
        batch, _, size, out = CONV
        weights = torch.from_numpy(normal(batch, out, size - 2, size - 2))
        loss = maybe_compile(lambda: (F.conv2d(x, k) * weights).sum())

        def step():
            x.grad, k.grad = None, None
            value = loss()
            value.backward()
            value.item()

        return step

    def transformer():
        p = {n: torch.from_numpy(v).requires_grad_() for n, v in transformer_init().items()}
        cos, sin = (torch.from_numpy(t) for t in rotary_tables())
        mask = torch.from_numpy(causal_mask())
        x, y = (torch.from_numpy(t) for t in windows())

        def rotary(q):
            even, odd = q[..., 0::2], q[..., 1::2]
            return q * cos + torch.stack((-odd, even), -1).flatten(-2) * sin

        def norm(h, name):
            return F.layer_norm(h, (MODEL,), p[name + ".gain"], p[name + ".bias"], 1e-5)

        def loss():
            h = p["embedding"][x]
            for i in range(BLOCKS):
                b = f"b{i}."
                a = norm(h, b + "norm1")
                q = rotary(torch.einsum("btd,dhe->bhte", a, p[b + "query"]))
                k = rotary(torch.einsum("btd,dhe->bhte", a, p[b + "key"]))
                v = torch.einsum("btd,dhe->bhte", a, p[b + "value"])
                scores = q @ k.transpose(-1, -2) * (1 / math.sqrt(HEAD)) + mask
                mixed = torch.softmax(scores, -1) @ v
                h = h + torch.einsum("bhte,hed->btd", mixed, p[b + "output"])
                hidden = torch.relu(norm(h, b + "norm2") @ p[b + "up.w"] + p[b + "up.b"])
                h = h + hidden @ p[b + "down.w"] + p[b + "down.b"]
            logits = norm(h, "norm") @ p["head.w"] + p["head.b"]
            return F.cross_entropy(logits.reshape(-1, VOCABULARY), y.reshape(-1))

        return training(loss, torch.optim.Adam(p.values(), lr=TRANSFORMER_LR))

    def moons(batch):
        model = torch.nn.Sequential(
            torch.nn.Linear(2, 16),
            torch.nn.ReLU(),
            torch.nn.Linear(16, 16),
            torch.nn.ReLU(),
            torch.nn.Linear(16, 1),
        )
        x = torch.from_numpy(normal(batch, 2))
        y = torch.from_numpy(np.sign(normal(batch, 1)))
        optimizer = torch.optim.SGD(model.parameters(), lr=MOONS_LR, momentum=MOONS_MOMENTUM)
        return training(lambda: torch.relu(1 - y * model(x)).mean(), optimizer)

    def mlp_model():
        return torch.nn.Sequential(
            torch.nn.Linear(784, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, 10),
        )

    def mlp():
        model = mlp_model()
        x = torch.from_numpy(normal(MLP_BATCH, 784))
        y = torch.from_numpy(RNG.integers(0, 10, MLP_BATCH))
        optimizer = torch.optim.Adam(model.parameters(), lr=MLP_LR)
        return training(lambda: F.cross_entropy(model(x), y), optimizer)

    def digits():
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(16 * 4 * 4, 64),
            torch.nn.ReLU(),
            torch.nn.Linear(64, 10),
        )
        x = torch.from_numpy(RNG.uniform(size=(DIGITS_BATCH, 1, 8, 8)).astype(np.float32))
        y = torch.from_numpy(RNG.integers(0, 10, DIGITS_BATCH))
        optimizer = torch.optim.Adam(model.parameters(), lr=DIGITS_LR)
        return training(lambda: F.cross_entropy(model(x), y), optimizer)

    def latency():
        model = maybe_compile(mlp_model())
        image = normal(1, 784)

        def step():
            with torch.inference_mode():
                model(torch.from_numpy(image)).numpy()

        return step

    return {
        "matmul": matmul,
        "conv_forward": conv_forward,
        "conv_step": conv_step,
        "transformer": transformer,
        "moons32": lambda: moons(32),
        "moons1024": lambda: moons(1024),
        "mlp": mlp,
        "digits": digits,
        "latency": latency,
    }


# JAX.


def jax_cases():
    import jax
    import jax.numpy as jnp
    from jax import lax

    tree_map = jax.tree_util.tree_map

    def adam(lr):
        """Adam with the usual betas and epsilon, bias-corrected: (init, update)."""
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
            params = tree_map(
                lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, m, v
            )
            return params, (t, m, v)

        return init, update

    def sgd(lr, momentum):
        """SGD with momentum: `v <- momentum v + g`, `w <- w - lr v`."""

        def init(params):
            return tree_map(jnp.zeros_like, params)

        def update(params, grads, velocities):
            velocities = tree_map(lambda v, g: momentum * v + g, velocities, grads)
            return tree_map(lambda p, v: p - lr * v, params, velocities), velocities

        return init, update

    def training(params, loss, optimizer, data):
        """A step of `loss(params, *data)` under `optimizer`, compiled by jax.jit."""
        init, update = optimizer
        params = tree_map(jnp.asarray, params)
        data = tuple(jnp.asarray(d) for d in data)
        state = init(params)

        @jax.jit
        def jitted(params, state, data):
            value, grads = jax.value_and_grad(loss)(params, *data)
            params, state = update(params, grads, state)
            return params, state, value

        def step():
            nonlocal params, state
            params, state, value = jitted(params, state, data)
            float(value)

        return step

    def dense(params, x):
        for i, (w, b) in enumerate(params):
            x = x @ w + b
            if i + 1 < len(params):
                x = jax.nn.relu(x)
        return x

    def dense_params(widths):
        return [
            (normal(a, b, scale=math.sqrt(3 / a)), np.zeros(b, np.float32))
            for a, b in zip(widths, widths[1:])
        ]

    def cross_entropy(logits, targets):
        return -jnp.mean(jnp.sum(targets * jax.nn.log_softmax(logits), -1))

    def matmul():
        a, b = (jnp.asarray(normal(1024, 1024)) for _ in range(2))
        product = jax.jit(lambda a, b: a @ b)
        return lambda: product(a, b).block_until_ready()

    def conv(x, k, padding):
        return lax.conv_general_dilated(x, k, (1, 1), padding, dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def conv_operands():
        batch, channels, size, out = CONV
        return jnp.asarray(normal(batch, size, size, channels)), jnp.asarray(
            normal(3, 3, channels, out, scale=0.1)
        )

    def conv_forward():
        x, k = conv_operands()
        forward = jax.jit(lambda x, k: conv(x, k, "VALID"))
        return lambda: forward(x, k).block_until_ready()

    def conv_step():
        x, k = conv_operands()
        batch, _, size, out = CONV
        weights = jnp.asarray(normal(batch, size - 2, size - 2, out))
        loss = lambda x, k, weights: (conv(x, k, "VALID") * weights).sum()
        grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))

        def step():
            value, (dx, dk) = grads(x, k, weights)
            dx.block_until_ready()
            dk.block_until_ready()
            float(value)

        return step

    def transformer():
        cos, sin = (jnp.asarray(t) for t in rotary_tables())
        mask = jnp.asarray(causal_mask())

        def rotary(q):
            even, odd = q[..., 0::2], q[..., 1::2]
            return q * cos + jnp.stack((-odd, even), -1).reshape(q.shape) * sin

        def norm(p, h, name):
            centered = h - h.mean(-1, keepdims=True)
            variance = (centered * centered).mean(-1, keepdims=True)
            return centered / jnp.sqrt(variance + 1e-5) * p[name + ".gain"] + p[name + ".bias"]

        def loss(p, x, y):
            h = p["embedding"][x]
            for i in range(BLOCKS):
                b = f"b{i}."
                a = norm(p, h, b + "norm1")
                q = rotary(jnp.einsum("btd,dhe->bhte", a, p[b + "query"]))
                k = rotary(jnp.einsum("btd,dhe->bhte", a, p[b + "key"]))
                v = jnp.einsum("btd,dhe->bhte", a, p[b + "value"])
                scores = q @ k.swapaxes(-1, -2) * (1 / math.sqrt(HEAD)) + mask
                mixed = jax.nn.softmax(scores, -1) @ v
                h = h + jnp.einsum("bhte,hed->btd", mixed, p[b + "output"])
                hidden = jax.nn.relu(norm(p, h, b + "norm2") @ p[b + "up.w"] + p[b + "up.b"])
                h = h + hidden @ p[b + "down.w"] + p[b + "down.b"]
            logits = norm(p, h, "norm") @ p["head.w"] + p["head.b"]
            return cross_entropy(logits, jax.nn.one_hot(y, VOCABULARY))

        return training(transformer_init(), loss, adam(TRANSFORMER_LR), windows())

    def moons(batch):
        def loss(p, x, y):
            return jnp.mean(jax.nn.relu(1 - y * dense(p, x)))

        data = (normal(batch, 2), np.sign(normal(batch, 1)))
        return training(dense_params([2, 16, 16, 1]), loss, sgd(MOONS_LR, MOONS_MOMENTUM), data)

    def mlp():
        def loss(p, x, y):
            return cross_entropy(dense(p, x), y)

        data = (normal(MLP_BATCH, 784), one_hot(RNG.integers(0, 10, MLP_BATCH), 10))
        return training(dense_params([784, 512, 512, 10]), loss, adam(MLP_LR), data)

    def digits():
        params = {
            "kernel": normal(3, 3, 1, 16, scale=0.5),
            "bias": np.zeros(16, np.float32),
            "dense": dense_params([16 * 4 * 4, 64, 10]),
        }

        def loss(p, x, y):
            h = jax.nn.relu(conv(x, p["kernel"], "SAME") + p["bias"])
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            return cross_entropy(dense(p["dense"], h.reshape(h.shape[0], -1)), y)

        data = (
            RNG.uniform(size=(DIGITS_BATCH, 8, 8, 1)).astype(np.float32),
            one_hot(RNG.integers(0, 10, DIGITS_BATCH), 10),
        )
        return training(params, loss, adam(DIGITS_LR), data)

    def latency():
        params = tree_map(jnp.asarray, dense_params([784, 512, 512, 10]))
        forward = jax.jit(dense)
        image = normal(1, 784)
        return lambda: np.asarray(forward(params, image))

    return {
        "matmul": matmul,
        "conv_forward": conv_forward,
        "conv_step": conv_step,
        "transformer": transformer,
        "moons32": lambda: moons(32),
        "moons1024": lambda: moons(1024),
        "mlp": mlp,
        "digits": digits,
        "latency": latency,
    }


def numpy_cases():
    def matmul():
        a, b = normal(1024, 1024), normal(1024, 1024)
        c = np.empty((1024, 1024), np.float32)
        return lambda: np.matmul(a, b, out=c)

    return {"matmul": matmul}


def cases(library):
    if library == "torch":
        return torch_cases(compiled=False)
    if library == "torch.compile":
        return torch_cases(compiled=True)
    if library == "jax":
        return jax_cases()
    if library == "numpy":
        return numpy_cases()
    raise SystemExit(f"unknown library {library}")


def set_threads(threads):
    """At most `threads` CPUs for this process: what every library honours (XLA's thread pool
    is sized from them)."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) > threads:
        os.sched_setaffinity(0, available[:threads])


def torch_threads(library, threads):
    """PyTorch's intra-op threads, when `library` is PyTorch's."""
    if library.startswith("torch"):
        import torch

        torch.set_num_threads(threads)


def first_step(library, cache, case, threads):
    if library == "torch.compile":
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    if library.startswith("torch"):
        torch_threads(library, threads)
    else:
        import jax

        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    start = time.perf_counter()
    cases(library)[case]()()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--libraries", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("command", choices=["time", "first"])
    parser.add_argument("args", nargs="+")
    options = parser.parse_args()
    set_threads(options.threads)
    for library in options.libraries.split(","):
        try:
            if options.command == "first":
                cache, case = options.args
                seconds = first_step(library, cache, case, options.threads)
            else:
                case, repeats = options.args
                torch_threads(library, options.threads)
                step = cases(library)[case]()
                seconds = best_median(step, int(repeats), options.rounds)
            print(library, seconds, flush=True)
        except Exception as e:  # one library failing leaves the others their figures
            message = str(e).strip().splitlines()
            print(f"{library} failed: {type(e).__name__}: {message[-1] if message else ''}", flush=True)


if __name__ == "__main__":
    main()
