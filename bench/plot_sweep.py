#!/usr/bin/env python3
"""Plots a `sciproxy bench` sweep: throughput (GMAC/s or GPts/s, as the sweep says) against problem size, one line per
(device, dtype), CUDA kernel-only throughput dashed next to the one including transfers.

Usage: plot_sweep.py SWEEP.json OUT.png
"""
import json
import sys


def fail(message):
    print(f"plot_sweep.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON ({e})")
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        fail(f"{path}: expected a sciproxy bench sweep (an object with a 'results' list)")
    return doc


def title_of(doc):
    sweep = doc.get("sweep", {})
    env = doc.get("environment", {})
    cpu = doc.get("cpu_model") or env.get("cpu_model", "unknown CPU")
    threads = doc.get("threads") or env.get("threads", "?")
    gpus = doc.get("gpus") or [g.get("name", "GPU") for g in env.get("gpus", []) if isinstance(g, dict)]
    machine = f"{cpu}, {threads} threads"
    if gpus:
        machine += "; " + ", ".join(sorted(set(gpus)))
    kernel = doc.get("kernel", "kernel")
    geometry = ""
    if "ntraces" in sweep and "nshifts" in sweep:
        geometry = f": {sweep['ntraces']} traces x {sweep['nshifts']} shift sets, method {sweep.get('method', 0)}"
    return f"{kernel}{geometry}\n{machine}"


def main(argv):
    if len(argv) != 3:
        fail("usage: plot_sweep.py SWEEP.json OUT.png")
    doc = load(argv[1])
    try:
        import matplotlib
    except ImportError:
        fail("matplotlib is not installed (pip install matplotlib)")
    matplotlib.use("Agg")  # no display needed: the plot only goes to a file
    import matplotlib.pyplot as plt

    variable = doc.get("sweep", {}).get("variable", "nsamples")
    lines = {}
    for r in doc["results"]:
        try:
            key = (r["device"], r["dtype"])
            lines.setdefault(key, []).append((float(r[variable]), float(r["gmacs"]),
                                              r.get("cuda", {}).get("gmacs_kernel_only")))
        except (KeyError, TypeError, ValueError):
            fail(f"{argv[1]}: a result lacks device, dtype, {variable} or gmacs: {r}")
    if not lines:
        fail(f"{argv[1]}: the sweep has no results")

    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for (device, dtype), points in sorted(lines.items()):
        points.sort()
        xs = [p[0] for p in points]
        (line,) = ax.plot(xs, [p[1] for p in points], marker="o", label=f"{device} {dtype}")
        kernel_only = [p[2] for p in points]
        if all(k is not None for k in kernel_only):
            ax.plot(xs, kernel_only, marker="x", linestyle="--", color=line.get_color(),
                    label=f"{device} {dtype} (kernel only)")
    ax.set_xscale("log")
    ax.set_xlabel(f"{variable} (samples per trace)" if variable == "nsamples" else variable)
    ax.set_ylabel(f"throughput [{doc.get('sweep', {}).get('unit', 'GMAC/s')}]")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(title_of(doc), fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(argv[2])
    except OSError as e:
        fail(f"{argv[2]}: {e.strerror}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
