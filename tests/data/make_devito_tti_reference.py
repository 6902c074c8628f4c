#!/usr/bin/env python3
"""The TTI workshop demo operator written in Devito, and the reference data it makes.

Writes tests/data/devito_tti_demo_reference.json: Devito's final wavefield of the one-field TTI
demo operator (docs/kernels/tti.md, "The workshop operator"; include/sciproxy/tti_demo.hpp) on a
small grid with smoothly varying materials, for tests/python/test_tti_devito.py, which compares
sciproxy with it (and with a live Devito when installed). bench/tti_vs_devito.py imports
`build_operator` from here, so the benchmark runs exactly these equations.

    python tests/data/make_devito_tti_reference.py [--output FILE]     # needs devito

The equations, as Devito sees them (u a TimeFunction of time order 2; the fluxes Functions on
the grid, zero in their halo, as sciproxy's are):
    g = (u.dx(x0=x+hx/2), u.dy(x0=y+hy/2), u.dz(x0=z+hz/2))                   D+ of order so
    F = b(1+2eps)[e1(e1.g) + e2(e2.g)] + n[b(1-f eta^2)(n.g) + b f eta sqrt(1-eta^2)]
    u.forward = (2-d) u + (d-1) u.backward + dt^2 vp^2/b (Fx.dx(x0=x-hx/2) + ...)   D- of order so
    src.inject(u.forward, src dt^2 vp^2/b)                                      trilinear
"""

import argparse
import json
import os
import sys

import numpy as np

# The committed problem: small, every term active (smooth materials vary along every axis).
SHAPE = (20, 22, 24)
SPACING = (10.0, 12.0, 8.0)
NT = 40
SPACE_ORDER = 8
F0 = 25.0
SOURCE_POSITION = (93.7, 131.3, 97.1)  # metres, off the grid points


def demo_materials(shape, dtype=np.float32) -> dict:
    """Smooth, deterministic materials over the grid (the same in every test and generator)."""
    x, y, z = np.meshgrid(*(np.linspace(0.0, 1.0, n) for n in shape), indexing="ij")
    m = {
        "vp": 1500.0 + 700.0 * z + 100.0 * np.sin(3 * x),
        "b": 1.0 / (1.8 + 0.6 * z + 0.1 * y),
        "epsilon": 0.1 + 0.15 * x * y,
        "eta": 0.2 + 0.3 * z * (1 - x),
        "f": 0.8 + 0.1 * y,
        "theta": 0.3 + 0.8 * x - 0.4 * z,
        "phi": -0.5 + 1.5 * y + 0.3 * z,
        "damping": 0.002 + 0.01 * (x * (1 - x)),
    }
    return {k: np.ascontiguousarray(v, dtype=dtype) for k, v in m.items()}


def ricker(f0, dt, nt, t0=0.0):
    t0 = t0 if t0 > 0 else 1.0 / f0
    a = np.pi * f0 * (np.arange(nt) * dt - t0)
    return (1 - 2 * a * a) * np.exp(-a * a)


def build_operator(shape, spacing, space_order, nt, source_position, dtype=np.float32):
    """Devito's version of the demo operator. Returns (op, u, materials: dict of Functions, src)."""
    from devito import (Eq, Function, Grid, Operator, SparseTimeFunction, TimeFunction, cos, sin,
                        sqrt)

    extent = tuple((n - 1) * h for n, h in zip(shape, spacing))
    grid = Grid(shape=tuple(shape), extent=extent, dtype=dtype)
    x, y, z = grid.dimensions
    dt = grid.stepping_dim.spacing
    so = space_order
    u = TimeFunction(name="u", grid=grid, time_order=2, space_order=so)
    # space_order 1: the injection reads vp and b at the source's corners (Devito needs a halo of 1).
    mat = {name: Function(name=name, grid=grid, space_order=1)
           for name in ("vp", "b", "epsilon", "eta", "f", "theta", "phi", "damping")}
    fx, fy, fz = (Function(name=name, grid=grid, space_order=so) for name in ("fx", "fy", "fz"))
    vp, b, eps, eta, f, th, ph, d = (mat[k] for k in
                                     ("vp", "b", "epsilon", "eta", "f", "theta", "phi", "damping"))

    g = (u.dx(x0=x + x.spacing / 2), u.dy(x0=y + y.spacing / 2), u.dz(x0=z + z.spacing / 2))
    e1 = (cos(th) * sin(ph), cos(th) * cos(ph), -sin(th))
    e2 = (cos(ph), -sin(ph), 0)
    n = (sin(th) * sin(ph), sin(th) * cos(ph), cos(th))
    e1g = sum(a * c for a, c in zip(e1, g))
    e2g = sum(a * c for a, c in zip(e2, g))
    ng = sum(a * c for a, c in zip(n, g))
    across = b * (1 + 2 * eps)
    along = b * (1 - f * eta ** 2) * ng + b * f * eta * sqrt(1 - eta ** 2)
    flux = [Eq(F, across * (e1[c] * e1g + e2[c] * e2g) + n[c] * along)
            for c, F in enumerate((fx, fy, fz))]
    div = (fx.dx(x0=x - x.spacing / 2) + fy.dy(x0=y - y.spacing / 2)
           + fz.dz(x0=z - z.spacing / 2))
    update = Eq(u.forward, (2 - d) * u + (d - 1) * u.backward + dt ** 2 * vp ** 2 / b * div)
    src = SparseTimeFunction(name="src", grid=grid, npoint=1, nt=nt,
                             coordinates=np.array([source_position], dtype=dtype))
    inject = src.inject(field=u.forward, expr=src * dt ** 2 * vp ** 2 / b)
    op = Operator(flux + [update] + inject, name="TTISelfAdjointForward")
    return op, u, mat, src


def run_devito(shape, spacing, space_order, nt, source_position, dt, amplitudes, materials,
               dtype=np.float32):
    """Runs nt steps from rest; returns (u^nt, u^{nt-1}, the PerformanceSummary)."""
    op, u, mat, src = build_operator(shape, spacing, space_order, nt, source_position, dtype)
    for name, fn in mat.items():
        fn.data[:] = materials[name]
    src.data[:, 0] = amplitudes
    summary = op.apply(time_m=0, time_M=nt - 1, dt=dtype(dt))
    return (np.array(u.data[nt % 3]), np.array(u.data[(nt - 1) % 3]), summary)


def reference_problem():
    """The committed case: its dt is 0.8 of sciproxy's stability limit, fixed here as a number
    so that the data does not depend on sciproxy."""
    return dict(shape=SHAPE, spacing=SPACING, nt=NT, space_order=SPACE_ORDER, f0=F0,
                source_position=SOURCE_POSITION, dt=0.0012)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "devito_tti_demo_reference.json"))
    args = parser.parse_args()
    os.environ.setdefault("DEVITO_LOGGING", "WARNING")
    import devito

    p = reference_problem()
    materials = demo_materials(p["shape"])
    amps = ricker(p["f0"], p["dt"], p["nt"]).astype(np.float32)
    u, u_prev, _ = run_devito(p["shape"], p["spacing"], p["space_order"], p["nt"],
                              p["source_position"], p["dt"], amps, materials)
    doc = dict(p)
    doc.update(devito_version=devito.__version__, dtype="float32",
               materials="demo_materials(shape) in tests/data/make_devito_tti_reference.py",
               source="ricker(f0, dt, nt), t0 = 1/f0",
               u=[float(f"{v:.8e}") for v in u.reshape(-1)],
               u_norm=float(np.linalg.norm(u)))
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
        fh.write("\n")
    os.replace(tmp, args.output)
    print(f"wrote {args.output}: |u| = {doc['u_norm']:.6e}, devito {devito.__version__}")


if __name__ == "__main__":
    sys.exit(main())
