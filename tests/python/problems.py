"""Random parstack problems, an independent numpy oracle, and the tolerance of the comparisons.

The problems follow the tests of pyrocko's CUDA branch (1-5 traces of 5-10 samples, offsets and
shifts in [-5, 5], 1-10 shift sets) and add larger ones (up to 30 traces x 500 samples, offsets
and shifts in [-100, 100]), output windows (offsetout +- k, lengthout - k, wider) and
accumulation into a given result.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import sciproxy

NPROBLEMS_DEFAULT = 200  # random problems per backend, dtype and method

def tolerance(dtype) -> float:
    """The relative L2 bound ||out - ref|| / ||ref|| of parstack in dtype: the library's own
    (src/stack/case.hpp, docs/kernels/parstack.md), not a copy."""
    return sciproxy.tolerance("parstack", dtype)


def rel_l2(out, ref) -> float:
    """||out - ref|| / ||ref|| (||out - ref|| when ref is 0); inf on NaN or a shape mismatch."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape or not np.isfinite(out).all() or not np.isfinite(ref).all():
        return float("inf")
    diff = float(np.linalg.norm(out - ref))
    norm = float(np.linalg.norm(ref))
    return diff / norm if norm > 0 else diff


@dataclasses.dataclass
class Problem:
    seed: int
    arrays: list
    offsets: np.ndarray  # int32 (N,)
    shifts: np.ndarray  # int32 (nshifts, N)
    weights: np.ndarray  # float64 (nshifts, N)
    lengthout: int = -1
    offsetout: int = 0
    initial: np.ndarray | None = None  # method 0: accumulate into a copy of this (float64)
    flat_result: bool = False  # pass `initial` flat (nshifts * lengthout,) instead of 2-D
    clamp: bool = False  # method 1: clamp_max_at_zero
    label: str = ""

    @property
    def nshifts(self) -> int:
        return self.shifts.shape[0]

    def kwargs(self) -> dict:
        return dict(lengthout=self.lengthout, offsetout=self.offsetout)

    def result_for(self, method: int, dtype):
        """A fresh result array to pass (accumulation for method 0), or None."""
        if self.initial is None:
            return None
        if method == 1:
            return np.full(self.nshifts, 1e3, dtype=dtype)  # overwritten, never read
        r = self.initial.astype(dtype)
        return r.reshape(-1) if self.flat_result else r

    def describe(self) -> str:
        return (
            f"seed {self.seed} ({self.label}): {len(self.arrays)} traces of lengths "
            f"{[len(a) for a in self.arrays]}, nshifts {self.nshifts}, lengthout {self.lengthout}, "
            f"offsetout {self.offsetout}, accumulate {self.initial is not None}, clamp {self.clamp}"
        )


def default_extent(arrays, offsets, shifts):
    """(offsetout, lengthout) of pyrocko's default window, computed here independently."""
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    starts = offsets.astype(np.int64)[None, :] + shifts.astype(np.int64)
    ends = starts + lengths[None, :]
    first = int(starts.min())
    return first, int(ends.max()) - first


def random_problem(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    large = rng.random() < 0.4
    if large:
        ntraces = int(rng.integers(1, 31))
        lengths = rng.integers(5, 501, size=ntraces)
        span = 100
        label = "large"
    else:
        ntraces = int(rng.integers(1, 6))
        lengths = rng.integers(5, 11, size=ntraces)
        span = 5
        label = "small"
    nshifts = int(rng.integers(1, 11))
    arrays = [rng.normal(size=int(n)) for n in lengths]
    offsets = rng.integers(-span, span + 1, size=ntraces).astype(np.int32)
    shifts = rng.integers(-span, span + 1, size=(nshifts, ntraces)).astype(np.int32)
    weights = rng.uniform(-1.0, 1.0, size=(nshifts, ntraces))
    weights[rng.random(size=weights.shape) < 0.15] = 0.0
    p = Problem(seed, arrays, offsets, shifts, weights, label=label)

    first, length = default_extent(arrays, offsets, shifts)
    window = rng.choice(["default", "offsetout+k", "lengthout-k", "wider", "shifted"])
    k = int(rng.integers(1, 6 if not large else 60))
    if window == "offsetout+k":
        p.offsetout, p.lengthout = first + int(rng.choice([-k, k])), length
    elif window == "lengthout-k":
        p.offsetout, p.lengthout = first, max(1, length - k)
    elif window == "wider":
        p.offsetout, p.lengthout = first - k, length + 2 * k
    elif window == "shifted":  # partly or wholly outside the traces
        p.offsetout, p.lengthout = first + int(rng.integers(-length, length + 1)), int(rng.integers(1, length + 1))
    p.label += f", window {window}"

    lengthout = p.lengthout if p.lengthout > 0 else length
    if rng.random() < 0.3:
        p.initial = rng.normal(size=(nshifts, lengthout))
        p.flat_result = bool(rng.random() < 0.5)
    p.clamp = bool(rng.random() < 0.5)
    return p


def oracle(p: Problem, method: int, clamp: bool = False):
    """Independent float64 numpy evaluation of the definition (docs/kernels/parstack.md)."""
    if p.lengthout > 0:
        offsetout, lengthout = p.offsetout, p.lengthout
    else:
        offsetout, lengthout = default_extent(p.arrays, p.offsets, p.shifts)
    out = np.zeros((p.nshifts, lengthout))
    for s in range(p.nshifts):
        for i, a in enumerate(p.arrays):
            w = p.weights[s, i]
            if w == 0.0:
                continue
            start = int(p.offsets[i]) + int(p.shifts[s, i]) - offsetout  # output index of a[0]
            k0, k1 = max(0, start), min(lengthout, start + len(a))
            if k1 > k0:
                out[s, k0:k1] += w * np.asarray(a, dtype=np.float64)[k0 - start : k1 - start]
    if method == 1:
        m = out.max(axis=1)
        return (np.maximum(m, 0.0) if clamp else m), offsetout
    return out, offsetout


def run(p: Problem, method: int, dtype, impl: str, nparallel=None, clamp=None):
    """sciproxy.parstack on problem p; returns (result, offsetout, the result array passed)."""
    result = p.result_for(method, dtype)
    out, offsetout = sciproxy.parstack(
        p.arrays, p.offsets, p.shifts, p.weights, method=method, result=result,
        nparallel=nparallel, dtype=dtype, impl=impl,
        clamp_max_at_zero=p.clamp if clamp is None else clamp, **p.kwargs(),
    )
    return out, offsetout, result
