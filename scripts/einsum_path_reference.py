"""Writes the reference costs that `crates/tensor/tests/einsum_path_reference.rs` compares the
contraction path search with: opt_einsum's `greedy` path (its steps and FLOPs) and, where it
finishes quickly, its `dp` path's FLOPs, for deterministic einsums of 11 to 60 operands.

Usage (from the repository root; needs opt_einsum 3.4, `pip install opt_einsum==3.4.0`):

    python3 scripts/einsum_path_reference.py > crates/tensor/tests/data/einsum_path_reference.txt

The cases: matrix chains of 25 and 51 matrices of varied sizes (half with no dimension of 1),
random trees, grids, rings, random
hypergraphs (labels held by two to four operands, size-1 labels, result labels, operands whose
labels are all in the result so that outer products are needed, repeated label sets), and
networks of several disconnected parts. Each comes from a `random.Random` seeded by its name, so
the file is the same on every run (the script re-runs itself with `PYTHONHASHSEED=0`, since `dp`
breaks ties in the order Python's sets iterate). No label is held by one operand alone and
missing from the result: the einsum summing it would sum it out of that operand before the path
search, and opt_einsum's `dp` counts such single-operand sums differently.

Output: `#` comment lines, then one case a line, fields separated by `|`:

    name|operands|result|sizes|greedy FLOPs|greedy steps|dp FLOPs

operands: each operand's labels separated by spaces, operands separated by commas (an operand of no
labels is empty); result: its labels separated by spaces; sizes: `label=size` separated by commas;
FLOPs: opt_einsum's `opt_cost` (per step, the points of its product space, twice when it sums a
label away), as an integer; greedy steps: `i-j` separated by commas, positions in the list of
pending operands (each step removes its two and appends its result: opt_einsum's linear
convention); dp FLOPs: `-` where `dp` is not run (trees, grids, hypergraphs and disconnected networks of
more than `DP_UP_TO` operands, hypergraphs of more than `DP_UP_TO_HYPERGRAPH`: on some of them
`dp` takes minutes).
"""

import os
import random
import sys

# `dp` runs on chains and rings, and on other networks of at most this many operands (it takes
# minutes on some trees and grids of 30 operands, and on some hypergraphs of 24).
DP_UP_TO = 25
DP_UP_TO_HYPERGRAPH = 20


def chain(rng, n, ones=True):
    """A chain of n matrices; `ones`: some dimensions may be 1."""
    choices = [2, 3, 5, 8, 13, 21, 34, 55, 89, 144] + ([1] if ones else [])
    sizes = [rng.choice(choices) for _ in range(n + 1)]
    labels = [f"c{i}" for i in range(n + 1)]
    operands = [[labels[i], labels[i + 1]] for i in range(n)]
    return operands, [labels[0], labels[n]], dict(zip(labels, sizes))


def with_open_labels(rng, operands, sizes, chance, prefix):
    """Gives each operand a result label with probability `chance`."""
    result = []
    for i, operand in enumerate(operands):
        if rng.random() < chance:
            label = f"{prefix}{i}"
            operand.append(label)
            result.append(label)
            sizes[label] = rng.randint(1, 4)
    return result


def tree(rng, n):
    operands = [[] for _ in range(n)]
    sizes = {}
    hubby = rng.random() < 0.5
    for i in range(1, n):
        # Half the trees attach new nodes near the root, making high-degree nodes.
        parent = rng.randrange(min(i, 3)) if hubby and rng.random() < 0.5 else rng.randrange(i)
        label = f"t{i}"
        operands[i].append(label)
        operands[parent].append(label)
        sizes[label] = rng.randint(1, 6)
    result = with_open_labels(rng, operands, sizes, 0.3, "o")
    return operands, result, sizes


def grid(rng, rows, cols):
    operands = [[] for _ in range(rows * cols)]
    sizes = {}
    for r in range(rows):
        for c in range(cols):
            here = r * cols + c
            for dr, dc in ((0, 1), (1, 0)):
                if r + dr < rows and c + dc < cols:
                    label = f"g{here}_{dr}"
                    operands[here].append(label)
                    operands[(r + dr) * cols + c + dc].append(label)
                    sizes[label] = rng.randint(2, 4)
    result = with_open_labels(rng, operands, sizes, 0.25, "p")
    return operands, result, sizes


def ring(rng, n):
    operands = [[] for _ in range(n)]
    sizes = {}
    for i in range(n):
        label = f"r{i}"
        operands[i].append(label)
        operands[(i + 1) % n].append(label)
        sizes[label] = rng.randint(2, 12)
    result = with_open_labels(rng, operands, sizes, 0.5, "q")
    return operands, result, sizes


def hypergraph(rng, n):
    operands = [[] for _ in range(n)]
    sizes = {}
    result = []
    for k in range(int(1.5 * n)):
        label = f"h{k}"
        holders = rng.sample(range(n), rng.choice([2, 2, 2, 3, 4]))
        for h in holders:
            operands[h].append(label)
        sizes[label] = rng.choice([1, 1, 2, 2, 3, 4, 5, 8])
        if rng.random() < 0.1:
            result.append(label)
    # Operands of result labels alone (outer products) and repeated label sets.
    for i in rng.sample(range(n), n // 10):
        label = f"x{i}"
        operands[i] = [label]
        sizes[label] = rng.randint(1, 5)
        result.append(label)
    for i in rng.sample(range(n), n // 12):
        operands[i] = list(operands[rng.randrange(n)])
    return operands, result, sizes


def parts(rng, n):
    """Two to four disconnected trees or chains: joined by outer products only."""
    count = rng.randint(2, 4)
    operands, result, sizes = [], [], {}
    for p in range(count):
        size = n // count + (p < n % count)
        if rng.random() < 0.5:
            ops, res, sz = tree(rng, size)
        else:
            ops, res, sz = chain(rng, size)
        rename = {label: f"{label}_{p}" for label in sz}
        operands += [[rename[label] for label in op] for op in ops]
        result += [rename[label] for label in res]
        sizes.update({rename[label]: s for label, s in sz.items()})
    return operands, result, sizes


def without_lone_labels(operands, result, sizes):
    """Puts every label one operand alone holds into the result; drops unused sizes."""
    counts = {}
    for operand in operands:
        for label in set(operand):
            counts[label] = counts.get(label, 0) + 1
    result = [label for label in dict.fromkeys(result) if label in counts]
    for label, count in sorted(counts.items()):
        if count == 1 and label not in result:
            result.append(label)
    operands = [sorted(set(op)) for op in operands]
    return operands, sorted(result), {label: sizes[label] for label in counts}


def cases():
    for seed in range(4):
        # Half the chains have no dimension of 1.
        yield f"chain25_{seed}", chain, (25, seed >= 2), True
        yield f"chain51_{seed}", chain, (51, seed >= 2), True
    for seed, n in enumerate([11, 12, 15, 20, 25, 30, 40, 50, 60, 60]):
        yield f"tree{n}_{seed}", tree, (n,), n <= DP_UP_TO
    for rows, cols in [(3, 4), (2, 7), (4, 4), (3, 6), (4, 5), (5, 5), (3, 10), (6, 6), (5, 8), (7, 8)]:
        yield f"grid{rows}x{cols}", grid, (rows, cols), rows * cols <= DP_UP_TO
    for seed, n in enumerate([11, 13, 16, 20, 24, 30, 37, 45, 52, 60]):
        yield f"ring{n}_{seed}", ring, (n,), True
    for seed, n in enumerate([11, 12, 13, 14, 16, 18, 20, 24, 28, 30, 35, 40, 45, 50, 55, 60] * 2):
        yield f"hyper{n}_{seed}", hypergraph, (n,), n <= DP_UP_TO_HYPERGRAPH
    for seed, n in enumerate([12, 18, 24, 33, 41, 60]):
        yield f"parts{n}_{seed}", parts, (n,), n <= DP_UP_TO


def main():
    import opt_einsum as oe

    print("# Generated by scripts/einsum_path_reference.py with opt_einsum", oe.__version__)
    print("# name|operands|result|sizes|greedy FLOPs|greedy steps|dp FLOPs")
    for name, make, args, run_dp in cases():
        rng = random.Random(name)
        operands, result, sizes = without_lone_labels(*make(rng, *args))
        symbols = {label: oe.get_symbol(i) for i, label in enumerate(sorted(sizes))}
        spec = ",".join("".join(symbols[label] for label in op) for op in operands)
        spec += "->" + "".join(symbols[label] for label in result)
        shapes = [tuple(sizes[label] for label in op) for op in operands]
        greedy_path, greedy = oe.contract_path(spec, *shapes, shapes=True, optimize="greedy")
        dp = "-"
        if run_dp:
            dp = str(oe.contract_path(spec, *shapes, shapes=True, optimize="dp")[1].opt_cost)
        fields = [
            name,
            ",".join(" ".join(op) for op in operands),
            " ".join(result),
            ",".join(f"{label}={size}" for label, size in sorted(sizes.items())),
            str(greedy.opt_cost),
            ",".join(f"{i}-{j}" for i, j in greedy_path),
            dp,
        ]
        print("|".join(fields), flush=True)


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "PYTHONHASHSEED": "0"})
    main()
