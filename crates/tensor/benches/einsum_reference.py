"""The reference side of `cargo bench -p rcannl-tensor --bench einsum`.

Reads one expression a line on stdin, `name|spec|sizes|steps`: numpy notation, `label=size`
pairs joined by commas, and our path's pairwise steps as `i-j` joined by commas (positions in the
pending list, each step removing its two operands and appending its result: opt_einsum's linear
convention). Prints, per expression and per flag given:

- `--costs`: `cost NAME OURS OPTIMAL METHOD GREEDY PRESUMMED`, every figure in opt_einsum's cost
  model (`opt_cost`: per step, the points of its product space times the number of terms less one,
  plus one when an index is summed): OURS is the cost of our path given to
  `opt_einsum.contract_path` explicitly, OPTIMAL that of its `optimal` path (`dp` beyond
  `OPTIMAL_UP_TO` operands, METHOD says which), GREEDY that of its `greedy` path, and PRESUMMED the
  cost of our single-operand sums plus `optimal`'s (or `dp`'s) path over the expression they leave.
  Our path first sums, out of each operand, the labels only it has (and the result lacks); those
  sums enter the explicit path as single-operand steps `(i,)`.
- `--check`: `check NAME L2 WEIGHTED`: the result computed in float64, its 2-norm and its sum
  weighted by `((k * 5) % 11) / 11 - 0.5` at flat position k.
- `--time`: `time NAME SECONDS`: the median time of `numpy.einsum(spec, *operands,
  optimize=True)` over float32 operands (repeats chosen so that one expression takes about
  `BUDGET` seconds, at least 3), and `view NAME` first when numpy's result is a view of an operand
  (a permutation or a diagonal: nothing is copied).

Operand o holds `((k * 7 + o * 3) % 13) / 13 - 0.5` at flat position k, as on our side. A failure
on one expression prints `error NAME MESSAGE` and the others go on.
"""

import statistics
import sys
import time

import numpy as np

OPTIMAL_UP_TO = 8
BUDGET = 0.25


def parse(line):
    name, spec, sizes, steps = line.rstrip("\n").split("|")
    sizes = {k: int(v) for k, v in (p.split("=") for p in sizes.split(","))}
    steps = [tuple(int(x) for x in s.split("-")) for s in steps.split(",") if s]
    return name, spec, sizes, steps


def terms(spec):
    """The operands' label strings and the result's (numpy's implicit result when none is given)."""
    if "->" in spec:
        inputs, output = spec.split("->")
    else:
        inputs = spec
        counts = {}
        for c in inputs.replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        output = "".join(sorted(c for c, n in counts.items() if n == 1))
    return inputs.split(","), output


def operands(spec, sizes, dtype):
    inputs, _ = terms(spec)
    arrays = []
    for o, labels in enumerate(inputs):
        shape = tuple(sizes[c] for c in labels)
        n = int(np.prod(shape, dtype=np.int64))
        values = ((np.arange(n, dtype=np.int64) * 7 + o * 3) % 13) / 13 - 0.5
        arrays.append(values.astype(dtype).reshape(shape))
    return arrays


def lone_labels(inputs, output):
    """Per operand, the labels only it has and the result lacks (none with a single operand)."""
    if len(inputs) == 1:
        return [set()]
    return [
        {c for c in labels if c not in output and all(c not in other for j, other in enumerate(inputs) if j != i)}
        for i, labels in enumerate(inputs)
    ]


def explicit_path(inputs, output, steps):
    """Our path in opt_einsum's linear form: the single-operand sums first, then our steps."""
    import opt_einsum as oe

    n = len(inputs)
    if n == 1:
        return [(0,)]
    ssa = []
    pending = list(range(n))
    next_id = n
    for i, lone in enumerate(lone_labels(inputs, output)):
        if lone:
            ssa.append((pending[i],))
            pending[i] = next_id
            next_id += 1
    for i, j in steps:
        ssa.append((pending[i], pending[j]))
        pending = [p for k, p in enumerate(pending) if k not in (i, j)] + [next_id]
        next_id += 1
    return oe.paths.ssa_to_linear(ssa)


def cost(spec, shapes, optimize):
    import opt_einsum as oe

    return oe.contract_path(spec, *shapes, shapes=True, optimize=optimize)[1].opt_cost


def costs(name, spec, sizes, steps):
    inputs, output = terms(spec)
    full = f"{','.join(inputs)}->{output}"
    shapes = [tuple(sizes[c] for c in t) for t in inputs]
    method = "optimal" if len(inputs) <= OPTIMAL_UP_TO else "dp"
    ours = cost(full, shapes, explicit_path(inputs, output, steps))
    best = cost(full, shapes, method)
    greedy = cost(full, shapes, "greedy")
    # The expression our single-operand sums leave, and the sums' own cost.
    lone = lone_labels(inputs, output)
    presum = 0
    left = []
    for labels, alone in zip(inputs, lone):
        if alone:
            presum += cost(f"{labels}->{''.join(c for c in dict.fromkeys(labels) if c not in alone)}",
                           [tuple(sizes[c] for c in labels)], [(0,)])
            left.append("".join(c for c in dict.fromkeys(labels) if c not in alone))
        else:
            left.append(labels)
    if len(left) == 1:
        presummed = presum + cost(f"{left[0]}->{output}", [tuple(sizes[c] for c in left[0])], [(0,)])
    else:
        presummed = presum + cost(f"{','.join(left)}->{output}", [tuple(sizes[c] for c in t) for t in left], method)
    print("cost", name, ours, best, method, greedy, presummed, flush=True)


def check(name, spec, sizes):
    result = np.asarray(np.einsum(spec, *operands(spec, sizes, np.float64), optimize=True), dtype=np.float64).ravel()
    weights = (np.arange(result.size) * 5 % 11) / 11 - 0.5
    print("check", name, repr(float(np.sqrt(np.sum(result * result)))), repr(float(np.dot(result, weights))), flush=True)


def timed(name, spec, sizes):
    arrays = operands(spec, sizes, np.float32)
    run = lambda: np.einsum(spec, *arrays, optimize=True)
    start = time.perf_counter()
    result = run()
    once = time.perf_counter() - start
    if any(np.shares_memory(result, a) for a in arrays):
        print("view", name, flush=True)
    repeats = max(3, min(200, int(BUDGET / max(once, 1e-6))))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print("time", name, repr(statistics.median(times)), flush=True)


def main():
    flags = set(sys.argv[1:])
    for line in sys.stdin:
        if not line.strip():
            continue
        name, spec, sizes, steps = parse(line)
        try:
            if "--costs" in flags:
                costs(name, spec, sizes, steps)
            if "--check" in flags:
                check(name, spec, sizes)
            if "--time" in flags:
                timed(name, spec, sizes)
        except Exception as e:  # one expression's failure does not stop the others
            print("error", name, f"{type(e).__name__}: {e}".replace("\n", " "), flush=True)


main()
