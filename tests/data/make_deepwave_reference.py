#!/usr/bin/env python3
"""Writes tests/data/deepwave_scalar_reference.json: Deepwave's receiver data and gradients on
small problems, for tests/reference/test_scalar_reference.cpp (test ScalarDeepwave.*), and
tests/data/deepwave_scalar_born_reference.json: deepwave.scalar_born's scattered and background
receiver data, and the gradients of a weighted sum of both with respect to the scatter and the
source amplitudes, for tests/python/test_born.py (test_born_matches_committed_deepwave_data).

Run with an environment that has torch and deepwave (the tests only read the JSON files):
    python tests/data/make_deepwave_reference.py [--only scalar|born] [--output FILE]
        [--born-output FILE]

Every input is generated here from a fixed seed and written to the file with the outputs, so the
C++ test rebuilds exactly the same problem. Conventions match sciproxy::wave: row-major arrays,
locations as cell indices, pml_width and survey_pad per side {dim0 low, dim0 high, ...}.
Deepwave is given pml_freq and max_vel explicitly (its defaults differ between versions), and
the loss whose gradients are recorded is sum(receivers * weights) with random weights.

Deepwave builds its Hann window (time_taper) and cosine frequency taper in torch's default dtype,
float32 unless changed, even for float64 data: float64 cases are run with the default dtype set to
float64 so that they test the method and not that rounding (which is ~1e-7 relative).
"""

import argparse
import inspect
import json
import math
import os
import sys
import warnings

import numpy as np

try:
    import torch
    import deepwave
    from deepwave import _common as dw_common
except ImportError as error:  # pragma: no cover
    sys.exit(f"make_deepwave_reference.py needs torch and deepwave: {error}")

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "deepwave_scalar_reference.json")
BORN_OUTPUT = os.path.join(HERE, "deepwave_scalar_born_reference.json")


def rounded(a, dtype):
    # float64 values with 17 significant digits, float32 values with 9: both round-trip exactly.
    digits = 17 if dtype == torch.float64 else 9
    return [float(f"{x:.{digits}g}") for x in np.asarray(a, dtype=np.float64).ravel()]


def smooth_model(rng, shape, vmin, vmax):
    v = rng.uniform(vmin, vmax, size=shape)
    # a little smoothing keeps the model plausible; the values are what they are.
    for axis in range(len(shape)):
        v = (v + np.roll(v, 1, axis=axis)) / 2
    return v


def ricker_like(rng, nshots, nsources, nt):
    t = np.arange(nt)
    base = np.exp(-(((t - nt / 4) / (nt / 10)) ** 2)) * np.cos(0.7 * t)
    return base[None, None, :] * rng.uniform(0.5, 1.5, size=(nshots, nsources, 1)) + 0.05 * rng.standard_normal(
        (nshots, nsources, nt)
    )


def distinct_locations(rng, shape, nshots, count, unique):
    locs = np.zeros((nshots, count, len(shape)), dtype=np.int64)
    for s in range(nshots):
        taken = set()
        for k in range(count):
            while True:
                x = tuple(int(rng.integers(0, n)) for n in shape)
                if not unique or x not in taken:
                    break
            taken.add(x)
            locs[s, k] = x
    return locs


def run_case(name, seed, ndim_shape, spacing, dt, nt, nshots, nsources, nreceivers, accuracy, pml_width, pml_freq,
             max_vel, dtype, nmodels=1, survey_pad=None, freq_taper_frac=0.0, time_pad_frac=0.0, time_taper=False,
             compare_grad_v=True, record_final=False, loc_lo=None, loc_hi=None):
    torch.set_default_dtype(dtype)
    rng = np.random.default_rng(seed)
    shape = tuple(ndim_shape)
    v = np.stack([smooth_model(rng, shape, 1500.0, 2500.0) for _ in range(nmodels)])
    amps = ricker_like(rng, nshots, nsources, nt)
    lo = loc_lo or [0] * len(shape)
    hi = loc_hi or list(shape)
    sub = tuple(h - l for l, h in zip(lo, hi))
    src = distinct_locations(rng, sub, nshots, nsources, True) + np.array(lo)
    rec = distinct_locations(rng, sub, nshots, nreceivers, False) + np.array(lo)
    weights = rng.standard_normal((nshots, nreceivers, nt))

    v_t = torch.tensor(v if nmodels > 1 else v[0], dtype=dtype, requires_grad=True)
    a_t = torch.tensor(amps, dtype=dtype, requires_grad=True)
    out = deepwave.scalar(
        v_t, list(spacing), dt,
        source_amplitudes=a_t, source_locations=torch.tensor(src), receiver_locations=torch.tensor(rec),
        accuracy=accuracy, pml_width=list(pml_width), pml_freq=pml_freq, max_vel=max_vel,
        survey_pad=survey_pad, freq_taper_frac=freq_taper_frac, time_pad_frac=time_pad_frac, time_taper=time_taper,
        location_interpolation="none",
    )
    receivers = out[-1]
    w_t = torch.tensor(weights, dtype=dtype)
    loss = (receivers * w_t).sum()
    loss.backward()
    step_ratio = dw_common.cfl_condition_n(list(spacing), dt, max_vel)[1]
    case = {
        "name": name, "dtype": "float64" if dtype == torch.float64 else "float32",
        "shape": list(shape), "spacing": list(spacing), "dt": dt, "nt": nt, "nshots": nshots, "nmodels": nmodels,
        "nsources": nsources, "nreceivers": nreceivers, "accuracy": accuracy, "pml_width": list(pml_width),
        "pml_freq": pml_freq, "max_vel": max_vel,
        "survey_pad": [-1 if p is None else p for p in survey_pad] if survey_pad is not None else [-1] * (2 * len(shape)),
        "freq_taper_frac": freq_taper_frac, "time_pad_frac": time_pad_frac, "time_taper": time_taper,
        "step_ratio": step_ratio, "compare_grad_v": compare_grad_v,
        "v": rounded(v_t.detach(), dtype), "source_amplitudes": rounded(a_t.detach(), dtype),
        "source_locations": src.ravel().tolist(), "receiver_locations": rec.ravel().tolist(),
        "receiver_weights": rounded(w_t, dtype),
        "receivers": rounded(receivers.detach(), dtype),
        "grad_source_amplitudes": rounded(a_t.grad, dtype),
        "grad_v": rounded(v_t.grad, dtype) if compare_grad_v else [],
    }
    if record_final:
        # Deepwave's final wavefield covers window + PML, without the stencil halo.
        case["final_wavefield"] = rounded(out[0].detach(), dtype)
    return case


def resample_cases():
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(7)
    cases = []
    for nt, ratio, ftf, tpf, taper in [(16, 3, 0.0, 0.0, False), (17, 2, 0.25, 0.3, True), (9, 5, 0.1, 0.0, True),
                                       (12, 4, 0.0, 0.5, False)]:
        x = rng.standard_normal((2, nt))
        y = rng.standard_normal((2, nt * ratio))
        up = dw_common.upsample(torch.tensor(x), ratio, freq_taper_frac=ftf, time_pad_frac=tpf, time_taper=taper)
        down = dw_common.downsample(torch.tensor(y), ratio, freq_taper_frac=ftf, time_pad_frac=tpf, time_taper=taper)
        cases.append({"nt": nt, "step_ratio": ratio, "freq_taper_frac": ftf, "time_pad_frac": tpf,
                      "time_taper": taper, "x": rounded(x, torch.float64), "y": rounded(y, torch.float64),
                      "upsampled": rounded(up, torch.float64), "downsampled": rounded(down, torch.float64)})
    return cases


def run_born_case(name, seed, shape, spacing, dt, nt, nshots, nsources, nreceivers, nbg_receivers,
                  accuracy, pml_width, pml_freq, max_vel, dtype, compare_gradients=True):
    """deepwave.scalar_born on a smooth random model with a random scatter; the loss whose
    gradients are recorded is sum(scattered * weights) + sum(background * bg_weights)."""
    torch.set_default_dtype(dtype)
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    v = smooth_model(rng, shape, 1500.0, 2500.0)
    scatter = 100.0 * rng.standard_normal(shape)
    amps = ricker_like(rng, nshots, nsources, nt)
    src = distinct_locations(rng, shape, nshots, nsources, True)
    rec = distinct_locations(rng, shape, nshots, nreceivers, False)
    bg = distinct_locations(rng, shape, nshots, nbg_receivers, True)
    weights = rng.standard_normal((nshots, nreceivers, nt))
    bg_weights = rng.standard_normal((nshots, nbg_receivers, nt))

    v_t = torch.tensor(v, dtype=dtype)
    s_t = torch.tensor(scatter, dtype=dtype, requires_grad=True)
    a_t = torch.tensor(amps, dtype=dtype, requires_grad=True)
    # deepwave 0.1 names the scatter dv (keyword only) and the scattered receivers
    # sc_receiver_locations; 0.0.27 took scatter positionally and receiver_locations.
    params = inspect.signature(deepwave.scalar_born).parameters
    kwargs = dict(source_amplitudes=a_t, source_locations=torch.tensor(src),
                  bg_receiver_locations=torch.tensor(bg), accuracy=accuracy,
                  pml_width=list(pml_width), pml_freq=pml_freq, max_vel=max_vel)
    kwargs["sc_receiver_locations" if "sc_receiver_locations" in params
           else "receiver_locations"] = torch.tensor(rec)
    if "location_interpolation" in params:
        kwargs["location_interpolation"] = "none"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "dv" in params:
            out = deepwave.scalar_born(v_t, list(spacing), dt, dv=s_t, **kwargs)
        else:
            out = deepwave.scalar_born(v_t, s_t, list(spacing), dt, **kwargs)
    # Both versions: ..., background receivers, scattered receivers.
    bg_data, sc_data = out[-2], out[-1]
    loss = (sc_data * torch.tensor(weights, dtype=dtype)).sum() + \
        (bg_data * torch.tensor(bg_weights, dtype=dtype)).sum()
    loss.backward()
    step_ratio = dw_common.cfl_condition_n(list(spacing), dt, max_vel)[1]
    return {
        "name": name, "dtype": "float64" if dtype == torch.float64 else "float32",
        "shape": list(shape), "spacing": list(spacing), "dt": dt, "nt": nt, "nshots": nshots,
        "nsources": nsources, "nreceivers": nreceivers, "nbg_receivers": nbg_receivers,
        "accuracy": accuracy, "pml_width": list(pml_width), "pml_freq": pml_freq,
        "max_vel": max_vel, "step_ratio": step_ratio, "compare_gradients": compare_gradients,
        "v": rounded(v_t, dtype), "scatter": rounded(s_t.detach(), dtype),
        "source_amplitudes": rounded(a_t.detach(), dtype),
        "source_locations": src.ravel().tolist(), "receiver_locations": rec.ravel().tolist(),
        "bg_receiver_locations": bg.ravel().tolist(),
        "receiver_weights": rounded(weights, dtype), "bg_receiver_weights": rounded(bg_weights, dtype),
        "receivers": rounded(sc_data.detach(), dtype),
        "bg_receivers": rounded(bg_data.detach(), dtype),
        "grad_scatter": rounded(s_t.grad, dtype) if compare_gradients else [],
        "grad_source_amplitudes": rounded(a_t.grad, dtype) if compare_gradients else [],
    }


def born_cases():
    return [
        # 2-D, accuracy 4, per-side PML, anisotropic spacing, step ratio 1.
        run_born_case("born_2d_acc4_f64", 11, (16, 14), (5.0, 6.0), 0.0008, 30, 2, 1, 4, 3, 4,
                      (3, 4, 2, 5), 20.0, 2600.0, torch.float64),
        run_born_case("born_2d_acc4_f32", 11, (16, 14), (5.0, 6.0), 0.0008, 30, 2, 1, 4, 3, 4,
                      (3, 4, 2, 5), 20.0, 2600.0, torch.float32),
        # 2-D, accuracy 8, resampled (step ratio > 1): the data compare; Deepwave stores the
        # gradient's history every step_ratio inner steps (an approximation) where sciproxy
        # stores every inner step (exact), so the gradients are not compared.
        run_born_case("born_2d_acc8_resample_f64", 12, (14, 15), (5.0, 5.0), 0.003, 20, 1, 2, 3, 2,
                      8, (4, 3, 3, 4), 25.0, 2500.0, torch.float64, compare_gradients=False),
    ]


def write_json(data, path):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, separators=(",", ":"))
    os.replace(path + ".tmp", path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=OUTPUT)
    parser.add_argument("--born-output", default=BORN_OUTPUT)
    parser.add_argument("--only", choices=["scalar", "born"], default=None,
                        help="write only this file (default: both)")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.only != "scalar":
        data = {
            "generator": "tests/data/make_deepwave_reference.py",
            "deepwave_version": deepwave.__version__,
            "torch_version": torch.__version__,
            "cases": born_cases(),
        }
        torch.set_default_dtype(torch.float32)
        write_json(data, args.born_output)
    if args.only == "born":
        return
    cases = [
        # 2-D, accuracy 4, per-side PML, anisotropic spacing, step_ratio 1: everything identical.
        run_case("2d_acc4_f64", 1, (14, 12), (5.0, 6.0), 0.0008, 25, 2, 2, 3, 4, (3, 4, 2, 5), 20.0, 2600.0,
                 torch.float64, record_final=True),
        run_case("2d_acc4_f32", 1, (14, 12), (5.0, 6.0), 0.0008, 25, 2, 2, 3, 4, (3, 4, 2, 5), 20.0, 2600.0,
                 torch.float32),
        # 1-D, accuracy 8, resampling with taper, padding and Hann window, odd nt.
        run_case("1d_acc8_resample_f64", 2, (40,), (4.0,), 0.004, 17, 2, 1, 2, 8, (6, 3), 25.0, 2500.0,
                 torch.float64, freq_taper_frac=0.2, time_pad_frac=0.3, time_taper=True, compare_grad_v=False),
        # 3-D, accuracy 2, one model per shot, survey window.
        run_case("3d_acc2_window_f64", 3, (8, 9, 10), (5.0, 5.0, 5.0), 0.0006, 14, 2, 1, 2, 2, (2, 1, 2, 2, 1, 3),
                 15.0, 2500.0, torch.float64, nmodels=2, survey_pad=[1, None, 0, 2, None, 1],
                 loc_lo=[2, 2, 2], loc_hi=[6, 7, 8]),
        # 2-D, accuracy 6 and 8, no PML on two sides.
        run_case("2d_acc6_f64", 4, (12, 13), (5.0, 5.0), 0.0008, 20, 1, 1, 2, 6, (0, 3, 4, 0), 25.0, 2500.0,
                 torch.float64),
        run_case("2d_acc8_f64", 5, (12, 13), (5.0, 5.0), 0.0008, 20, 1, 1, 2, 8, (2, 3, 4, 5), 25.0, 2500.0,
                 torch.float64),
    ]
    data = {
        "generator": "tests/data/make_deepwave_reference.py",
        "deepwave_version": deepwave.__version__,
        "torch_version": torch.__version__,
        "cases": cases,
        "resample": resample_cases(),
    }
    torch.set_default_dtype(torch.float32)
    write_json(data, args.output)


if __name__ == "__main__":
    main()
