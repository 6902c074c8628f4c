// wave: sources and receivers between the user's samples and the propagator's inner steps. The
// user's samples (interval dt) become step_ratio inner steps of dt / step_ratio each: sources are
// upsampled (resample.hpp) and scaled by -v(source cell)^2 dt_inner^2, the inner receiver
// samples are downsampled; the kernels take both time-major, [nt_inner, nshots, traces].
#include <algorithm>
#include <cstdint>
#include <vector>

#include "setup.hpp"

namespace sciproxy::wave::detail {

// Sources and receivers: [shot, trace, user sample] <-> time-major inner samples

// Scaled inner sources [nt_inner, nshots, nsources] = -v_s^2 dt^2 upsample(amplitudes).
template <class T>
std::vector<T> scaled_sources(const Setup<T>& s, std::span<const T> amplitudes,
                              std::vector<T>* inner_out) {
  const std::int64_t ntr = s.nshots * s.nsources;
  std::vector<T> inner(static_cast<std::size_t>(ntr * s.nt_inner));
  detail::upsample(amplitudes.data(), ntr, s.nt, s.resampling, inner.data());
  std::vector<T> out(inner.size());
  const double dt2 = s.inner_dt * s.inner_dt;
  for (std::int64_t tr = 0; tr < ntr; ++tr) {
    const double vs =
        s.v[s.model_of(tr / std::max<std::int64_t>(s.nsources, 1)) * s.points + s.source_cells[tr]];
    const double scale = s.source_cells[tr] == kIgnoredCell ? 0.0 : -vs * vs * dt2;
    for (std::int64_t t = 0; t < s.nt_inner; ++t)
      out[t * ntr + tr] = static_cast<T>(scale * inner[tr * s.nt_inner + t]);
  }
  if (inner_out) *inner_out = std::move(inner);
  return out;
}

// out[c * rows + r] = in[r * cols + c], in tiles that fit in L1, the tiles shared among the
// threads (element by element, the writes or the reads stride a whole row).
template <class T>
void transpose(const T* in, std::int64_t rows, std::int64_t cols, T* out) {
  constexpr std::int64_t kTile = 32;
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (rows * cols >= (std::int64_t(1) << 20))
  for (std::int64_t tile = 0; tile < row_tiles * col_tiles; ++tile) {
    const std::int64_t r0 = tile / col_tiles * kTile, c0 = tile % col_tiles * kTile;
    const std::int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
    for (std::int64_t c = c0; c < c1; ++c)
      for (std::int64_t r = r0; r < r1; ++r) out[c * rows + r] = in[r * cols + c];
  }
}

// [nt_inner, nshots, nreceivers] -> [nshots, nreceivers, nt]
template <class T>
std::vector<T> receivers_out(const Setup<T>& s, const std::vector<T>& tm) {
  const std::int64_t ntr = s.nshots * s.nreceivers;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)),
      out(static_cast<std::size_t>(ntr * s.nt));
  transpose(tm.data(), s.nt_inner, ntr, traces.data());
  detail::downsample(traces.data(), ntr, s.nt, s.resampling, out.data());
  return out;
}

// Adjoint of receivers_out: [nshots, nreceivers, nt] -> [nt_inner, nshots, nreceivers]
template <class T>
std::vector<T> receivers_in_adjoint(const Setup<T>& s, std::span<const T> grad) {
  const std::int64_t ntr = s.nshots * s.nreceivers;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)), tm(traces.size(), T(0));
  if (grad.empty()) return tm;
  detail::downsample_adjoint(grad.data(), ntr, s.nt, s.resampling, traces.data());
  transpose(traces.data(), ntr, s.nt_inner, tm.data());
  for (std::int64_t tr = 0; tr < ntr; ++tr)
    if (s.receiver_cells[tr] == kIgnoredCell)
      for (std::int64_t t = 0; t < s.nt_inner; ++t) tm[t * ntr + tr] = T(0);
  return tm;
}

// [nt_inner, nshots, count] <-> [nshots, count, nt]: receivers_out / receivers_in_adjoint for
// any number of traces per shot.
template <class T>
std::vector<T> traces_out(const Setup<T>& s, std::int64_t count, const std::vector<T>& tm) {
  const std::int64_t ntr = s.nshots * count;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)),
      out(static_cast<std::size_t>(ntr * s.nt));
  for (std::int64_t t = 0; t < s.nt_inner; ++t)
    for (std::int64_t tr = 0; tr < ntr; ++tr) traces[tr * s.nt_inner + t] = tm[t * ntr + tr];
  detail::downsample(traces.data(), ntr, s.nt, s.resampling, out.data());
  return out;
}

template <class T>
std::vector<T> traces_in_adjoint(const Setup<T>& s, std::int64_t count, const std::int64_t* cells,
                                 std::span<const T> grad) {
  const std::int64_t ntr = s.nshots * count;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)), tm(traces.size(), T(0));
  if (grad.empty()) return tm;
  detail::downsample_adjoint(grad.data(), ntr, s.nt, s.resampling, traces.data());
  for (std::int64_t t = 0; t < s.nt_inner; ++t)
    for (std::int64_t tr = 0; tr < ntr; ++tr)
      if (cells[tr] != kIgnoredCell) tm[t * ntr + tr] = traces[tr * s.nt_inner + t];
  return tm;
}

#define SCIPROXY_INSTANTIATE(T)                                                                    \
  template std::vector<T> scaled_sources<T>(const Setup<T>&, std::span<const T>, std::vector<T>*); \
  template std::vector<T> receivers_out<T>(const Setup<T>&, const std::vector<T>&);                \
  template std::vector<T> receivers_in_adjoint<T>(const Setup<T>&, std::span<const T>);            \
  template std::vector<T> traces_out<T>(const Setup<T>&, std::int64_t, const std::vector<T>&);     \
  template std::vector<T> traces_in_adjoint<T>(const Setup<T>&, std::int64_t, const std::int64_t*, \
                                               std::span<const T>);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::wave::detail
