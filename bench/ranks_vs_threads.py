#!/usr/bin/env python3
"""Ranks against threads on one machine: every family's case run by `sciproxy run` as 1 MPI rank
of T threads and as R ranks of T / R threads, alternating, in rounds; the table gives the median
times, their ratio, and what the ranks exchanged and waited for per call (the report's ranks
section). On a 2-core machine: 1 x 2 against 2 x 1.

    python bench/ranks_vs_threads.py [--cores 2] [--ranks 2] [--rounds 3] [--reps 3]
                                     [--cases parstack scalar ...] [--json out.json]

Needs mpiexec (Open MPI) and the sciproxy command built with MPI (build/cpu/apps/sciproxy, or
--sciproxy PATH).
"""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

# What users run, sized so a call takes a fraction of a second to a few seconds here.
CASES = {
    "parstack": ["parstack", "ntraces=30", "nshifts=3000", "nsamples=6000", "shift_min=-2000",
                 "shift_max=2000", "dtype=float32"],
    # The stack gathered on rank 0 moves the whole (nshifts x lengthout) result; the maximum per
    # shift set (method 1, what detection uses) moves one value per shift set.
    "parstack_max": ["parstack", "ntraces=30", "nshifts=3000", "nsamples=6000", "shift_min=-2000",
                     "shift_max=2000", "dtype=float32", "method=1"],
    "scalar": ["scalar", "shots=8", "shape0=200", "shape1=200", "nt=200", "receivers=100"],
    "scalar_gradient": ["scalar_gradient", "shots=8", "shape0=120", "shape1=120", "nt=150",
                        "receivers=60"],
    "tti_forward": ["tti_forward"],
    # The workshop operator with Devito's constant materials (one step per sweep, the ring
    # exchanged while the interior computes).
    "tti_demo": ["tti_demo", "nx=256", "ny=256", "nz=256", "nt=20"],
    "ex2d": ["ex2d", "nspec=50", "bundlesize=25"],
    "diffusion": ["diffusion"],
    # As ICON passes its fields: each rank its own entities and halos.
    "diffusion_local": ["diffusion", "fields=local"],
}


def launcher(mpiexec: str) -> tuple[list, dict]:
    env = dict(os.environ)
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True).stdout
    flags = []
    if "Open MPI" in version or "OpenRTE" in version:
        flags = ["--oversubscribe", "--mca", "btl", "self,vader"]
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("OMP_NUM_THREADS", None)
    return flags, env


def run(sciproxy, mpiexec, flags, env, ranks, threads, case, reps) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "run.json"
        binding = ["--bind-to", "core" if threads == 1 else "none"] if flags else []
        command = [mpiexec, "-n", str(ranks), *flags, *binding, sciproxy, "run", case[0],
                   "--threads", str(threads), "--reps", str(reps), "--no-verify",
                   "--json", str(out)]
        for setting in case[1:]:
            command += ["--set", setting]
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"ranks_vs_threads: {' '.join(command)} failed:\n{done.stdout}{done.stderr}")
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=2, help="threads of the one-rank run")
    parser.add_argument("--ranks", type=int, default=2, help="ranks of the other run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3, help="timed calls per run (median)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--sciproxy", default=str(ROOT / "build/cpu/apps/sciproxy"))
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if mpiexec is None:
        sys.exit("ranks_vs_threads: mpiexec not found (Debian: openmpi-bin)")
    flags, env = launcher(mpiexec)
    per_rank = max(1, args.cores // args.ranks)
    rows = []
    for name in args.cases:
        case = CASES[name]
        one, many, traffic = [], [], []
        for _ in range(args.rounds):  # alternating: the machine's drift hits both alike
            one.append(run(args.sciproxy, mpiexec, flags, env, 1, args.cores, case,
                           args.reps)["bench"]["median"])
            record = run(args.sciproxy, mpiexec, flags, env, args.ranks, per_rank, case, args.reps)
            many.append(record["bench"]["median"])
            traffic.append(record.get("ranks", {}))
        t1, tr = statistics.median(one), statistics.median(many)
        last = traffic[-1]
        wait = last.get("wait_per_call", {})
        rows.append({"case": name, "settings": case[1:],
                     f"1x{args.cores}_s": t1, f"{args.ranks}x{per_rank}_s": tr,
                     "ratio": t1 / tr if tr > 0 else 0.0,
                     "bytes_exchanged_per_call": last.get("bytes_exchanged_per_call", 0.0),
                     "wait_avg_s": wait.get("avg", 0.0), "wait_max_s": wait.get("max", 0.0),
                     "wait_max_rank": wait.get("max_rank", 0)})
        print(f"{name}: 1 x {args.cores}: {t1:.4f} s, {args.ranks} x {per_rank}: {tr:.4f} s",
              flush=True)
    head = (f"| case | 1 rank x {args.cores} threads [s] | {args.ranks} ranks x {per_rank} "
            f"[s] | speed-up of the ranks | exchanged per call | waiting per call avg / max |")
    print()
    print(head)
    print("|" + "---|" * 6)
    for r in rows:
        print(f"| {r['case']} | {r[f'1x{args.cores}_s']:.4f} | {r[f'{args.ranks}x{per_rank}_s']:.4f}"
              f" | {r['ratio']:.2f}x | {r['bytes_exchanged_per_call'] / 2**20:.2f} MiB"
              f" | {r['wait_avg_s']:.4f} / {r['wait_max_s']:.4f} s (rank {r['wait_max_rank']}) |")
    slowest = min(rows, key=lambda r: r["ratio"])
    print(f"\nSlowest row: {slowest['case']} at {slowest['ratio']:.2f}x "
          f"(medians of {args.rounds} rounds of {args.reps} timed calls each)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
