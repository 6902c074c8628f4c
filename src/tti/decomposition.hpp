// tti under MPI: the Cartesian decomposition of the padded grid among the ranks of a
// communicator, and the halo exchange of one rank's subdomain (kernels.hpp, TtiHaloExchange).
// docs/kernels/tti.md, "Under MPI".
//
// The cells the ranks share out are those the kernel updates, [halo, n - halo) along each axis
// of the padded grid (model and sponge): N_a = n_a - 2 halo. A process grid p_0 x p_1 x p_2
// (rank = (c_0 p_1 + c_1) p_2 + c_2, MPI_Cart_create's row-major order) gives the rank at
// coordinates c the block c_a of N_a along each axis (collective::block_of: contiguous, the first
// N_a mod p_a blocks one cell larger). Each rank holds its block plus `halo` cells per side: a
// window of the padded grid of the same layout as one process's. Every block must hold at least
// `halo` cells along a split axis, so that each halo comes from the next rank alone (and the
// free surface's mirror reads only the top rank's rows).
//
// A process grid chosen for the caller (entries 0 of TtiOptions::process_grid, as
// MPI_Dims_create) minimises the cells that cross between ranks, sum_a (p_a - 1) N_b N_c (b, c
// the other axes): each such face is exchanged every step. Ties go to the grid that splits the
// slowest axes most (their faces are contiguous in memory).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <exception>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/collective.hpp"
#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/error.hpp"
#include "tti/kernels.hpp"

namespace sciproxy::tti::decomposition {

using Index = std::array<std::int64_t, 3>;

struct Subdomain {
  std::array<int, 3> process_grid{1, 1, 1};
  std::array<int, 3> coords{0, 0, 0};
  Index own_lo{}, own_hi{};  // this rank's cells, padded indices of the whole grid
  Index origin{}, shape{};   // its local arrays: [own_lo - halo, own_hi + halo)
  std::array<std::array<int, 2>, 3> neighbour{{{-1, -1}, {-1, -1}, {-1, -1}}};  // rank or -1
  std::int64_t halo = 0;
  // The whole padded grid's split, to find any cell's rank.
  std::array<std::vector<std::int64_t>, 3> block_first;  // per axis: p_a + 1 bounds
};

inline int rank_at(const std::array<int, 3>& grid, const std::array<int, 3>& c) {
  return (c[0] * grid[1] + c[1]) * grid[2] + c[2];
}

// The rank holding padded cell `cell` (a cell the kernel updates).
inline int rank_of_cell(const Subdomain& s, const Index& cell) {
  std::array<int, 3> c{};
  for (int a = 0; a < 3; ++a)
    while (cell[a] >= s.block_first[a][c[a] + 1]) ++c[a];
  return rank_at(s.process_grid, c);
}

// The process grid for `ranks` ranks over cells[a] shared-out cells per axis: the entries of
// `given` that are > 0 are kept, the zeros chosen. InvalidArgument naming process_grid when the
// given grid does not multiply to the ranks or no grid leaves every rank `halo` cells per split
// axis (`halo_name` says what that minimum is, `cells_name` what the cells are).
inline std::array<int, 3> choose_process_grid(
    const Index& cells, int ranks, const std::array<int, 3>& given, std::int64_t halo,
    std::string_view halo_name = "space_order/2",
    std::string_view cells_name = "cells of model and sponge") {
  const std::string given_text = fmt::format("{{{}, {}, {}}}", given[0], given[1], given[2]);
  for (int a = 0; a < 3; ++a)
    require(given[a] >= 0, "process_grid",
            "ranks per axis >= 1, or 0 for a number chosen to minimise the halo exchange",
            given_text);
  const bool fixed = given[0] > 0 && given[1] > 0 && given[2] > 0;
  if (fixed)
    require(std::int64_t(given[0]) * given[1] * given[2] == ranks, "process_grid",
            fmt::format("ranks per axis whose product is the {} ranks of comm", ranks),
            fmt::format("{} ({} ranks)", given_text, std::int64_t(given[0]) * given[1] * given[2]));
  auto fits = [&](const std::array<int, 3>& p) {
    for (int a = 0; a < 3; ++a)
      if (p[a] > 1 && cells[a] / p[a] < halo) return false;
    return true;
  };
  if (fixed) {
    for (int a = 0; a < 3; ++a)
      require(
          given[a] == 1 || cells[a] / given[a] >= halo, "process_grid",
          fmt::format("a grid that leaves every rank at least {} = {} cells "
                      "along each split axis (axis {} has {} {})",
                      halo_name, halo, a, cells[a], cells_name),
          fmt::format("{}: {} cells per rank along axis {}", given_text, cells[a] / given[a], a));
    return given;
  }
  std::array<int, 3> best{0, 0, 0};
  double best_cost = std::numeric_limits<double>::infinity();
  for (int p0 = ranks; p0 >= 1; --p0) {
    if (ranks % p0 != 0 || (given[0] > 0 && given[0] != p0)) continue;
    for (int p1 = ranks / p0; p1 >= 1; --p1) {
      if ((ranks / p0) % p1 != 0 || (given[1] > 0 && given[1] != p1)) continue;
      const int p2 = ranks / p0 / p1;
      if (given[2] > 0 && given[2] != p2) continue;
      const std::array<int, 3> p{p0, p1, p2};
      if (!fits(p)) continue;
      const double cost = double(p0 - 1) * double(cells[1]) * double(cells[2]) +
                          double(p1 - 1) * double(cells[0]) * double(cells[2]) +
                          double(p2 - 1) * double(cells[0]) * double(cells[1]);
      if (cost < best_cost) best_cost = cost, best = p;
    }
  }
  if (best[0] == 0)
    throw_invalid_argument(
        "process_grid",
        fmt::format("a grid of {} ranks (the given entries kept) that leaves every rank at least "
                    "{} = {} cells along each split axis",
                    ranks, halo_name, halo),
        fmt::format("{} with {} x {} x {} {}: no such grid; use other "
                    "entries, fewer ranks or a larger model",
                    given_text, cells[0], cells[1], cells[2], cells_name));
  return best;
}

// Copies the box [lo, hi) of an array whose point (i, j, k) is origin[i sx + j sy + k] to
// `buffer`, packed in order (to_buffer), or back from it: a halo exchange's faces.
template <class T>
void copy_box(const Index& lo, const Index& hi, T* origin, std::int64_t sx, std::int64_t sy,
              T* buffer, bool to_buffer) {
  const std::int64_t n0 = hi[0] - lo[0], n1 = hi[1] - lo[1], n2 = hi[2] - lo[2];
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t i0 = 0; i0 < n0; ++i0)
    for (std::int64_t i1 = 0; i1 < n1; ++i1) {
      T* points = origin + (lo[0] + i0) * sx + (lo[1] + i1) * sy + lo[2];
      T* packed = buffer + (i0 * n1 + i1) * n2;
      if (to_buffer)
        std::copy(points, points + n2, packed);
      else
        std::copy(packed, packed + n2, points);
    }
}

// This rank's subdomain of the padded grid of shape n (halo = space_order / 2).
inline Subdomain decompose(const Index& n, std::int64_t halo, int rank, int ranks,
                           const std::array<int, 3>& given) {
  Subdomain s;
  s.halo = halo;
  Index cells{};
  for (int a = 0; a < 3; ++a) cells[a] = n[a] - 2 * halo;
  s.process_grid = choose_process_grid(cells, ranks, given, halo);
  const auto& p = s.process_grid;
  s.coords = {rank / (p[1] * p[2]), (rank / p[2]) % p[1], rank % p[2]};
  for (int a = 0; a < 3; ++a) {
    for (int c = 0; c <= p[a]; ++c)
      s.block_first[a].push_back(
          halo + (c == p[a] ? cells[a] : collective::block_of(cells[a], c, p[a]).first));
    s.own_lo[a] = s.block_first[a][s.coords[a]];
    s.own_hi[a] = s.block_first[a][s.coords[a] + 1];
    s.origin[a] = s.own_lo[a] - halo;
    s.shape[a] = s.own_hi[a] - s.own_lo[a] + 2 * halo;
    for (int side = 0; side < 2; ++side) {
      std::array<int, 3> c = s.coords;
      c[a] += side == 0 ? -1 : 1;
      if (c[a] >= 0 && c[a] < p[a]) s.neighbour[a][side] = rank_at(p, c);
    }
  }
  return s;
}

// The halo exchange of one rank's subdomain (kernels.hpp, TtiHaloExchange): per neighbour one
// message each way holding both fields' (or both fluxes') layers, packed into buffers kept for
// the whole run. Along axis a a face covers the rank's own cells along the other two axes (no
// edges or corners: the staggered stencils reach along one axis at a time).
template <class T>
class HaloExchange final : public kernels::TtiHaloExchange<T> {
 public:
  HaloExchange(const Communicator& comm, const Subdomain& s) : comm_(comm), shape_(s.shape) {
    const std::int64_t h = s.halo;
    for (int a = 0; a < 3; ++a)
      for (int side = 0; side < 2; ++side) {
        if (s.neighbour[a][side] < 0) continue;
        const std::int64_t own = s.own_hi[a] - s.own_lo[a];
        // Layers along a, local indices: [first, first + count).
        auto layers = [&](std::int64_t first, std::int64_t count) {
          Box b;
          for (int o = 0; o < 3; ++o) {
            b.lo[o] = h;
            b.hi[o] = shape_[o] - h;
          }
          b.lo[a] = first;
          b.hi[a] = first + count;
          return b;
        };
        Face f;
        f.axis = a;
        f.rank = s.neighbour[a][side];
        if (side == 0) {  // low: P, M to its high halo (h layers); fluxes to it h - 1
          f.field_send = layers(h, h);
          f.field_receive = layers(1, h - 1);
          f.flux_send = layers(h, h - 1);
          f.flux_receive = layers(0, h);
        } else {  // high: P, M to its low halo (h - 1 layers); fluxes to it h
          f.field_send = layers(h + own - (h - 1), h - 1);
          f.field_receive = layers(h + own, h);
          f.flux_send = layers(h + own - h, h);
          f.flux_receive = layers(h + own, h - 1);
        }
        faces_.push_back(std::move(f));
      }
    for (Face& f : faces_) {
      f.send.resize(2 * std::max(f.field_send.cells(), f.flux_send.cells()));
      f.receive.resize(2 * std::max(f.field_receive.cells(), f.flux_receive.cells()));
    }
  }

  void start_fields(T* p, T* m, bool stop) override {
    for (Face& f : faces_) {
      f.first = p;
      f.second = m;
    }
    start(&Face::field_send, &Face::field_receive, kFieldsTag, stop ? 1 : 0);
  }
  bool finish_fields() override {
    finish(&Face::field_receive);
    return pending_.stopped();
  }
  void start_fluxes(const std::array<T*, 3>& fp, const std::array<T*, 3>& fm) override {
    for (Face& f : faces_) {
      f.first = fp[f.axis];
      f.second = fm[f.axis];
    }
    start(&Face::flux_send, &Face::flux_receive, kFluxesTag);
  }
  void finish_fluxes() override { finish(&Face::flux_receive); }
  void progress() noexcept override {
    try {
      pending_.test();
    } catch (...) {
      if (!failed_) failed_ = std::current_exception();
    }
  }

 private:
  static constexpr int kFieldsTag = 31, kFluxesTag = 32;
  struct Box {
    Index lo{}, hi{};
    std::int64_t cells() const { return (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]); }
  };
  struct Face {
    int axis = 0, rank = 0;
    Box field_send, field_receive, flux_send, flux_receive;
    std::vector<T> send, receive;  // both arrays' layers, one after the other
    T* first = nullptr;            // P or FP_axis
    T* second = nullptr;           // M or FM_axis
  };

  // Copies box of `array` to or from `buffer` (to_buffer: pack; else unpack).
  void copy(const Box& b, T* array, T* buffer, bool to_buffer) const {
    copy_box(b.lo, b.hi, array, shape_[1] * shape_[2], shape_[2], buffer, to_buffer);
  }

  void start(Box Face::*send, Box Face::*receive, int tag, int stop = -1) {
    messages_.clear();
    for (Face& f : faces_) {
      const std::int64_t out = (f.*send).cells(), in = (f.*receive).cells();
      copy(f.*send, f.first, f.send.data(), true);
      copy(f.*send, f.second, f.send.data() + out, true);
      messages_.push_back({f.rank, std::span<const T>(f.send.data(), std::size_t(2 * out)),
                           std::span<T>(f.receive.data(), std::size_t(2 * in))});
    }
    pending_ = collective::start_exchange<T>(comm_, messages_, tag, stop);
  }
  void finish(Box Face::*receive) {
    pending_.wait();
    if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
    for (Face& f : faces_) {
      const std::int64_t in = (f.*receive).cells();
      copy(f.*receive, f.first, f.receive.data(), false);
      copy(f.*receive, f.second, f.receive.data() + in, false);
    }
  }

  Communicator comm_;
  Index shape_;
  std::vector<Face> faces_;
  std::vector<collective::Message<T>> messages_;
  collective::Pending pending_;
  std::exception_ptr failed_;  // of a progress() call, thrown by the next finish
};

}  // namespace sciproxy::tti::decomposition
