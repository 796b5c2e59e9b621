#!/usr/bin/env python3
"""Runs the einsum cases of numpy's, opt_einsum's, PyTorch's and JAX's test suites through the
`rcannl einsum --numpy` command and through numpy itself, and prints how often they agree.

    cargo build --release -p rcannl-cli
    python3 scripts/einsum_suites.py                       # every suite
    python3 scripts/einsum_suites.py numpy jax --backend interp --jobs 2 --show 5

The cases are `crates/tensor/tests/data/einsum_suites/<suite>.tsv` (their README gives the
format and where they come from). For each case and each dtype its suite ran it in, the operands
are written as .npy files of that dtype holding random values (floats in [-1, 1); for integer
dtypes -1, 0, 1, or 0, 1 when unsigned, so that numpy's arithmetic in the operands' dtype cannot
overflow; random booleans), the command

    rcannl einsum --numpy EQUATION x0.npy x1.npy ... -o out.npy [--backend B]

runs on them, and numpy.einsum computes the same equation on the same arrays (labels outside
numpy's a-z, A-Z, such as opt_einsum's Greek ones, renamed to ASCII letters in the same order).
Each run is one of:

    agree                numpy's shape, values and dtype
    agree but dtype      numpy's shape and values, another dtype than numpy's result
    wrong shape          a result of another shape
    wrong values         numpy's shape, a cell off by more than rounding: relative to the sum of
                         the absolute values of the terms summed into it, 1e-9 for a float64 (or
                         long double) result, 1e-3 for float32 (numpy sums in it), for float16
                         half a float16 unit per term (numpy rounds each partial sum to float16
                         in some layouts, sums in float32 in others),
                         nothing for integers and booleans
    input dtype refused  exit status 1 because the command does not read the operands' dtype
    refused valid        exit status 1 on a case numpy computes, for another reason (the
                         message's first line is shown)
    refused invalid      exit status 1 on a case the suite expects to raise: agreement
    accepted invalid     a result for a case the suite expects to raise
    crashed              any other exit status (101 is a panic), or no answer within --timeout

and the script prints, per suite, the count of each and up to --show examples of each kind of
disagreement. It needs numpy and a built command; it is not part of CI, which has no numpy.
"""

import argparse
import collections
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "crates", "tensor", "tests", "data", "einsum_suites")
SUITES = ["numpy", "opt_einsum", "pytorch", "jax"]
AGREEMENTS = ("agree", "refused invalid")
KINDS = ("agree", "agree but dtype", "wrong shape", "wrong values", "input dtype refused",
         "refused valid", "refused invalid", "accepted invalid", "crashed")
ASCII_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def load(suite):
    """(line, equation, shapes, valid, dtypes) per case of a suite's file."""
    cases = []
    with open(os.path.join(DATA, suite + ".tsv"), encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            equation, shapes, verdict, dtypes = line.split("\t")
            shapes = [() if s == "()" else tuple(int(d) for d in s.split(",")) for s in shapes.split(";")] \
                if shapes else []
            cases.append((number, equation, shapes, verdict == "valid", dtypes.split(",")))
    return cases


def operand(rng, shape, dtype):
    """Random values of `dtype` in `shape`, small enough that numpy's own sums cannot overflow."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-1, 2, size=shape).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 2, size=shape).astype(dtype)
    return rng.integers(0, 2, size=shape).astype(bool)


def numpy_equation(equation):
    """The equation with its labels renamed to ASCII letters in code point order when any is
    outside numpy's alphabet (a renaming in order keeps the implicit result's order)."""
    labels = sorted({c for c in equation if c.isalpha()})
    if all(c in ASCII_LETTERS for c in labels):
        return equation
    rename = dict(zip(labels, sorted(ASCII_LETTERS)))
    return "".join(rename.get(c, c) for c in equation)


def tolerance(dtype, terms):
    """Relative to the sum of the absolute values of a cell's terms. numpy sums float16 in float32
    for some layouts and rounds every partial sum to float16 for others (`'ij,jk'` accumulates
    into the float16 result), so a float16 cell may be off by half a float16 unit per term."""
    if dtype.kind == "f" and dtype.itemsize == 2:
        return np.maximum(1e-3, (terms + 1) * 2.0**-11)
    if dtype.kind == "f":
        return 1e-3 if dtype.itemsize <= 4 else 1e-9
    return 0.0


def run_case(cli, backend, timeout, suite, case, dtype_token):
    """One case in one dtype: (kind, detail)."""
    number, equation, shapes, valid, _ = case
    dtypes = dtype_token.split(";")
    if len(dtypes) == 1:
        dtypes = dtypes * len(shapes)
    rng = np.random.default_rng(zlib.crc32(f"{suite}:{number}:{dtype_token}".encode()))
    arrays = [operand(rng, shape, dtype) for shape, dtype in zip(shapes, dtypes)]
    with tempfile.TemporaryDirectory(prefix="einsum_suites_") as folder:
        paths = []
        for k, array in enumerate(arrays):
            paths.append(os.path.join(folder, f"x{k}.npy"))
            np.save(paths[-1], array)
        out = os.path.join(folder, "out.npy")
        command = [cli, "einsum", "--numpy", equation, *paths, "-o", out]
        if backend:
            command += ["--backend", backend]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "crashed", f"no answer within {timeout} s"
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        message = message[0] if message else ""
        if done.returncode not in (0, 1):
            return "crashed", f"exit status {done.returncode}: {message}"
        if not valid:
            if done.returncode == 1:
                return "refused invalid", message
            return "accepted invalid", f"result of shape {np.load(out).shape}"
        if done.returncode == 1:
            if "unsupported dtype" in message:
                return "input dtype refused", message.replace(folder + os.sep, "")
            return "refused valid", message
        ours = np.load(out)
    expected = np.asarray(np.einsum(numpy_equation(equation), *arrays))
    if ours.shape != expected.shape:
        return "wrong shape", f"{ours.shape} instead of {expected.shape}"
    magnitude = np.asarray(np.einsum(numpy_equation(equation), *[np.abs(a.astype(np.float64)) for a in arrays]))
    error = np.abs(ours.astype(np.float64) - expected.astype(np.float64))
    terms = np.asarray(np.einsum(numpy_equation(equation), *[np.ones(a.shape) for a in arrays]))
    wrong = np.flatnonzero(error > tolerance(expected.dtype, terms) * magnitude)
    if wrong.size:
        at = wrong[0]
        return "wrong values", (f"cell {at}: {ours.reshape(-1)[at]!r} instead of {expected.reshape(-1)[at]!r} "
                                f"({wrong.size} of {error.size} cells off)")
    if ours.dtype != expected.dtype:
        return "agree but dtype", f"{ours.dtype} instead of {expected.dtype}"
    return "agree", ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help=f"suites to run, of {', '.join(SUITES)} (all when none is named)")
    parser.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "rcannl"),
                        help="the rcannl command (default: target/release/rcannl)")
    parser.add_argument("--backend", choices=["cc", "interp"],
                        help="passed to the command (default: the command's own choice)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run (default 300)")
    parser.add_argument("--show", type=int, default=3,
                        help="examples printed per kind of disagreement (default 3)")
    args = parser.parse_args()
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown:
        parser.error(f"unknown suites {unknown}; the suites are {SUITES}")
    if not os.access(args.cli, os.X_OK):
        sys.exit(f"{args.cli} is not an executable; build it with cargo build --release -p rcannl-cli")
    all_agree = True
    for suite in args.suites or SUITES:
        cases = load(suite)
        runs = [(case, token) for case in cases for token in case[4]]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(lambda run: run_case(args.cli, args.backend, args.timeout, suite, *run),
                                    runs))
        counts = collections.Counter(kind for kind, _ in results)
        agreed = sum(counts[k] for k in AGREEMENTS)
        all_agree &= agreed == len(runs)
        print(f"{suite}: {len(cases)} cases, {len(runs)} runs (case x dtype): {agreed} agree with numpy")
        for kind in KINDS:
            if counts[kind]:
                print(f"  {kind}: {counts[kind]}")
        for kind in KINDS:
            if kind in AGREEMENTS:
                continue
            examples, seen = [], set()
            for (case, token), (k, detail) in zip(runs, results):
                # One example per distinct detail, so that a cause repeated over dtypes shows once.
                if k == kind and detail not in seen:
                    seen.add(detail)
                    examples.append((case, token, detail))
            for (number, equation, shapes, _, _), token, detail in examples[:args.show]:
                print(f"    {kind}: line {number} {equation!r} {shapes} {token}: {detail}")
    sys.exit(0 if all_agree else 1)


if __name__ == "__main__":
    main()
