"""The numpy side of `cargo bench -p rcannl-backends --bench cpu`: times each case named on the
command line the way the harness times its own, and prints `case median_seconds` per line."""
import statistics
import sys
import time

import numpy as np


def median_time(run, repeats):
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def case(name):
    kind, *sizes = name.split(":")
    sizes = [int(s) for s in sizes]
    rng = np.random.default_rng(0)
    if kind == "matmul":
        (n,) = sizes
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=c), max(10, min(100, int(2e10 / n**3)))
    if kind == "bmm":
        batch, n = sizes
        a = rng.standard_normal((batch, n, n), dtype=np.float32)
        b = rng.standard_normal((batch, n, n), dtype=np.float32)
        c = np.empty((batch, n, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=c), 10
    if kind == "relu_add":
        (n,) = sizes
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        c = np.empty(n, dtype=np.float32)

        def run():
            np.add(a, b, out=c)
            np.maximum(c, 0, out=c)

        return run, 20
    if kind == "memcpy":
        (n,) = sizes
        a = rng.standard_normal(n, dtype=np.float32)
        c = np.empty(n, dtype=np.float32)
        return lambda: np.copyto(c, a), 20
    if kind in ("exp", "tanh", "pow"):
        (n,) = sizes
        a = rng.uniform(-1.0, 1.0, n).astype(np.float32)
        b = rng.uniform(-2.0, 2.0, n).astype(np.float32)
        c = np.empty(n, dtype=np.float32)
        if kind == "pow":
            base = np.abs(a)
            return lambda: np.power(base, b, out=c), 50
        function = getattr(np, kind)
        return lambda: function(a, out=c), 50
    if kind == "conv2d":
        batch, channels, size, out_channels = sizes
        x = rng.standard_normal((batch, channels, size + 2, size + 2), dtype=np.float32)
        w = rng.standard_normal((out_channels, channels, 3, 3), dtype=np.float32)

        def run():
            # im2col as numpy users write it: a strided window view contracted with the kernel.
            windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
            return np.einsum("bchwij,ocij->bohw", windows, w, optimize=True)

        return run, 3
    # A case numpy has no counterpart for (a training step): no figure.
    return None


for name in sys.argv[1:]:
    timed = case(name)
    if timed is not None:
        run, repeats = timed
        print(name, median_time(run, repeats), flush=True)
