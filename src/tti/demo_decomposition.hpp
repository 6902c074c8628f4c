// The workshop operator under MPI: each rank's window of the grid and the refresh of its ghost
// ring (kernels.hpp, DemoExchange). docs/kernels/tti.md, "The workshop operator under MPI".
//
// The grid's points are split by a process grid p_0 x p_1 x p_2 (decomposition.hpp's choice and
// rank order) into contiguous blocks. A rank steps a window: its block widened by a ring of
// `ghost` points on each side that has a neighbour (not beyond the grid), its fields zero
// outside the window as if the window were the whole grid. One step of the operator reads
// 2M - 1 points along each axis (the flux reads u at -(M-1) .. M, the divergence the flux at
// -M .. M-1), so u on a ring of 2M - 1 points makes the block's step exact. Two modes:
//
//   one step per sweep (ghost = 2M - 1): the kernel computes u+ on the block only along x and y
//     (kernels.hpp, DemoProblem::update_box; z rows whole) and the flux on the block widened by
//     M, then u's ring is refreshed from the neighbours' blocks. Each point's update is computed
//     once along x and y; the flux of M layers per side and the z ring are computed again.
//   two steps per sweep (ghost = 2 (2M - 1); the fused kernel's, asked or chosen by the autotuner):
//     the kernel steps the whole window, the error of its false boundary moving 2M - 1 points
//     inwards per step, so the block is exact after the sweep; u's and u-'s rings are then
//     refreshed. The ring's two steps are computed twice (by the owner and the neighbour), which
//     pays where the blocks are large (demo_api.cpp chooses), as two steps per sweep read the
//     coefficients once for two steps.
//
// The ring comes in one exchange from every neighbour that shares a face, an edge or a corner
// of the block, started after a sweep and finished before the next needs it: with one step per
// sweep the next step's interior (the block less `ghost` points along each split axis), which
// reads no ring, is computed while it travels, when z is not split (z rows are computed whole).
// Every block must hold `ghost` points along a split axis, so that each ring comes from the
// next rank alone.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <exception>
#include <span>
#include <utility>
#include <vector>

#include "core/collective.hpp"
#include "sciproxy/core/communicator.hpp"
#include "tti/decomposition.hpp"
#include "tti/kernels.hpp"

namespace sciproxy::tti::demo_decomposition {

using Index = std::array<std::int64_t, 3>;

struct Window {
  std::array<int, 3> process_grid{1, 1, 1};
  std::array<int, 3> coords{0, 0, 0};
  Index own_lo{}, own_hi{};  // this rank's block, grid indices
  Index lo{}, hi{};          // its window: the block and the ghost rings that have a neighbour
  std::array<std::array<int, 2>, 3> neighbour{{{-1, -1}, {-1, -1}, {-1, -1}}};  // rank or -1
  std::int64_t ghost = 0;
  std::array<std::vector<std::int64_t>, 3> block_first;  // per axis: p_a + 1 bounds
  Index shape() const { return {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]}; }
  Index own_shape() const {
    return {own_hi[0] - own_lo[0], own_hi[1] - own_lo[1], own_hi[2] - own_lo[2]};
  }
  bool in_window(const Index& p) const {
    for (int a = 0; a < 3; ++a)
      if (p[a] < lo[a] || p[a] >= hi[a]) return false;
    return true;
  }
};

// The blocks of rank `rank` of `ranks` over a grid of n points per axis, with process grid
// `grid` (already chosen: decomposition::choose_process_grid).
inline Window window_of(const Index& n, std::int64_t ghost, int rank,
                        const std::array<int, 3>& grid) {
  Window w;
  w.ghost = ghost;
  w.process_grid = grid;
  const auto& p = grid;
  w.coords = {rank / (p[1] * p[2]), (rank / p[2]) % p[1], rank % p[2]};
  for (int a = 0; a < 3; ++a) {
    for (int c = 0; c <= p[a]; ++c)
      w.block_first[a].push_back(c == p[a] ? n[a] : collective::block_of(n[a], c, p[a]).first);
    w.own_lo[a] = w.block_first[a][w.coords[a]];
    w.own_hi[a] = w.block_first[a][w.coords[a] + 1];
    w.lo[a] = w.own_lo[a];
    w.hi[a] = w.own_hi[a];
    for (int side = 0; side < 2; ++side) {
      std::array<int, 3> c = w.coords;
      c[a] += side == 0 ? -1 : 1;
      if (c[a] < 0 || c[a] >= p[a]) continue;
      w.neighbour[a][side] = decomposition::rank_at(p, c);
      (side == 0 ? w.lo[a] : w.hi[a]) += side == 0 ? -ghost : ghost;
    }
  }
  return w;
}

// The refresh of a window's ghost ring after a sweep: one message each way per neighbour that
// shares a face, an edge or a corner (up to 26), holding the u layers (and u-'s, with_u_prev),
// all started together so that the caller computes while they travel (start, progress, finish).
template <class T>
class GhostExchange final : public kernels::DemoExchange<T> {
 public:
  GhostExchange(const Communicator& comm, const Window& w, bool with_u_prev)
      : comm_(comm), fields_(with_u_prev ? 2 : 1) {
    const std::int64_t g = w.ghost;
    for (int d0 = -1; d0 <= 1; ++d0)
      for (int d1 = -1; d1 <= 1; ++d1)
        for (int d2 = -1; d2 <= 1; ++d2) {
          const std::array<int, 3> d{d0, d1, d2},
              c{w.coords[0] + d0, w.coords[1] + d1, w.coords[2] + d2};
          bool exists = d != std::array<int, 3>{0, 0, 0};
          for (int a = 0; a < 3; ++a) exists = exists && c[a] >= 0 && c[a] < w.process_grid[a];
          if (!exists) continue;
          // Along an axis where d is 0 the block; else the `g` layers next to that side.
          Neighbour n;
          n.rank = decomposition::rank_at(w.process_grid, c);
          for (int a = 0; a < 3; ++a) {
            const std::int64_t lo = w.own_lo[a] - w.lo[a], hi = w.own_hi[a] - w.lo[a];
            n.send.lo[a] = d[a] == 0 ? lo : d[a] < 0 ? lo : hi - g;
            n.send.hi[a] = d[a] == 0 ? hi : d[a] < 0 ? lo + g : hi;
            n.receive.lo[a] = d[a] == 0 ? lo : d[a] < 0 ? lo - g : hi;
            n.receive.hi[a] = d[a] == 0 ? hi : d[a] < 0 ? lo : hi + g;
          }
          n.send_buffer.resize(static_cast<std::size_t>(fields_ * n.send.points()));
          n.receive_buffer.resize(static_cast<std::size_t>(fields_ * n.receive.points()));
          messages_.push_back(
              {n.rank, std::span<const T>(n.send_buffer), std::span<T>(n.receive_buffer)});
          neighbours_.push_back(std::move(n));
        }
  }

  void start(kernels::DemoFieldView<T> u, kernels::DemoFieldView<T> u_prev, bool stop) override {
    u_ = u;
    u_prev_ = u_prev;
    for (Neighbour& n : neighbours_) {
      copy(n.send, u, n.send_buffer.data(), true);
      if (fields_ == 2) copy(n.send, u_prev, n.send_buffer.data() + n.send.points(), true);
    }
    pending_ = collective::start_exchange<T>(comm_, messages_, kTag, stop ? 1 : 0);
  }
  bool finish() override {
    pending_.wait();
    if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
    for (Neighbour& n : neighbours_) {
      copy(n.receive, u_, n.receive_buffer.data(), false);
      if (fields_ == 2)
        copy(n.receive, u_prev_, n.receive_buffer.data() + n.receive.points(), false);
    }
    return pending_.stopped();
  }
  void progress() noexcept override {
    try {
      pending_.test();
    } catch (...) {
      if (!failed_) failed_ = std::current_exception();
    }
  }

 private:
  static constexpr int kTag = 41;
  struct Box {
    Index lo{}, hi{};  // window indices
    std::int64_t points() const { return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]); }
  };
  struct Neighbour {
    int rank = 0;
    Box send, receive;
    std::vector<T> send_buffer, receive_buffer;  // u's layers, then u-'s (with_u_prev)
  };

  // Copies box b of the field to or from `buffer` (to_buffer: pack; else unpack).
  static void copy(const Box& b, kernels::DemoFieldView<T> field, T* buffer, bool to_buffer) {
    decomposition::copy_box(b.lo, b.hi, field.origin, field.stride_x, field.stride_y, buffer,
                            to_buffer);
  }

  Communicator comm_;
  int fields_ = 2;
  std::vector<Neighbour> neighbours_;
  std::vector<collective::Message<T>> messages_;
  collective::Pending pending_;
  kernels::DemoFieldView<T> u_, u_prev_;
  std::exception_ptr failed_;  // of a progress() call, thrown by finish()
};

// Gathers the ranks' blocks of a field (each `mine`, its block's points in order) into the whole
// grid `all` [n0, n1, n2]: on every rank (root < 0) or on `root` only. One collective per z slab
// of the process grid: the blocks of a slab have rows of the same length, so a message counts
// rows of z, not points, and stays within MPI's int counts for any grid.
template <class T>
void gather_blocks(const Communicator& comm, const Window& w, const Index& n,
                   std::span<const T> mine, std::vector<T>& all, int root) {
  const int ranks = comm.size();
  const bool receives = root < 0 || comm.rank() == root;
  if (receives) all.assign(static_cast<std::size_t>(n[0] * n[1] * n[2]), T(0));
  const auto& p = w.process_grid;
  for (int c2 = 0; c2 < p[2]; ++c2) {
    const std::int64_t z0 = w.block_first[2][c2], nz = w.block_first[2][c2 + 1] - z0;
    std::vector<std::int64_t> counts(static_cast<std::size_t>(ranks), 0);
    std::int64_t rows = 0;
    for (int r = 0; r < ranks; ++r) {
      const std::array<int, 3> c{r / (p[1] * p[2]), (r / p[2]) % p[1], r % p[2]};
      if (c[2] != c2) continue;
      counts[r] = (w.block_first[0][c[0] + 1] - w.block_first[0][c[0]]) *
                  (w.block_first[1][c[1] + 1] - w.block_first[1][c[1]]);
      rows += counts[r];
    }
    std::vector<T> slab(static_cast<std::size_t>(receives ? rows * nz : 0));
    const bool in_slab = w.coords[2] == c2;
    std::span<const T> sent = in_slab ? mine : std::span<const T>();
    if (root < 0) {
      // allgather_rows reads a rank's own rows from `slab` in place.
      std::int64_t first = 0;
      for (int r = 0; r < comm.rank(); ++r) first += counts[r];
      std::copy(sent.begin(), sent.end(), slab.begin() + first * nz);
      collective::allgather_rows<T>(comm, slab, counts, nz);
    } else {
      collective::gather_rows<T>(comm, sent, slab, counts, nz, root);
    }
    if (!receives) continue;
    std::int64_t row = 0;
    for (int r = 0; r < ranks; ++r) {
      if (counts[r] == 0) continue;
      const std::array<int, 3> c{r / (p[1] * p[2]), (r / p[2]) % p[1], r % p[2]};
      for (std::int64_t i = w.block_first[0][c[0]]; i < w.block_first[0][c[0] + 1]; ++i)
        for (std::int64_t j = w.block_first[1][c[1]]; j < w.block_first[1][c[1] + 1]; ++j, ++row)
          std::copy_n(slab.data() + row * nz, nz, all.data() + (i * n[1] + j) * n[2] + z0);
    }
  }
}

}  // namespace sciproxy::tti::demo_decomposition
