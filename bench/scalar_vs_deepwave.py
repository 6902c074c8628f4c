#!/usr/bin/env python3
"""sciproxy.wave.scalar against deepwave.scalar, side by side in one process.

Both run the same problem at the same thread count (torch.set_num_threads and sciproxy's
nparallel), on the same device kind (cpu by default), float32. For each case: forward
(receiver amplitudes) and forward + gradient (the gradient of <receivers, w>, w fixed, with
respect to v and the source amplitudes: deepwave through torch.autograd, sciproxy through
scalar_gradient; both one forward and one adjoint pass). The first call of each is the warm-up and the verification (receiver
amplitudes and gradients compared, relative L2); then --reps repetitions alternate the two
(ABAB..., so drifts in machine load hit both). The table gives median, min, max seconds, GPts/s
(points = cells of model + PML x inner steps x shots, x 2 for forward + gradient; the same count
for both, from sciproxy's work model) and the ratio of the medians.

Cases (docs/kernels/scalar-wave.md):
  seam4  SEAM-like 2-D: 251 x 500 cells, dx 5 m, dt 4 ms, nt 500, 10 shots x 250 receivers,
         25 Hz Ricker, PML 20, accuracy 4
  seam8  the same with accuracy 8
  3d     3-D: N^3 cells for each N of --sizes (200), dx 5 m, each accuracy of --accuracies (8),
         500 steps, one shot, receivers along a surface line

All rows go into one table at the end, with both systems' rates and the speed-up; the row with
the smallest speed-up is marked. --table prints that table from the JSON files of earlier runs,
so that a long sweep can run in pieces (each one short) and still be read as one:

    python bench/scalar_vs_deepwave.py --cases seam4 seam8 --reps 3 --threads 2 --json out.json
    python bench/scalar_vs_deepwave.py --cases 3d --sizes 64 --nt 100 --reps 1   # a quick run
    # The 3-D sweep (dt 4 ms is 10 inner steps per sample here, so --nt 10 is 100 steps):
    for n in 64 96 128 192 256; do
      python bench/scalar_vs_deepwave.py --cases 3d --sizes $n --accuracies 4 8 --nt 10 \
          --reps 3 --threads 2 --json sweep3d_$n.json
    done
    python bench/scalar_vs_deepwave.py --table sweep3d_*.json

Needs torch and deepwave in the same environment as sciproxy.

The OpenMP wait policy is left as the environment sets it (the default is what users run).
torch brings a second OpenMP runtime, whose workers spin briefly after Deepwave's calls; but
OMP_WAIT_POLICY=passive, which bench/parstack_vs_pyrocko.py sets against that, makes every
barrier of sciproxy's temporally blocked 3-D sweeps sleep and wake (64^3, accuracy 4: 0.18 s
against 0.10 s per call), so it is not set here.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import socket
import statistics
import sys
import warnings

# numpy's OpenBLAS threads busy-wait after each BLAS call (the verification's norm), taking the
# cores from whichever system's call comes next (bench/parstack_vs_pyrocko.py); neither system
# here calls numpy's BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from benchlib import cpu_model, git_commit, rel_l2, timed, write_json_atomically

TOLERANCE = {"float32": 1e-4, "float64": 1e-10}  # receivers and gradients, relative L2


def make_case(name: str, args, size: int = 0, accuracy: int = 8) -> dict:
    """The model, sources and receivers of one case (numpy, dtype float32 or float64); size and
    accuracy are those of the 3d case."""
    dtype = np.dtype(args.dtype)
    if name in ("seam4", "seam8"):
        shape, nshots, nreceivers, accuracy = (251, 500), 10, 250, 4 if name == "seam4" else 8
    elif name == "3d":
        n = size
        shape, nshots, nreceivers = (n, n, n), 1, min(n, 100)
    else:
        raise ValueError(name)
    nt, dt, dx, freq = args.nt, 0.004, 5.0, 25.0
    nshots = args.shots or nshots
    ndim = len(shape)
    v = np.empty(shape, dtype)
    layers = 5
    for z in range(shape[0]):
        v[z] = 1500.0 + (4000.0 - 1500.0) * min(z * layers // shape[0], layers - 1) / (layers - 1)
    t = np.arange(nt) * dt
    a = np.pi * freq * (t - 1.5 / freq)
    wavelet = ((1 - 2 * a * a) * np.exp(-a * a)).astype(dtype)
    amps = np.tile(wavelet, (nshots, 1, 1))
    along = shape[-1]
    middle = [shape[1] // 2] if ndim == 3 else []
    src = np.array([[[2, *middle, (2 * s + 1) * along // (2 * nshots)]] for s in range(nshots)],
                   np.int64)
    rec_line = [[1, *middle, (2 * r + 1) * along // (2 * nreceivers)] for r in range(nreceivers)]
    rec = np.array([rec_line] * nshots, np.int64)
    return dict(name=name, v=v, dx=dx, dt=dt, amps=amps, src=src, rec=rec, accuracy=accuracy,
                pml_width=20, pml_freq=freq, shape=shape, nt=nt, nshots=nshots,
                nreceivers=nreceivers)


def stats(seconds, points):
    median = statistics.median(seconds)
    return {"seconds": seconds, "median": median, "min": min(seconds), "max": max(seconds),
            "gpts_per_s": points / median / 1e9}


def run_case(case, mode, args, sw, torch, deepwave):
    """mode 'forward' or 'gradient'; returns the record of one row pair."""
    device = args.device
    tdev = torch.device("cuda" if device.startswith("cuda") else "cpu")
    common = dict(accuracy=case["accuracy"], pml_width=case["pml_width"], pml_freq=case["pml_freq"])
    v_t = torch.from_numpy(case["v"]).to(tdev)
    amps_t = torch.from_numpy(case["amps"]).to(tdev)
    src_t = torch.from_numpy(case["src"]).to(tdev)
    rec_t = torch.from_numpy(case["rec"]).to(tdev)
    np_args = dict(v=case["v"], grid_spacing=case["dx"], dt=case["dt"],
                   source_amplitudes=case["amps"], source_locations=case["src"],
                   receiver_locations=case["rec"], device=device, nparallel=args.threads, **common)
    if mode == "gradient" and args.gradient_sampling == "deepwave":
        # Deepwave stores the wavefield every step_ratio inner steps; ours by default every
        # inner step (the exact gradient, step_ratio times the memory).
        inner_dt, step_ratio = sw.cfl([case["dx"]] * case["v"].ndim, case["dt"],
                                      float(np.abs(case["v"]).max()))
        np_args["model_gradient_sampling_interval"] = step_ratio

    # The loss of the gradient runs: <receivers, w> with w fixed (the receivers of a first
    # forward run), so that both do one forward pass and one adjoint pass per call.
    weights = sw.scalar(**np_args)[-1] if mode == "gradient" else None
    weights_t = torch.from_numpy(weights).to(tdev) if mode == "gradient" else None

    def theirs():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if mode == "forward":
                with torch.no_grad():
                    out = deepwave.scalar(v_t, case["dx"], case["dt"], source_amplitudes=amps_t,
                                          source_locations=src_t, receiver_locations=rec_t,
                                          **common)
                return out[-1].cpu().numpy(), None, None
            v = v_t.clone().requires_grad_()
            a = amps_t.clone().requires_grad_()
            out = deepwave.scalar(v, case["dx"], case["dt"], source_amplitudes=a,
                                  source_locations=src_t, receiver_locations=rec_t, **common)
            r = out[-1]
            (r * weights_t).sum().backward()
            return r.detach().cpu().numpy(), v.grad.cpu().numpy(), a.grad.cpu().numpy()

    def ours(autotune=False):
        if mode == "forward":
            run = sw.scalar_run(**np_args, autotune=autotune)
            return run[-1], None, None, run
        # One forward pass (with storage) and its adjoint, as deepwave's forward + backward.
        d = sw.scalar_gradient(**np_args, grad_receiver_amplitudes=weights, return_details=True,
                               autotune=autotune)
        return d["forward"][-1], d["grad_v"], d["grad_source_amplitudes"], d["forward"]

    def ours_autotuned():
        return ours(autotune=True)

    # Verification; these calls are the warm-up too.
    t_ours, (r_o, gv_o, gs_o, run) = timed(ours)
    t_theirs, (r_t, gv_t, gs_t) = timed(theirs)
    errors = {"receiver_amplitudes": rel_l2(r_o, r_t)}
    if mode == "gradient":
        errors["grad_v"] = rel_l2(gv_o, gv_t)
        errors["grad_source_amplitudes"] = rel_l2(gs_o, gs_t)
    tol = TOLERANCE[args.dtype]
    passed = all(e <= tol for e in errors.values())
    points = float(run.work["points"]) * (2 if mode == "gradient" else 1)
    del r_o, gv_o, gs_o, r_t, gv_t, gs_t

    seconds = {"sciproxy": [], "deepwave": []}
    order = [("sciproxy", ours), ("deepwave", theirs)]
    if args.autotune:
        # The autotuner's search runs here, once per case, untimed; the timed calls read its
        # cached choice. Same bits as the default's (checked).
        _, (r_a, *_rest) = timed(ours_autotuned)
        if not np.array_equal(r_a, ours()[0]):
            raise RuntimeError("the autotuned run's receivers differ from the default's")
        seconds["sciproxy_autotuned"] = []
        order.append(("sciproxy_autotuned", ours_autotuned))
    for rep in range(args.reps):
        for name, call in (order if rep % 2 == 0 else order[::-1]):
            t, out = timed(call)
            del out
            seconds[name].append(t)

    record = {
        "case": case["name"], "mode": mode, "shape": list(case["shape"]), "nt": case["nt"],
        "dt": case["dt"], "dx": case["dx"], "shots": case["nshots"],
        "receivers": case["nreceivers"], "accuracy": case["accuracy"], "dtype": args.dtype,
        "step_ratio": run.step_ratio, "points": points,
        "points_definition": "cells of model + PML x inner steps x shots (x 2 for gradient)",
        "verification": {"rel_l2": errors, "tolerance": tol, "pass": bool(passed),
                         "warmup_seconds": {"sciproxy": t_ours, "deepwave": t_theirs}},
        "sciproxy": stats(seconds["sciproxy"], points),
        "deepwave": stats(seconds["deepwave"], points),
    }
    if args.autotune:
        record["sciproxy_autotuned"] = stats(seconds["sciproxy_autotuned"], points)
    record["ratio_sciproxy_over_deepwave"] = (record["sciproxy"]["median"]
                                              / record["deepwave"]["median"])
    return record


def row_label(r) -> str:
    return f"{r['case']} {'x'.join(map(str, r['shape']))} a{r['accuracy']}"


def print_progress(r):
    """One comment line per finished row (the table comes at the end)."""
    tuned = (f", sciproxy autotuned {r['sciproxy_autotuned']['median']:.3f} s"
             if "sciproxy_autotuned" in r else "")
    print(f"# done: {row_label(r)} {r['mode']}: sciproxy {r['sciproxy']['median']:.3f} s, "
          f"deepwave {r['deepwave']['median']:.3f} s{tuned}", flush=True)


def print_table(results):
    """One table of all rows: median seconds and GPts/s of both, the speed-up (deepwave median /
    sciproxy median), the worst relative L2 difference; the smallest speed-up marked. Rows run
    with --autotune add sciproxy's autotuned rate and speed-up."""
    tuned = any("sciproxy_autotuned" in r for r in results)
    extra = f" {'tuned':>8} {'tuned':>7}" if tuned else ""
    print(f"{'case':<22} {'mode':<9} {'nt':>4} {'sciproxy_s':>10} {'deepwave_s':>10} "
          f"{'sciproxy':>8} {'deepwave':>8} {'speedup':>8}  {'rel_l2':>7}{extra}")
    print(f"{'':<22} {'':<9} {'':>4} {'(median)':>10} {'(median)':>10} {'GPts/s':>8} "
          f"{'GPts/s':>8}")
    speedups = [1 / r["ratio_sciproxy_over_deepwave"] for r in results]
    slowest = speedups.index(min(speedups)) if speedups else -1
    for k, r in enumerate(results):
        verdict = "" if r["verification"]["pass"] else " FAIL"
        worst = max(r["verification"]["rel_l2"].values())
        mark = "  <- slowest" if k == slowest and len(results) > 1 else ""
        more = ""
        if "sciproxy_autotuned" in r:
            a = r["sciproxy_autotuned"]
            more = f" {a['gpts_per_s']:>8.3f} {r['deepwave']['median'] / a['median']:>6.2f}x"
        elif tuned:
            more = f" {'':>8} {'':>7}"
        print(f"{row_label(r):<22} {r['mode']:<9} {r['nt']:>4} {r['sciproxy']['median']:>10.3f} "
              f"{r['deepwave']['median']:>10.3f} {r['sciproxy']['gpts_per_s']:>8.3f} "
              f"{r['deepwave']['gpts_per_s']:>8.3f} {speedups[k]:>7.2f}x  {worst:.1e}{verdict}"
              f"{more}{mark}")
    sys.stdout.flush()


def print_saved(paths) -> int:
    """--table: the one table of the results in the JSON files of earlier runs."""
    import json
    results = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        env = data["environment"]
        print(f"# {path}: {env['date_utc']}, {env['threads']} threads, sciproxy "
              f"{env['sciproxy_build']['git_commit']}, load {env['load_average_at_start'][0]:.2f}"
              f" -> {env['load_average_at_end'][0]:.2f}, {data['config']['reps']} reps")
        results += data["results"]
    print_table(results)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=["seam4", "seam8", "3d"],
                        default=["seam4", "seam8", "3d"])
    parser.add_argument("--modes", nargs="+", choices=["forward", "gradient"],
                        default=["forward", "gradient"])
    parser.add_argument("--sizes", "--size", type=int, nargs="+", default=[200],
                        help="3d case: N for N^3 cells, one row per N (200)")
    parser.add_argument("--accuracies", type=int, nargs="+", choices=[2, 4, 6, 8], default=[8],
                        help="3d case: the stencil accuracies, one row per accuracy (8)")
    parser.add_argument("--nt", type=int, default=500, help="time samples (500)")
    parser.add_argument("--shots", type=int, default=0, help="override the shot count")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions of each (3)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="torch.set_num_threads and sciproxy nparallel (all CPUs)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N] for both")
    parser.add_argument("--json", metavar="FILE", help="write the results and the environment")
    parser.add_argument("--autotune", action="store_true",
                        help="also time sciproxy with its autotuner's cpu sweep and block sizes "
                             "(searched once per case before the timed runs, cached), alternating "
                             "with the default and deepwave; adds the 'tuned' columns")
    parser.add_argument("--gradient-sampling", choices=["deepwave", "exact"], default="deepwave",
                        help="store for the gradient every step_ratio inner steps as Deepwave does "
                             "(default; the same memory and work), or every inner step (exact)")
    parser.add_argument("--table", nargs="+", metavar="JSON",
                        help="run nothing: print the one table of these files of --json")
    args = parser.parse_args(argv)
    if args.table:
        return print_saved(args.table)
    if args.reps < 1 or args.threads < 1 or args.nt < 1 or min(args.sizes) < 8:
        parser.error("--reps, --threads, --nt must be at least 1 and --sizes at least 8")

    import sciproxy
    import sciproxy.wave as sw
    try:
        import deepwave
        import torch
    except ImportError as error:
        print(f"scalar_vs_deepwave: torch and deepwave are needed for this comparison ({error}); "
              "pip install torch deepwave", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    info = sciproxy.info()
    env = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": args.threads,
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": list(os.getloadavg()),
        "omp_env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_", "OPENBLAS_"))},
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "deepwave": getattr(deepwave, "__version__", "unknown"),
        "sciproxy": sciproxy.__version__,
        "sciproxy_build": {k: info[k] for k in ("git_commit", "compiler", "build_type",
                                                "build_flags", "backends", "cuda_devices")},
        "device": args.device,
        "git_commit": git_commit(),
    }
    print(f"# {env['cpu_model']}, {env['cpu_count']} CPUs, {args.threads} threads for both, load "
          f"{env['load_average_at_start'][0]:.2f}; sciproxy {env['sciproxy']}, deepwave "
          f"{env['deepwave']}, torch {env['torch']}; device {args.device}, {args.dtype}; "
          f"{args.reps} reps after 1 warm-up, alternating")
    cases = []
    for name in args.cases:
        if name == "3d":
            cases += [(name, n, a) for n in args.sizes for a in args.accuracies]
        else:
            cases.append((name, 0, 8))
    results = []
    for name, size, accuracy in cases:
        case = make_case(name, args, size, accuracy)
        for mode in args.modes:
            record = run_case(case, mode, args, sw, torch, deepwave)
            results.append(record)
            print_progress(record)
    env["load_average_at_end"] = list(os.getloadavg())
    print_table(results)
    print("# speedup = deepwave median / sciproxy median (> 1: sciproxy faster); GPts/s: cells of "
          f"model + PML x inner steps x shots (x 2 for gradient); load at end "
          f"{env['load_average_at_end'][0]:.2f}")
    if args.json:
        config = {k: getattr(args, k) for k in ("cases", "modes", "sizes", "accuracies", "nt", "shots", "dtype",
                                                "reps", "threads", "device", "autotune")}
        write_json_atomically(args.json, {"benchmark": "scalar_vs_deepwave", "environment": env,
                                          "config": config, "results": results})
        print(f"# wrote {args.json}")
    failed = [r for r in results if not r["verification"]["pass"]]
    if failed:
        print(f"scalar_vs_deepwave: {len(failed)} case(s) did not match deepwave within tolerance",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
