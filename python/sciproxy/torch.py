"""sciproxy.torch: the scalar propagator as a differentiable PyTorch function.

A drop-in for ``deepwave.scalar`` (Deepwave 0.0.27's signature and returned tuple)::

    from sciproxy.torch import scalar          # instead of: from deepwave import scalar
    out = scalar(v, dx, dt, source_amplitudes=amps, source_locations=src,
                 receiver_locations=rec, pml_freq=25)
    loss = torch.nn.functional.mse_loss(out[-1], observed)
    loss.backward()                            # v.grad, amps.grad

Tensors go in and come out (on the device and with the dtype of ``v``); the propagation runs in
sciproxy (``device``: 'auto' follows the tensors: 'cuda:N' for CUDA tensors, else 'cpu').
``backward`` calls ``sciproxy.wave.scalar_gradient``, which reruns the forward pass and then its
exact adjoint, and gives gradients with respect to v, the source amplitudes and the initial
state. Only first derivatives are available (no double backward).

This module imports without PyTorch; calling ``scalar`` then raises ImportError.
"""

from __future__ import annotations

import numpy as np

from . import wave as _wave

try:
    import torch as _torch
except ImportError as _error:  # the module still imports; scalar() says what is missing
    _torch = None
    _torch_import_error = _error
else:
    _torch_import_error = None

__all__ = ["scalar", "available"]

available = _torch is not None


def _require_torch():
    if _torch is None:
        raise ImportError(
            "sciproxy.torch.scalar needs PyTorch, which could not be imported "
            f"({_torch_import_error}); install it (pip install torch) or use the numpy "
            "interface sciproxy.wave.scalar"
        )


def _numpy(t, dtype=None):
    if t is None:
        return None
    if isinstance(t, _torch.Tensor):
        a = t.detach().cpu().numpy()
    else:
        a = np.asarray(t)
    return a if dtype is None else np.ascontiguousarray(a, dtype=dtype)


def _sciproxy_device(device, reference):
    if device != "auto":
        return device
    if reference.is_cuda:
        return f"cuda:{reference.device.index or 0}"
    return "cpu"


if _torch is not None:

    class _ScalarFunction(_torch.autograd.Function):
        """Inputs: (config, v, source_amplitudes, *initial_state); outputs: Deepwave's tuple."""

        @staticmethod
        def forward(ctx, config, v, source_amplitudes, *state):
            dtype = _numpy(v).dtype
            names = config["state_names"]
            initial = {k: _numpy(s, dtype) for k, s in zip(names, state) if s is not None}
            kwargs = dict(config["kwargs"])
            kwargs.update(initial)
            v_np = _numpy(v)
            amps = _numpy(source_amplitudes, dtype)
            run = _wave.scalar_run(v_np, source_amplitudes=amps, **kwargs)
            ctx.set_materialize_grads(False)  # outputs without a gradient arrive as None
            ctx.config = config
            ctx.v_np, ctx.amps, ctx.initial = v_np, amps, initial
            ctx.has_sources = source_amplitudes is not None
            ctx.state_given = [s is not None for s in state]
            ctx.target = v.device
            return tuple(_torch.from_numpy(np.ascontiguousarray(a)).to(ctx.target) for a in run)

        @staticmethod
        def backward(ctx, *grads):
            names = ctx.config["state_names"]
            dtype = ctx.v_np.dtype
            grad_final = {k: _numpy(g, dtype) for k, g in zip(names, grads[:-1]) if g is not None}
            grad_r = grads[-1]
            if grad_r is None and not grad_final:  # no output reached the loss
                return (None,) * (3 + len(names))
            kwargs = dict(ctx.config["kwargs"])
            kwargs.update(ctx.initial)
            details = _wave.scalar_gradient(
                ctx.v_np, source_amplitudes=ctx.amps, **kwargs,
                grad_receiver_amplitudes=None if grad_r is None else _numpy(grad_r, dtype),
                grad_final_state=grad_final or None, return_details=True)

            def tensor(a):
                return None if a is None else _torch.from_numpy(np.ascontiguousarray(a)).to(ctx.target)

            grad_v = tensor(details["grad_v"]) if ctx.needs_input_grad[1] else None
            grad_src = (tensor(details["grad_source_amplitudes"])
                        if ctx.has_sources and ctx.needs_input_grad[2] else None)
            gi = details["grad_initial_state"] or {}
            grad_state = [tensor(gi.get(k)) if given and ctx.needs_input_grad[3 + i] else None
                          for i, (k, given) in enumerate(zip(names, ctx.state_given))]
            return (None, grad_v, grad_src, *grad_state)


def scalar(v, grid_spacing, dt, source_amplitudes=None, source_locations=None,
           receiver_locations=None, accuracy=4, pml_width=20, pml_freq=None, max_vel=None,
           survey_pad=None, wavefield_0=None, wavefield_m1=None, psiz_m1=None, psiy_m1=None,
           psix_m1=None, zetaz_m1=None, zetay_m1=None, zetax_m1=None, origin=None, nt=None,
           model_gradient_sampling_interval=1, freq_taper_frac=0.0, time_pad_frac=0.0,
           time_taper=False, storage_mode="device", storage_path=".", storage_compression=False,
           device="auto", nparallel=None):
    """``deepwave.scalar`` with tensors, computed by sciproxy; see sciproxy.wave.scalar.

    Returns (wavefield_0, wavefield_m1, *psi_m1, *zeta_m1, receiver_amplitudes) as tensors on
    v's device, differentiable with respect to v, source_amplitudes and the initial state.
    """
    _require_torch()
    if not isinstance(v, _torch.Tensor):
        raise TypeError(f"v: expected a torch.Tensor, got {type(v).__name__}")
    if v.dtype not in (_torch.float32, _torch.float64):
        raise TypeError(f"v: expected a float32 or float64 tensor, got {v.dtype}")
    state = dict(wavefield_0=wavefield_0, wavefield_m1=wavefield_m1, psiz_m1=psiz_m1,
                 psiy_m1=psiy_m1, psix_m1=psix_m1, zetaz_m1=zetaz_m1, zetay_m1=zetay_m1,
                 zetax_m1=zetax_m1)
    # ndim as sciproxy.wave decides it, to order the state like Deepwave.
    loc = source_locations if source_locations is not None else receiver_locations
    if loc is not None:
        ndim = int(np.shape(_numpy(loc))[-1])
    elif psiz_m1 is not None or zetaz_m1 is not None:
        ndim = 3
    elif wavefield_0 is not None or wavefield_m1 is not None:
        ndim = (wavefield_0 if wavefield_0 is not None else wavefield_m1).dim() - 1
    else:
        ndim = v.dim()
    if not 1 <= ndim <= 3:
        raise ValueError(f"v: expected a model of 1 to 3 dimensions, got {tuple(v.shape)}")
    names = _wave.state_names(ndim)
    for k, s in state.items():
        if s is not None and k not in names:
            raise ValueError(f"{k}: not used by a {ndim}-D model (its state is {', '.join(names)})")
    if pml_freq is None:
        import warnings

        warnings.warn("pml_freq was not set, so defaulting to 25 Hz (as Deepwave does); pass "
                      "pml_freq=<dominant frequency> to silence this", stacklevel=2)
        pml_freq = 25.0
    config = {
        "state_names": names,
        "kwargs": dict(
            grid_spacing=grid_spacing, dt=dt, source_locations=_numpy(source_locations),
            receiver_locations=_numpy(receiver_locations), accuracy=accuracy,
            pml_width=pml_width, pml_freq=pml_freq, max_vel=max_vel, survey_pad=survey_pad,
            origin=origin, nt=nt, model_gradient_sampling_interval=model_gradient_sampling_interval,
            freq_taper_frac=freq_taper_frac, time_pad_frac=time_pad_frac, time_taper=time_taper,
            storage_mode=storage_mode, storage_path=storage_path,
            storage_compression=storage_compression, device=_sciproxy_device(device, v),
            nparallel=nparallel),
    }
    return _ScalarFunction.apply(config, v, source_amplitudes, *[state[k] for k in names])
