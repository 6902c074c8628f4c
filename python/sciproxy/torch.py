"""sciproxy.torch: the scalar propagator and Born modelling as differentiable PyTorch functions.

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

``scalar_born`` does the same for ``deepwave.scalar_born`` (0.0.27's signature and returned
tuple)::

    from sciproxy.torch import scalar_born
    out = scalar_born(v, scatter, dx, dt, source_amplitudes=amps, source_locations=src,
                      receiver_locations=rec, bg_receiver_locations=bg_rec, pml_freq=25)
    loss = torch.nn.functional.mse_loss(out[-1], observed)   # out[-2]: background data
    loss.backward()                            # scatter.grad (the migration image), amps.grad

Its ``backward`` calls ``sciproxy.wave.scalar_born_gradient``: the gradient with respect to the
scatter (J^T of the scattered-data gradient) and to the source amplitudes (from both the
scattered and the background data). Not available, and refused with a message rather than
silently wrong: the gradient with respect to v (it needs the second derivative of ``scalar``),
with respect to the initial wavefields, or of a loss that uses the returned final wavefields.

This module imports without PyTorch; calling ``scalar`` or ``scalar_born`` then raises
ImportError.
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

__all__ = ["scalar", "scalar_born", "available"]

available = _torch is not None


def _require_torch(name="scalar"):
    if _torch is None:
        raise ImportError(
            f"sciproxy.torch.{name} needs PyTorch, which could not be imported "
            f"({_torch_import_error}); install it (pip install torch) or use the numpy "
            f"interface sciproxy.wave.{name}"
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


_BORN_STATE = ("wavefield_0", "wavefield_m1", "wavefield_sc_0", "wavefield_sc_m1")


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


    class _ScalarBornFunction(_torch.autograd.Function):
        """Inputs: (config, v, scatter, source_amplitudes, *initial_state); outputs: the tuple of
        sciproxy.wave.scalar_born. Differentiable with respect to scatter and source_amplitudes."""

        @staticmethod
        def forward(ctx, config, v, scatter, source_amplitudes, *state):
            v_np = _numpy(v)
            dtype = v_np.dtype
            kwargs = dict(config["kwargs"])
            kwargs.update({k: _numpy(s, dtype) for k, s in zip(_BORN_STATE, state)
                           if s is not None})
            scatter_np = _numpy(scatter, dtype)
            amps = _numpy(source_amplitudes, dtype)
            out = _wave.scalar_born(v_np, scatter_np, source_amplitudes=amps,
                                    origin=config["origin"], **kwargs)
            ctx.set_materialize_grads(False)  # outputs without a gradient arrive as None
            ctx.config = config
            ctx.v_np, ctx.scatter_np, ctx.amps = v_np, scatter_np, amps
            ctx.has_sources = source_amplitudes is not None
            ctx.shapes = (out[-1].shape, out[-2].shape)
            ctx.target = v.device
            return tuple(_torch.from_numpy(np.ascontiguousarray(a)).to(ctx.target) for a in out)

        @staticmethod
        def backward(ctx, *grads):
            nstate = len(grads) - 2
            if any(g is not None and bool(_torch.any(g != 0)) for g in grads[:nstate]):
                raise RuntimeError(
                    "sciproxy.torch.scalar_born: the loss uses a returned final wavefield; "
                    "gradients with respect to the final wavefields are not available (use the "
                    "receiver amplitudes out[-1] and out[-2])")
            grad_bg, grad_sc = grads[-2], grads[-1]
            nothing = (None,) * (4 + len(_BORN_STATE))
            if grad_sc is None and grad_bg is None:
                return nothing
            want_scatter = ctx.needs_input_grad[2]
            want_source = ctx.has_sources and ctx.needs_input_grad[3]
            if not want_scatter and not want_source:
                return nothing
            dtype = ctx.v_np.dtype
            sc_shape, bg_shape = ctx.shapes
            kwargs = dict(ctx.config["kwargs"])
            kwargs.update(ctx.config["gradient_kwargs"])
            grad_scatter, grad_src = _wave.scalar_born_gradient(
                ctx.v_np, ctx.scatter_np, source_amplitudes=ctx.amps, **kwargs,
                grad_receiver_amplitudes=(np.zeros(sc_shape, dtype) if grad_sc is None
                                          else _numpy(grad_sc, dtype)),
                grad_bg_receiver_amplitudes=(None if grad_bg is None or bg_shape[1] == 0
                                             else _numpy(grad_bg, dtype)),
                source_gradient=want_source)

            def tensor(a):
                return None if a is None else _torch.from_numpy(np.ascontiguousarray(a)).to(ctx.target)

            return (None, None, tensor(grad_scatter) if want_scatter else None,
                    tensor(grad_src) if want_source else None) + (None,) * len(_BORN_STATE)


def scalar(v, grid_spacing, dt, source_amplitudes=None, source_locations=None,
           receiver_locations=None, accuracy=4, pml_width=20, pml_freq=None, max_vel=None,
           survey_pad=None, wavefield_0=None, wavefield_m1=None, psiz_m1=None, psiy_m1=None,
           psix_m1=None, zetaz_m1=None, zetay_m1=None, zetax_m1=None, origin=None, nt=None,
           model_gradient_sampling_interval=1, freq_taper_frac=0.0, time_pad_frac=0.0,
           time_taper=False, storage_mode="device", storage_path=None, storage_compression=False,
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
    out = _ScalarFunction.apply(config, v, source_amplitudes, *[state[k] for k in names])
    return _wave.PropagatorOutput(names + ["receiver_amplitudes"], out)


def scalar_born(v, scatter, grid_spacing, dt, source_amplitudes=None, source_locations=None,
                receiver_locations=None, bg_receiver_locations=None, accuracy=4, pml_width=20,
                pml_freq=None, max_vel=None, survey_pad=None, wavefield_0=None,
                wavefield_m1=None, wavefield_sc_0=None, wavefield_sc_m1=None, origin=None,
                nt=None, model_gradient_sampling_interval=1, freq_taper_frac=0.0,
                time_pad_frac=0.0, time_taper=False, storage_mode="device", storage_path=None,
                storage_compression=False, device="auto", nparallel=None):
    """``deepwave.scalar_born`` with tensors, computed by sciproxy; see sciproxy.wave.scalar_born.

    Returns (wavefield_0, wavefield_m1, *psi_m1, *zeta_m1, wavefield_sc_0, wavefield_sc_m1,
    *psi_sc_m1, *zeta_sc_m1, bg_receiver_amplitudes, receiver_amplitudes) as tensors on v's
    device. The receiver amplitudes are differentiable with respect to ``scatter`` (the gradient
    is the migration image) and ``source_amplitudes``. The storage options apply to the
    backward pass. A v that requires a gradient, or an initial wavefield when a gradient is
    wanted, is refused (ValueError): those gradients are not available.
    """
    _require_torch("scalar_born")
    if not isinstance(v, _torch.Tensor):
        raise TypeError(f"v: expected a torch.Tensor, got {type(v).__name__}")
    if v.dtype not in (_torch.float32, _torch.float64):
        raise TypeError(f"v: expected a float32 or float64 tensor, got {v.dtype}")
    if scatter is None:
        raise ValueError(f"scatter: expected a tensor of v's shape {tuple(v.shape)}, got None")
    if not isinstance(scatter, _torch.Tensor):
        raise TypeError(f"scatter: expected a torch.Tensor, got {type(scatter).__name__}")
    if source_amplitudes is not None and not isinstance(source_amplitudes, _torch.Tensor):
        raise TypeError(f"source_amplitudes: expected a torch.Tensor, got "
                        f"{type(source_amplitudes).__name__}")
    grad_on = _torch.is_grad_enabled()
    if grad_on and v.requires_grad:
        raise ValueError(
            "v: the gradient of Born data with respect to the background velocity is not "
            "available in sciproxy.torch.scalar_born; pass v.detach() (scatter and "
            "source_amplitudes stay differentiable)")
    state = dict(wavefield_0=wavefield_0, wavefield_m1=wavefield_m1,
                 wavefield_sc_0=wavefield_sc_0, wavefield_sc_m1=wavefield_sc_m1)
    wants_grad = grad_on and (scatter.requires_grad or (
        source_amplitudes is not None and source_amplitudes.requires_grad))
    for k, s in state.items():
        if s is None:
            continue
        if wants_grad or (isinstance(s, _torch.Tensor) and s.requires_grad and grad_on):
            raise ValueError(
                f"{k}: gradients of a Born run that starts from an initial wavefield are not "
                "available; start from rest, or detach scatter and source_amplitudes")
    if pml_freq is None:
        import warnings

        warnings.warn("pml_freq was not set, so defaulting to 25 Hz (as Deepwave does); pass "
                      "pml_freq=<dominant frequency> to silence this", stacklevel=2)
        pml_freq = 25.0
    config = {
        "kwargs": dict(
            grid_spacing=grid_spacing, dt=dt, source_locations=_numpy(source_locations),
            receiver_locations=_numpy(receiver_locations),
            bg_receiver_locations=_numpy(bg_receiver_locations), accuracy=accuracy,
            pml_width=pml_width, pml_freq=pml_freq, max_vel=max_vel, survey_pad=survey_pad,
            nt=nt, model_gradient_sampling_interval=model_gradient_sampling_interval,
            freq_taper_frac=freq_taper_frac, time_pad_frac=time_pad_frac, time_taper=time_taper,
            device=_sciproxy_device(device, v), nparallel=nparallel),
        "gradient_kwargs": dict(storage_mode=storage_mode, storage_path=storage_path,
                                storage_compression=storage_compression),
        "origin": origin,
    }
    out = _ScalarBornFunction.apply(config, v, scatter, source_amplitudes,
                                    *[state[k] for k in _BORN_STATE])
    return _wave.PropagatorOutput(_wave.born_names((len(out) - 6) // 4), out)
