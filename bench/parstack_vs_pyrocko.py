#!/usr/bin/env python3
"""sciproxy.parstack against pyrocko.parstack.parstack, side by side in one process.

Both are called the way users call them (result=None, a new output per call, dropped before the
next call), at the same thread count (nparallel), on the same inputs. sciproxy writes a method-0
stack of 4 MB and more into the memory of the last dropped one (sciproxy.stack.
release_cached_results), as it does in a user's loop over time windows; pyrocko maps and clears
fresh pages for every call. The warm-up call (`warmup_seconds` in the JSON) is sciproxy's call on
fresh memory. For each size, shift spread, dtype and method:
sciproxy's output is verified against pyrocko's (relative L2 norm) -- these calls are also the
warm-up -- then --reps repetitions alternate the two implementations (ABAB..., so that drifts in
machine load hit both). One table: medians, GMAC/s (multiply-adds: the overlap of every weighted
trace with the output window, computed exactly), the speed-up (pyrocko median / sciproxy median),
and sciproxy's fraction of this machine's roofline for the operation (from sciproxy's cached
ceilings, `sciproxy roofline`; the same work model as the library). The slowest row is marked.

Sizes (docs/kernels/parstack.md):
  a  30 traces x 3000 shift sets x 6000 samples
  b  30 traces x 10000 shift sets x 6000 samples   (pyrocko's CUDA benchmark)
  c  100 traces x 100 shift sets x 30000 samples   (qseek: 100 stations x 100 nodes x 5 min at 100 Hz)

Shifts (--shift-model): `moveout` (default) are the travel-time moveouts of a station network:
stations at random in a square, candidate sources on a grid over it, shifts proportional to the
distance and scaled to span +-spread samples, so neighbouring shift sets differ a little and the
traces start and stop all over the window; `uniform` draws every shift independently in
[-spread, spread] (the least cache-friendly case).

    python bench/parstack_vs_pyrocko.py --sizes a b c --spreads 10 100 500 2000 5000 \
        --methods 0 1 --dtypes float32 float64 --reps 5 --json out.json

pyrocko's default dtype is float64; its C code computes in the dtype asked for, as sciproxy does.

pyrocko's wheel brings its own OpenMP runtime, so this process holds two. By default their idle
workers spin for a while after each parallel region; with the calls alternating, the spinning
workers of one library take the cores from the other's next call (measured here: 11.6 ms vs
16 ms for sciproxy's method 1, less for pyrocko's longer calls). The script therefore sets
OMP_WAIT_POLICY=passive for both unless the environment sets it.

numpy's OpenBLAS has a third pool of threads, which busy-wait (calling sched_yield) for a while
after each BLAS call; the verification's norm is one. Calls that ran inside that window took
twice their time, with system time and no page faults (`usage` in the JSON): size c, float32,
method 0, 10-11 ms or 20-24 ms, and pyrocko's method 1 up to 45 ms instead of 21 after a large
np.dot. Neither system calls BLAS, so the script sets OPENBLAS_NUM_THREADS=1 unless the
environment sets it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # before either OpenMP runtime starts
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy starts OpenBLAS's threads

import numpy as np

from benchlib import cpu_model, git_commit, rel_l2, timed, timed_with_usage, write_json_atomically

SIZES = {
    "a": dict(ntraces=30, nshifts=3000, nsamples=6000, note="30 stations, 3000 candidate sources"),
    "b": dict(ntraces=30, nshifts=10000, nsamples=6000, note="pyrocko's CUDA benchmark"),
    "c": dict(ntraces=100, nshifts=100, nsamples=30000,
              note="qseek: 100 stations x 100 nodes x 5 min at 100 Hz"),
}
SPREADS = [10, 100, 500, 2000, 5000]
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def make_shifts(rng, nshifts: int, ntraces: int, spread: int, model: str) -> np.ndarray:
    if model == "uniform":
        return rng.integers(-spread, spread + 1, size=(nshifts, ntraces)).astype(np.int32)
    stations = rng.uniform(-1.0, 1.0, size=(ntraces, 2))
    side = int(np.ceil(np.sqrt(nshifts)))
    grid = np.linspace(-1.0, 1.0, side)
    sources = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)[:nshifts]
    depth = 0.2  # sources below the surface: no zero distances
    distance = np.sqrt(((sources[:, None, :] - stations[None, :, :]) ** 2).sum(-1) + depth**2)
    span = distance.max() - distance.min()
    moveout = (distance - distance.min()) / span * 2.0 - 1.0  # in [-1, 1]
    # Stacking undoes the moveout: the shift of a trace is minus its delay.
    return np.rint(-moveout * spread).astype(np.int32)


def make_problem(size: str, spread: int, model: str, dtype: str, seed: int):
    spec = SIZES[size]
    rng = np.random.default_rng(seed)
    n, nshifts, nsamples = spec["ntraces"], spec["nshifts"], spec["nsamples"]
    arrays = [rng.normal(size=nsamples).astype(dtype) for _ in range(n)]
    offsets = np.zeros(n, dtype=np.int32)
    shifts = make_shifts(rng, nshifts, n, spread, model)
    weights = rng.uniform(0.5, 1.0, size=(nshifts, n)).astype(dtype)
    return arrays, offsets, shifts, weights


def multiply_adds(arrays, offsets, shifts, weights) -> int:
    """Sum over shift sets and traces of the overlap with the (default) output window."""
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    starts = offsets.astype(np.int64)[None, :] + shifts.astype(np.int64)
    ends = starts + lengths[None, :]
    first, last = starts.min(), ends.max()  # pyrocko's default window
    overlap = np.clip(np.minimum(ends, last) - np.maximum(starts, first), 0, None)
    return int(overlap[weights != 0].sum()), int(last - first)


def cached_roofline(threads: int):
    """sciproxy's measured ceilings for this CPU and thread count (`sciproxy roofline`), or None."""
    path = os.path.join(os.environ.get("SCIPROXY_CACHE_DIR") or os.path.expanduser("~/.cache/sciproxy"),
                        "roofline.json")
    try:
        with open(path) as f:
            entries = json.load(f)
    except (OSError, ValueError):
        return None
    return entries.get(f"cpu|{cpu_model()}|threads={threads}")


def roofline_fraction(roof, macs, nshifts, lengthout, ntraces, nsamples, dtype, method, seconds):
    """Achieved over attainable GFlop/s, with the library's work model (stack/api.cpp,
    parstack_work): min(FMA peak, intensity x DRAM bandwidth, one trace sample per multiply-add
    at the cache bandwidth)."""
    if not roof:
        return None
    size = np.dtype(dtype).itemsize
    flops = 2.0 * macs + (nshifts * lengthout if method == 1 else 0)
    outputs = nshifts * lengthout if method == 0 else nshifts
    terms = nshifts * ntraces
    compulsory = size * (ntraces * nsamples + terms + outputs) + 4 * (terms + ntraces)
    peak = roof["peak_gflops_fp32" if size == 4 else "peak_gflops_fp64"]
    attainable = min(peak, flops / compulsory * roof["bandwidth_gbs"],
                     flops / (size * macs) * roof["cache_bandwidth_gbs"])
    return flops / seconds / 1e9 / attainable








def environment(args, sciproxy, pyrocko) -> dict:
    info = sciproxy.info()
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": args.threads,
        "load_average_at_start": list(os.getloadavg()),
        "omp_env": {k: v for k, v in os.environ.items()
                    if k.startswith(("OMP_", "GOMP_", "OPENBLAS_"))},
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


def run_case(size, spread, dtype, method, args, sciproxy, pyrocko_parstack, roof):
    arrays, offsets, shifts, weights = make_problem(size, spread, args.shift_model, dtype, args.seed)
    macs, lengthout = multiply_adds(arrays, offsets, shifts, weights)
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
    usage = {"sciproxy": [], "pyrocko": []}
    for rep in range(args.reps):
        order = [("sciproxy", ours), ("pyrocko", theirs)]
        for name, call in (order if rep % 2 == 0 else order[::-1]):
            t, out, u = timed_with_usage(call)
            del out
            seconds[name].append(t)
            usage[name].append(u)

    spec = SIZES[size]
    record = {
        "size": size, "ntraces": spec["ntraces"], "nshifts": spec["nshifts"],
        "nsamples": spec["nsamples"], "spread": spread, "shift_model": args.shift_model,
        "shift_range": [int(shifts.min()), int(shifts.max())], "lengthout": lengthout,
        "note": spec["note"], "dtype": dtype, "method": method, "multiply_adds": macs,
        "verification": {"rel_l2": error, "tolerance": TOLERANCE[dtype], "pass": bool(passed),
                         "warmup_seconds": {"sciproxy": t_ours, "pyrocko": t_theirs}},
        "sciproxy": {**stats(seconds["sciproxy"], macs), "usage": usage["sciproxy"]},
        "pyrocko": {**stats(seconds["pyrocko"], macs), "usage": usage["pyrocko"]},
    }
    record["speedup"] = record["pyrocko"]["median"] / record["sciproxy"]["median"]
    record["sciproxy"]["roofline_fraction"] = roofline_fraction(
        roof, macs, spec["nshifts"], lengthout, spec["ntraces"], spec["nsamples"], dtype, method,
        record["sciproxy"]["median"])
    return record


HEADER = (f"{'size':<16} {'spread':>6} {'dtype':<7} {'m':>1}  {'pyrocko_s':>9} {'sciproxy_s':>10} "
          f"{'pyrocko':>8} {'sciproxy':>8}  {'speedup':>7}  {'roofline':>8}  {'rel_l2':>7}")


def print_row(r, mark=""):
    label = f"{r['size']} {r['ntraces']}x{r['nshifts']}x{r['nsamples']}"
    verdict = "" if r["verification"]["pass"] else " FAIL"
    fraction = r["sciproxy"]["roofline_fraction"]
    fraction = f"{100 * fraction:7.0f}%" if fraction is not None else f"{'-':>8}"
    print(f"{label:<16} {r['spread']:>6} {r['dtype']:<7} {r['method']:>1}  "
          f"{r['pyrocko']['median']:>9.4f} {r['sciproxy']['median']:>10.4f} "
          f"{r['pyrocko']['gmacs_per_s']:>8.2f} {r['sciproxy']['gmacs_per_s']:>8.2f}  "
          f"{r['speedup']:>6.2f}x  {fraction}  {r['verification']['rel_l2']:.1e}{verdict}{mark}")
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["a", "b", "c"])
    parser.add_argument("--spreads", nargs="+", type=int, default=SPREADS,
                        help=f"shifts span +-spread samples (default {' '.join(map(str, SPREADS))})")
    parser.add_argument("--shift-model", choices=["moveout", "uniform"], default="moveout")
    parser.add_argument("--dtypes", nargs="+", choices=["float32", "float64"], default=["float32", "float64"])
    parser.add_argument("--methods", nargs="+", type=int, choices=[0, 1], default=[0, 1])
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions of each (default 3)")
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
    roof = cached_roofline(args.threads)
    if roof is None:
        print(f"# no cached roofline for {args.threads} threads (run `sciproxy roofline --threads "
              f"{args.threads}`): no roofline column")
    else:
        print(f"# roofline: DRAM {roof['bandwidth_gbs']:.1f} GB/s, cache {roof['cache_bandwidth_gbs']:.0f} GB/s, "
              f"peak {roof['peak_gflops_fp32']:.0f}/{roof['peak_gflops_fp64']:.0f} GFlop/s fp32/fp64")
    print(f"# shifts: {args.shift_model}; pyrocko and sciproxy columns: median seconds, then GMAC/s")
    print(HEADER)
    results = []
    for size in args.sizes:
        for spread in args.spreads:
            for dtype in args.dtypes:
                for method in args.methods:
                    record = run_case(size, spread, dtype, method, args, sciproxy, pyrocko_parstack, roof)
                    results.append(record)
                    print_row(record)
    slowest = min(results, key=lambda r: r["speedup"])
    print("# slowest row (lowest speedup):")
    print_row(slowest, "  <- slowest")
    fractions = [r for r in results if r["sciproxy"]["roofline_fraction"] is not None]
    if fractions:
        lowest = min(fractions, key=lambda r: r["sciproxy"]["roofline_fraction"])
        print("# lowest roofline fraction:")
        print_row(lowest, "  <- lowest roofline")
    env["load_average_at_end"] = list(os.getloadavg())
    print(f"# speedup = pyrocko median / sciproxy median; load at end {env['load_average_at_end'][0]:.2f}")

    if args.json:
        config = {k: getattr(args, k) for k in ("sizes", "spreads", "shift_model", "dtypes", "methods",
                                                "reps", "warmup", "threads", "impl", "seed")}
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
