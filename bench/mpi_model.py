#!/usr/bin/env python3
"""The communication model of docs/mpi.md: per family, the bytes a call or step exchanges as a
function of the decomposition, and the parallel efficiency predicted at 8, 64 and 512 ranks on a
200 Gbit/s network. Prints the tables of docs/mpi.md.

    python bench/mpi_model.py [--speedup 1 20] [--bandwidth-gbit 200] [--latency-us 2]
                              [--tti-gpts 0.178] [--demo-gpts 0.246]
                              [--diffusion-step-s 0.0137]

Assumptions (also in docs/mpi.md): one rank per node; a rank computes at the rate measured on
this 2-core machine (`sciproxy run tti_forward`, `sciproxy tti -d 412 423 476`, `sciproxy run
diffusion`, 2 threads), times
--speedup (20: a node of about 40 such cores); each rank sends and receives at the link's
bandwidth at once (full duplex), messages cost --latency-us each, and the network has no other
contention; efficiency = compute / (compute + communication not hidden), given both without
overlap (a lower bound) and with the overlap the TTI kernel does (the interior hides the halo).
"""

import argparse
import itertools
import math

RANKS = (8, 64, 512)


def process_grids(p):
    """Every (p0, p1, p2) with p0 * p1 * p2 = p."""
    for a in range(1, p + 1):
        if p % a:
            continue
        for b in range(1, p // a + 1):
            if (p // a) % b == 0:
                yield a, b, p // a // b


def tti_step(n, grid, h, s, rate, bandwidth, latency):
    """(compute, communication, interior) seconds per step for the busiest rank."""
    local = [math.ceil(n[a] / grid[a]) for a in range(3)]
    cells = local[0] * local[1] * local[2]
    compute = cells / rate
    sent = 0.0
    messages = 0
    for a in range(3):
        if grid[a] == 1:
            continue
        b, c = [x for x in range(3) if x != a]
        faces = 2 if grid[a] > 2 else 1
        # P, M and the normal fluxes: (2H - 1) layers each way per face, 2 fields per exchange.
        sent += faces * 2 * (2 * h - 1) * s * local[b] * local[c]
        messages += faces * 2  # two exchanges per step
    comm = sent / bandwidth + messages * latency
    interior = max(0, local[0] - 2 * h) * max(0, local[1] - 2 * h) * max(0, local[2] - 2 * h)
    return compute, comm, interior / rate


def demo_step(n, grid, k, h, s, rate, bandwidth, latency, flux_share=0.55):
    """The workshop operator (tti_demo) per step for the busiest rank: (useful compute, compute
    done, communication) seconds and the bytes it sends. Its block is widened by a ring of
    G = k (2H - 1) points per side with a neighbour (src/tti/demo_decomposition.hpp). One step
    per sweep (k = 1): u+ on the block along x and y, the flux (flux_share of a point's cost, its
    52 of 97 flops) on H more layers, z rows whole; u's ring sent. Two steps (k = 2): the whole
    window stepped, u's and u-'s rings sent once per two steps. The ring comes from every
    neighbour sharing a face, edge or corner at once."""
    g = k * (2 * h - 1)
    block = [math.ceil(n[a] / grid[a]) for a in range(3)]
    sides = [0 if grid[a] == 1 else (2 if grid[a] > 2 else 1) for a in range(3)]
    window = [block[a] + sides[a] * g for a in range(3)]
    if k == 1:
        z = window[2]
        flux_xy = (block[0] + sides[0] * h) * (block[1] + sides[1] * h) - block[0] * block[1]
        done = (block[0] * block[1] + flux_share * flux_xy) * z
    else:
        done = math.prod(window)
    sent = 0.0
    messages = 0
    fields = 1 if k == 1 else 2
    for a in range(3):
        area = math.prod(block[b] for b in range(3) if b != a)
        sent += sides[a] * fields * g * s * area
        messages += sides[a]
    # Edges and corners (the ring's corners of the window, one message each).
    for a, b in itertools.combinations(range(3), 2):
        c = 3 - a - b
        sent += sides[a] * sides[b] * fields * g * g * s * block[c]
        messages += sides[a] * sides[b]
    sent += sides[0] * sides[1] * sides[2] * fields * g ** 3 * s
    messages += sides[0] * sides[1] * sides[2]
    comm = (sent / bandwidth + messages * latency) / k
    # With one step per sweep and z unsplit, the block less the ring's width along each split
    # side is computed while the ring travels.
    if k == 1 and grid[2] == 1:
        inner = math.prod(max(0, block[a] - sides[a] * g) for a in range(3))
    else:
        inner = 0
    return math.prod(block) / rate, done / rate, comm, sent / k, inner / rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speedup", type=float, nargs="+", default=[1, 20])
    parser.add_argument("--bandwidth-gbit", type=float, default=200)
    parser.add_argument("--latency-us", type=float, default=2)
    parser.add_argument("--tti-gpts", type=float, default=0.178,
                        help="tti_forward GPts/s of one rank here (cells x steps per second)")
    parser.add_argument("--demo-gpts", type=float, default=0.92,
                        help="tti_demo GPts/s of one rank here (points x steps per second)")
    parser.add_argument("--diffusion-step-s", type=float, default=0.0137,
                        help="one granule step on R2B4 x 65 levels here, seconds")
    args = parser.parse_args()
    bw = args.bandwidth_gbit * 1e9 / 8
    lat = args.latency_us * 1e-6

    # TTI at 412 x 423 x 476 (the model) with the default 60-cell sponge per side, order 8
    # (H = 4), float32.
    n = (412 + 120, 423 + 120, 476 + 120)
    print(f"TTI {n[0]} x {n[1]} x {n[2]} cells (412 x 423 x 476 + sponge 60), order 8, float32")
    print("| ranks | rank speed | best process grid | halo MB/step/rank | efficiency no overlap "
          "| with overlap | slabs (P,1,1): no overlap / overlap |")
    print("|---|---|---|---|---|---|---|")
    for speed in args.speedup:
        rate = args.tti_gpts * 1e9 * speed
        for p in RANKS:
            best = None
            for grid in process_grids(p):
                if any(math.ceil(n[a] / grid[a]) < 4 for a in range(3)):
                    continue
                c, m, inner = tti_step(n, grid, 4, 4, rate, bw, lat)
                e_plain = c / (c + m)
                e_overlap = c / (c + max(0.0, m - inner))
                if best is None or e_plain > best[1]:
                    best = (grid, e_plain, e_overlap, m)
            if math.ceil(n[0] / p) >= 4:  # a slab holds at least H cells
                c, m, inner = tti_step(n, (p, 1, 1), 4, 4, rate, bw, lat)
                slab = f"{100 * c / (c + m):.0f}% / {100 * c / (c + max(0.0, m - inner)):.0f}%"
            else:
                slab = "not possible (fewer than H cells per slab)"
            grid, e_plain, e_overlap, comm = best
            local = [math.ceil(n[a] / grid[a]) for a in range(3)]
            sent = sum((2 if grid[a] > 2 else 1) * 2 * 7 * 4 *
                       math.prod(local[b] for b in range(3) if b != a)
                       for a in range(3) if grid[a] > 1)
            print(f"| {p} | x{speed:g} | {grid[0]} x {grid[1]} x {grid[2]} | {sent / 1e6:.1f} | "
                  f"{100 * e_plain:.0f}% | {100 * e_overlap:.0f}% | {slab} |")

    # The workshop operator at 412 x 423 x 476 (no sponge), order 8, float32: one step per sweep
    # (the demo's constant materials; ring 7) and two (materials varying per point; ring 14).
    n = (412, 423, 476)
    print()
    print(f"TTI workshop operator (tti_demo) {n[0]} x {n[1]} x {n[2]} points, order 8, float32")
    print("| ranks | rank speed | steps per sweep (ring) | process grid | block | computed again "
          "| halo MB/step/rank | efficiency, no overlap | with the interior's overlap |")
    print("|---|---|---|---|---|---|---|---|---|")
    for speed in args.speedup:
        rate = args.demo_gpts * 1e9 * speed
        for k in (1, 2):
            for p in RANKS:
                rows = {}
                for grid in process_grids(p):
                    if any(grid[a] > 1 and n[a] // grid[a] < k * 7 for a in range(3)):
                        continue
                    useful, done, comm, sent, inner = demo_step(n, grid, k, 4, 4, rate, bw, lat)
                    plain = useful / (done + comm)
                    hidden = useful / (done + max(0.0, comm - inner))
                    # The best grid, and the best with z unsplit (the only overlapped ones).
                    for key in ("any", "z whole") if grid[2] == 1 else ("any",):
                        if key not in rows or hidden > rows[key][1]:
                            rows[key] = (grid, hidden, plain, done / useful - 1, sent)
                for key in sorted(rows, key=lambda x: x != "any"):
                    grid, hidden, plain, again, sent = rows[key]
                    if key == "z whole" and rows["any"][0] == grid:
                        continue
                    block = [math.ceil(n[a] / grid[a]) for a in range(3)]
                    print(f"| {p} | x{speed:g} | {k} ({7 * k}) | {grid[0]} x {grid[1]} x {grid[2]} "
                          f"| {block[0]} x {block[1]} x {block[2]} | {100 * again:.0f}% | "
                          f"{sent / 1e6:.1f} | {100 * plain:.0f}% | {100 * hidden:.0f}% |")

    # Diffusion at R2B6, 65 levels, float64: C = 20 * 4 * 4^6 cells. Halo per step, every rank
    # together: 38 b nlev L bytes, L the cut edges (measured on METIS splits of R2B4: C_h = 4L,
    # E_h = 7L, V_h = 3L); L ~ 1.4 sqrt(C P) for METIS parts (fit at 8 ranks of R2B4).
    cells4 = 20 * 4 * 4 ** 4
    cells6 = 20 * 4 * 4 ** 6
    nlev = 65
    step6 = args.diffusion_step_s * cells6 / cells4
    print()
    print(f"Diffusion R2B6 ({cells6} cells) x {nlev} levels, float64; one rank here: "
          f"{step6:.3f} s per step")
    print("| ranks | rank speed | cells per rank | cut edges L | halo MB/step/rank | efficiency |")
    print("|---|---|---|---|---|---|")
    limits = []
    for speed in args.speedup:
        for p in RANKS:
            cut = 1.4 * math.sqrt(cells6 * p)
            per_rank = 38 * 8 * nlev * cut / p
            compute = step6 / p / speed
            # 5 exchange points per step, about 6 neighbours each.
            comm = per_rank / bw + 5 * 6 * lat
            print(f"| {p} | x{speed:g} | {cells6 // p} | {cut:.0f} | {per_rank / 1e6:.2f} | "
                  f"{100 * compute / (compute + comm):.0f}% |")
        # The most ranks at 80% (halo bytes grow as sqrt(P) per rank's share).
        p = 8
        while True:
            cut = 1.4 * math.sqrt(cells6 * 2 * p)
            per_rank = 38 * 8 * nlev * cut / (2 * p)
            compute = step6 / (2 * p) / speed
            comm = per_rank / bw + 5 * 6 * lat
            if compute / (compute + comm) < 0.8 or 2 * p > cells6 // 8:
                break
            p *= 2
        limits.append(f"x{speed:g}: efficiency stays above 80% up to about {p} ranks "
                      f"({cells6 // p} cells per rank)")
    print("\n".join(limits))


if __name__ == "__main__":
    main()
