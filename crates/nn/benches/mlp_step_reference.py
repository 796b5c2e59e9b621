"""The reference side of `cargo bench -p rcannl-nn --bench mlp_step`: the moons MLP
(2 -> 16 -> 16 -> 1, relu, mean hinge loss) trained in hand-written numpy and, with `--jax`, in JAX
(jit, CPU), timed the way the harness times rcannl. Cases come on the command line:

  step:BATCH:REPEATS    median seconds of one SGD step (lr 0.1, no momentum) on a fixed batch
  epochs:BATCH:EPOCHS   examples/s over EPOCHS epochs of 32 batches, the loss read after every
                        step, momentum 0.9 and a cosine learning-rate schedule (one untimed
                        epoch first)

Prints `LIBRARY CASE VALUE` per line, numpy's cases first."""
import math
import statistics
import sys
import time

import numpy as np

WIDTHS = (16, 16, 1)
NOISE = 0.1
DATA_SEED = 1
PARAM_SEED = 1
LR = 0.1
MOMENTUM = 0.9
BATCHES = 32
LR_FLOOR = 0.005
WARMUP = 5


def moons(n, seed):
    """Two interleaving half circles with Gaussian noise, labels in {-1, 1}, shuffled: the
    distribution of `rcannl_nn::data::moons` (even points on the upper arc)."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = np.arange(n) % 2 == 0
    x = np.where(
        upper[:, None],
        np.stack([np.cos(t), np.sin(t)], 1),
        np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1),
    )
    x = x + NOISE * rng.standard_normal((n, 2))
    y = np.where(upper, 1.0, -1.0)
    order = rng.permutation(n)
    return x[order].astype(np.float32), y[order].astype(np.float32)


def init_params():
    """Weights uniform in +-sqrt(3 / fan-in), biases zero: rcannl's default initialization."""
    rng = np.random.default_rng(PARAM_SEED)
    params, fan_in = [], 2
    for width in WIDTHS:
        bound = math.sqrt(3 / fan_in)
        params.append(rng.uniform(-bound, bound, (fan_in, width)).astype(np.float32))
        params.append(np.zeros(width, np.float32))
        fan_in = width
    return params


def cosine(step, total):
    """`Schedule::Cosine { peak: LR, floor: LR_FLOOR, warmup: BATCHES }` at `step` of `total`."""
    if step < BATCHES:
        return LR * (step + 1) / BATCHES
    progress = min((step - BATCHES) / max(total - BATCHES, 1), 1.0)
    return LR_FLOOR + 0.5 * (LR - LR_FLOOR) * (1 + math.cos(math.pi * progress))


def median_seconds(step, repeats):
    for _ in range(WARMUP):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def examples_per_second(train_step, batch, epochs):
    """Runs `train_step(b, lr)` (returning the batch loss) over one untimed epoch, then over
    `epochs` timed ones."""

    def run(epochs):
        total = epochs * BATCHES
        for n in range(total):
            loss = float(train_step(n % BATCHES, cosine(n, total)))
            if not math.isfinite(loss):
                raise SystemExit(f"training stopped: the loss is {loss} at step {n}")

    run(1)
    start = time.perf_counter()
    run(epochs)
    return epochs * BATCHES * batch / (time.perf_counter() - start)


# numpy: forward and backward by hand.


def numpy_grads(p, x, y):
    """The margins `1 - y f(x)` and the gradients of the mean hinge loss."""
    w1, b1, w2, b2, w3, b3 = p
    z1 = x @ w1 + b1
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w2 + b2
    h2 = np.maximum(z2, 0)
    margins = 1 - y * (h2 @ w3 + b3)[:, 0]
    g_out = (-y * (margins > 0) / len(y))[:, None]
    g_z2 = (g_out @ w3.T) * (z2 > 0)
    g_z1 = (g_z2 @ w2.T) * (z1 > 0)
    grads = [
        x.T @ g_z1,
        g_z1.sum(0),
        h1.T @ g_z2,
        g_z2.sum(0),
        h2.T @ g_out,
        g_out.sum(0),
    ]
    return margins, grads


def numpy_step(batch, repeats):
    x, y = moons(batch, DATA_SEED)
    params = init_params()

    def step():
        nonlocal params
        _, grads = numpy_grads(params, x, y)
        params = [w - LR * g for w, g in zip(params, grads)]

    return median_seconds(step, repeats)


def numpy_epochs(batch, epochs):
    x, y = moons(BATCHES * batch, DATA_SEED)
    xs, ys = x.reshape(BATCHES, batch, 2), y.reshape(BATCHES, batch)
    params = init_params()
    velocities = [np.zeros_like(w) for w in params]

    def train_step(b, lr):
        nonlocal params, velocities
        margins, grads = numpy_grads(params, xs[b], ys[b])
        velocities = [MOMENTUM * v + g for v, g in zip(velocities, grads)]
        params = [w - np.float32(lr) * v for w, v in zip(params, velocities)]
        return np.maximum(margins, 0).mean()

    return examples_per_second(train_step, batch, epochs)


# JAX: the same model, differentiated by jax.grad and compiled by jax.jit.


def jax_cases():
    import jax
    import jax.numpy as jnp

    def loss_of(p, x, y):
        w1, b1, w2, b2, w3, b3 = p
        h = jax.nn.relu(x @ w1 + b1)
        h = jax.nn.relu(h @ w2 + b2)
        return jnp.mean(jax.nn.relu(1 - y * (h @ w3 + b3)[:, 0]))

    @jax.jit
    def sgd_step(p, x, y):
        grads = jax.grad(loss_of)(p, x, y)
        return [w - LR * g for w, g in zip(p, grads)]

    @jax.jit
    def momentum_step(p, v, xs, ys, b, lr):
        loss, grads = jax.value_and_grad(loss_of)(p, xs[b], ys[b])
        v = [MOMENTUM * a + g for a, g in zip(v, grads)]
        p = [w - lr * a for w, a in zip(p, v)]
        return p, v, loss

    def step(batch, repeats):
        x, y = (jnp.asarray(a) for a in moons(batch, DATA_SEED))
        params = [jnp.asarray(w) for w in init_params()]

        def one():
            nonlocal params
            params = jax.block_until_ready(sgd_step(params, x, y))

        return median_seconds(one, repeats)

    def epochs(batch, count):
        x, y = moons(BATCHES * batch, DATA_SEED)
        xs = jnp.asarray(x.reshape(BATCHES, batch, 2))
        ys = jnp.asarray(y.reshape(BATCHES, batch))
        params = [jnp.asarray(w) for w in init_params()]
        velocities = [jnp.zeros_like(w) for w in params]

        def train_step(b, lr):
            nonlocal params, velocities
            params, velocities, loss = momentum_step(params, velocities, xs, ys, b, lr)
            return loss

        return examples_per_second(train_step, batch, count)

    return step, epochs


def run(library, step, epochs, cases):
    for case in cases:
        kind, batch, count = case.split(":")
        measure = {"step": step, "epochs": epochs}.get(kind)
        if measure is None:
            raise SystemExit(f"unknown case {case}")
        print(library, case, measure(int(batch), int(count)), flush=True)


def main():
    args = sys.argv[1:]
    with_jax = "--jax" in args
    cases = [a for a in args if a != "--jax"]
    run("numpy", numpy_step, numpy_epochs, cases)
    if with_jax:
        run("jax", *jax_cases(), cases)


if __name__ == "__main__":
    main()
