#!/usr/bin/env python3
"""sciproxy.parstack against pyrocko.parstack.parstack, side by side in one process.

Both are called the way users call them (result=None, a fresh output per call), at the same
thread count (nparallel), on the same inputs. For each size, dtype and method: sciproxy's output
is verified against pyrocko's (relative L2 norm) — these calls are also the warm-up — then
--reps repetitions alternate the two implementations (ABAB..., so that drifts in machine load
hit both); the table gives median, min and max seconds, GMAC/s (multiply-adds: the overlap of
every weighted trace with the output window, computed exactly) and the ratio of the medians.

Sizes (docs/kernels/parstack.md):
  a  30 traces x 10000 shift sets x 6000 samples, shifts in [-100, 100]  (pyrocko's CUDA benchmark)
  b  100 traces x 100 shift sets x 30000 samples, shifts in [-2000, -50] (qseek: 5 min at 100 Hz)

    python bench/parstack_vs_pyrocko.py --sizes a b --dtypes float32 float64 --reps 5 --json out.json

pyrocko's default dtype is float64; its C code computes in the dtype asked for, as sciproxy does.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import socket
import statistics
import sys

import numpy as np

from benchlib import cpu_model, git_commit, rel_l2, timed, write_json_atomically

SIZES = {
    "a": dict(ntraces=30, nshifts=10000, nsamples=6000, shifts=(-100, 100),
              note="pyrocko's CUDA benchmark"),
    "b": dict(ntraces=100, nshifts=100, nsamples=30000, shifts=(-2000, -50),
              note="qseek: 100 stations x 100 nodes x 5 min at 100 Hz"),
}
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def make_problem(size: str, dtype: str, seed: int):
    spec = SIZES[size]
    rng = np.random.default_rng(seed)
    n, nshifts, nsamples = spec["ntraces"], spec["nshifts"], spec["nsamples"]
    arrays = [rng.normal(size=nsamples).astype(dtype) for _ in range(n)]
    offsets = np.zeros(n, dtype=np.int32)
    lo, hi = spec["shifts"]
    shifts = rng.integers(lo, hi + 1, size=(nshifts, n)).astype(np.int32)
    weights = rng.uniform(0.5, 1.0, size=(nshifts, n)).astype(dtype)
    return arrays, offsets, shifts, weights


def multiply_adds(arrays, offsets, shifts, weights) -> int:
    """Sum over shift sets and traces of the overlap with the (default) output window."""
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    starts = offsets.astype(np.int64)[None, :] + shifts.astype(np.int64)
    ends = starts + lengths[None, :]
    first, last = starts.min(), ends.max()  # pyrocko's default window
    overlap = np.clip(np.minimum(ends, last) - np.maximum(starts, first), 0, None)
    return int(overlap[weights != 0].sum())








def environment(args, sciproxy, pyrocko) -> dict:
    info = sciproxy.info()
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": args.threads,
        "load_average_at_start": list(os.getloadavg()),
        "omp_env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_"))},
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pyrocko": getattr(pyrocko, "__version__", "unknown"),
        "sciproxy": sciproxy.__version__,
        "sciproxy_build": {k: info[k] for k in ("git_commit", "compiler", "build_type", "build_flags",
                                                "backends", "cuda_devices")},
        "sciproxy_device": sciproxy.resolve_impl(args.impl),
        "git_commit": git_commit(),
    }




def stats(seconds, macs):
    median = statistics.median(seconds)
    return {"seconds": seconds, "median": median, "min": min(seconds), "max": max(seconds),
            "gmacs_per_s": macs / median / 1e9}


def run_case(size, dtype, method, args, sciproxy, pyrocko_parstack):
    arrays, offsets, shifts, weights = make_problem(size, dtype, args.seed)
    macs = multiply_adds(arrays, offsets, shifts, weights)
    dt = np.dtype(dtype)

    def ours():
        # Method 1: pyrocko's C code clamps the maximum at 0; compute the same thing.
        return sciproxy.parstack(arrays, offsets, shifts, weights, method, nparallel=args.threads,
                                 dtype=dt, impl=args.impl, clamp_max_at_zero=(method == 1))[0]

    def theirs():
        return pyrocko_parstack.parstack(arrays, offsets, shifts, weights, method,
                                         nparallel=args.threads, dtype=dt, impl="openmp")[0]

    # Verification; these calls are the warm-up too.
    t_ours, out = timed(ours)
    t_theirs, ref = timed(theirs)
    error = rel_l2(out, ref)
    passed = error <= TOLERANCE[dtype] and out.shape == ref.shape
    del out, ref
    for _ in range(args.warmup - 1):
        ours(), theirs()

    seconds = {"sciproxy": [], "pyrocko": []}
    for rep in range(args.reps):
        order = [("sciproxy", ours), ("pyrocko", theirs)]
        for name, call in (order if rep % 2 == 0 else order[::-1]):
            t, out = timed(call)
            del out
            seconds[name].append(t)

    spec = SIZES[size]
    record = {
        "size": size, "ntraces": spec["ntraces"], "nshifts": spec["nshifts"],
        "nsamples": spec["nsamples"], "shift_range": list(spec["shifts"]), "note": spec["note"],
        "dtype": dtype, "method": method, "multiply_adds": macs,
        "verification": {"rel_l2": error, "tolerance": TOLERANCE[dtype], "pass": bool(passed),
                         "warmup_seconds": {"sciproxy": t_ours, "pyrocko": t_theirs}},
        "sciproxy": stats(seconds["sciproxy"], macs),
        "pyrocko": stats(seconds["pyrocko"], macs),
    }
    record["ratio_sciproxy_over_pyrocko"] = record["sciproxy"]["median"] / record["pyrocko"]["median"]
    return record


def print_row(r):
    label = f"{r['size']} {r['ntraces']}x{r['nshifts']}x{r['nsamples']}"
    verdict = "pass" if r["verification"]["pass"] else "FAIL"
    for name in ("sciproxy", "pyrocko"):
        s = r[name]
        print(f"{label:<20} {r['dtype']:<8} {r['method']:>3}  {name:<9} {s['median']:>9.4f} "
              f"{s['min']:>9.4f} {s['max']:>9.4f} {s['gmacs_per_s']:>8.2f}", end="")
        if name == "sciproxy":
            print(f"   {r['ratio_sciproxy_over_pyrocko']:>6.3f}  {1 / r['ratio_sciproxy_over_pyrocko']:>6.2f}x  "
                  f"{r['verification']['rel_l2']:.1e} {verdict}")
        else:
            print()
    sys.stdout.flush()




def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["a", "b"])
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "float64"], default=["float32", "float64"])
    parser.add_argument("--methods", nargs="+", type=int, choices=[0, 1], default=[0])
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions of each (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls of each first (default 1)")
    parser.add_argument("--threads", type=int, default=2, help="nparallel for both (default 2)")
    parser.add_argument("--impl", default="cpu", help="sciproxy device: cpu (default), cuda, cuda:N, ...")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="FILE", help="write the results and the environment as JSON")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.warmup < 1 or args.threads < 1:
        parser.error("--reps, --warmup and --threads must be at least 1")

    import sciproxy
    try:
        import pyrocko
        from pyrocko import parstack as pyrocko_parstack
    except ImportError as error:
        print(f"parstack_vs_pyrocko: pyrocko is needed for this comparison ({error}); "
              "pip install pyrocko (or sciproxy[compare])", file=sys.stderr)
        return 2

    env = environment(args, sciproxy, pyrocko)
    print(f"# {env['cpu_model']}, {env['cpu_count']} CPUs, nparallel={args.threads}, "
          f"load {env['load_average_at_start'][0]:.2f}; sciproxy {env['sciproxy']} "
          f"on {env['sciproxy_device']}, pyrocko {env['pyrocko']} (openmp), numpy {env['numpy']}; "
          f"{args.reps} reps after {args.warmup} warm-up, alternating")
    print(f"{'size':<20} {'dtype':<8} {'m':>3}  {'impl':<9} {'median_s':>9} {'min_s':>9} {'max_s':>9} "
          f"{'GMAC/s':>8}   {'ratio':>6}  {'speedup':>7}  {'rel_l2':>7}")
    results = []
    for size in args.sizes:
        for dtype in args.dtypes:
            for method in args.methods:
                record = run_case(size, dtype, method, args, sciproxy, pyrocko_parstack)
                results.append(record)
                print_row(record)
    env["load_average_at_end"] = list(os.getloadavg())
    print("# ratio = sciproxy median / pyrocko median (< 1: sciproxy faster); speedup = 1 / ratio; "
          f"load at end {env['load_average_at_end'][0]:.2f}")

    if args.json:
        config = {k: getattr(args, k) for k in ("sizes", "dtypes", "methods", "reps", "warmup", "threads",
                                                "impl", "seed")}
        write_json_atomically(args.json, {"benchmark": "parstack_vs_pyrocko", "environment": env,
                                          "config": config, "results": results})
        print(f"# wrote {args.json}")
    failed = [r for r in results if not r["verification"]["pass"]]
    if failed:
        print(f"parstack_vs_pyrocko: {len(failed)} case(s) did not match pyrocko within tolerance",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
