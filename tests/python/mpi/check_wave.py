"""sciproxy.wave.scalar, scalar_gradient, scalar_born and scalar_born_gradient with an mpi4py
communicator, run by tests/python/test_mpi.py under mpiexec: the shots split across the ranks
give one process's outputs (bit for bit per shot; the shared model's gradient, summed over the
ranks, to 1e-12 relative), and bad input on one rank is raised on every rank."""

import numpy as np

from sciproxy import wave as sciproxy_wave
from ranks import block, check, comm, finish, prefix, rank, size


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


nshots, nt, nrec = 4, 60, 5
v = np.full((20, 26), 1500.0)
v[10:] = 2000.0
t = np.arange(nt) * 0.002 - 0.04
wavelet = (1 - 2 * (np.pi * 25 * t) ** 2) * np.exp(-(np.pi * 25 * t) ** 2)
amplitudes = np.tile(wavelet, (nshots, 1, 1))
sources = np.array([[[1, 2 + 5 * s]] for s in range(nshots)])
receivers = np.array([[[2, 1 + 5 * r] for r in range(nrec)] for _ in range(nshots)])
common = dict(accuracy=4, pml_width=5, pml_freq=25, device="cpu")

alone = sciproxy_wave.scalar(v, 5.0, 0.002, amplitudes, sources, receivers, **common)
for results in ("all", "root"):
    out = sciproxy_wave.scalar(v, 5.0, 0.002, amplitudes, sources, receivers, comm=comm,
                          results=results, **common)
    if results == "all" or rank == 0:
        check(np.array_equal(out.receiver_amplitudes, alone.receiver_amplitudes),
              f"scalar {results}: receivers")
        check(np.array_equal(out.wavefield_0, alone.wavefield_0), f"scalar {results}: wavefield")
    else:
        check(out.receiver_amplitudes.shape == (0, nrec, nt), f"scalar root: rank {rank} shape")

first, count = block(nshots)
own = sciproxy_wave.scalar(v, 5.0, 0.002, amplitudes[first:first + count], sources[first:first + count],
                      receivers[first:first + count], comm=comm, shots="own", results="own",
                      **common)
check(np.array_equal(own.receiver_amplitudes, alone.receiver_amplitudes[first:first + count]),
      "scalar own: receivers")

residual = np.sin(np.arange(nshots * nrec * nt) * 0.3).reshape(nshots, nrec, nt)
g_alone = sciproxy_wave.scalar_gradient(v, 5.0, 0.002, amplitudes, sources, receivers,
                                   grad_receiver_amplitudes=residual, **common)
g = sciproxy_wave.scalar_gradient(v, 5.0, 0.002, amplitudes, sources, receivers,
                             grad_receiver_amplitudes=residual, comm=comm, **common)
check(rel(g.grad_v, g_alone.grad_v) <= 1e-12, f"gradient: grad_v {rel(g.grad_v, g_alone.grad_v)}")
check(np.array_equal(g.grad_source_amplitudes, g_alone.grad_source_amplitudes), "gradient: sources")

scatter = np.zeros_like(v)
scatter[12:14, 10:14] = 40.0
b_alone = sciproxy_wave.scalar_born(v, scatter, 5.0, 0.002, amplitudes, sources, receivers, **common)
b = sciproxy_wave.scalar_born(v, scatter, 5.0, 0.002, amplitudes, sources, receivers, comm=comm,
                         **common)
check(np.array_equal(b.receiver_amplitudes, b_alone.receiver_amplitudes), "born: receivers")
m_alone = sciproxy_wave.scalar_born_gradient(v, scatter, 5.0, 0.002, amplitudes, sources, receivers,
                                        grad_receiver_amplitudes=residual, **common)
m = sciproxy_wave.scalar_born_gradient(v, scatter, 5.0, 0.002, amplitudes, sources, receivers,
                                  grad_receiver_amplitudes=residual, comm=comm, **common)
check(rel(m.grad_scatter, m_alone.grad_scatter) <= 1e-12, "born gradient: image")
check(np.array_equal(m.grad_source_amplitudes, m_alone.grad_source_amplitudes),
      "born gradient: sources")

# A residual of the wrong shape on the last rank only: every rank raises, naming it.
bad = residual if rank != size - 1 else residual[:, :, :-1]
try:
    sciproxy_wave.scalar_gradient(v, 5.0, 0.002, amplitudes, sources, receivers,
                             grad_receiver_amplitudes=bad, comm=comm, **common)
    check(False, "bad residual on one rank: no error")
except ValueError as e:
    check(str(e).startswith(prefix() + "grad_receiver_amplitudes: expected shape"), f"residual: {e}")
try:
    sciproxy_wave.scalar(v, 5.0, 0.002, amplitudes, sources, receivers, comm=comm, results="own",
                    **common)
    check(False, "results='own' with shots='all': no error")
except ValueError as e:
    check("results: expected 'all' or 'root' with shots='all'" in str(e), f"results: {e}")

finish("check_wave")
