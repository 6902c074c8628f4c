// The scalar family on several MPI ranks (ScalarOptions::comm): the shots are split across the
// ranks in contiguous blocks, each rank propagates its own shots with the one-process code, and
// the results are put together:
//   receiver data, final states, source and initial-state gradients: rows of shots, gathered as
//     ScalarOptions::results says (every rank, rank 0, or each rank its own shots);
//   the gradient of a model shared by every shot: sum_shots g_s = sum_ranks (sum_own g_s), one
//     allreduce per call; with one model per shot, the models' gradients are rows like the rest.
// Every shot is propagated as one process propagates it, so the per-shot outputs are the same
// bits; only the shared model's gradient is summed in another order (a stated tolerance).
#include "on_ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/collective.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::wave::detail {

namespace {

// This rank's shots among every rank's, and whether the model is shared by all shots.
struct Shots {
  std::vector<std::int64_t> counts;  // per rank
  std::int64_t first = 0, count = 0, total = 0;
  bool shared_model = true;
};

template <class T>
Shots split_shots(const Communicator& comm, const ScalarInput<T>& in, const ScalarOptions& opt) {
  Shots s;
  if (opt.shots == RankItems::all) {
    for (int r = 0; r < comm.size(); ++r)
      s.counts.push_back(collective::block_of(in.nshots, r, comm.size()).count);
  } else {
    const std::int64_t mine = in.nshots;
    s.counts = collective::allgather(comm, std::span(&mine, 1));
  }
  for (int r = 0; r < comm.size(); ++r) {
    if (r < comm.rank()) s.first += s.counts[r];
    s.total += s.counts[r];
  }
  s.count = s.counts[comm.rank()];
  s.shared_model = in.nmodels == 1;
  return s;
}

// Rows [first, first + count) of an array of `total` rows (an empty array stays empty).
template <class T>
std::span<const T> rows_of(std::span<const T> a, std::int64_t total, std::int64_t first,
                           std::int64_t count) {
  if (a.empty() || total == 0) return a;
  const auto row = static_cast<std::int64_t>(a.size()) / total;
  return a.subspan(static_cast<std::size_t>(first * row), static_cast<std::size_t>(count * row));
}

// This rank's part of the input: its shots (and their models, one per shot).
template <class T>
ScalarInput<T> local_input(const ScalarInput<T>& in, const Shots& s, RankItems given) {
  if (given == RankItems::own) return in;
  ScalarInput<T> local = in;
  local.nshots = s.count;
  if (!s.shared_model) {
    local.v = rows_of(in.v, in.nmodels, s.first, s.count);
    local.nmodels = s.count;
  }
  local.source_amplitudes = rows_of(in.source_amplitudes, in.nshots, s.first, s.count);
  local.source_locations = rows_of(in.source_locations, in.nshots, s.first, s.count);
  local.receiver_locations = rows_of(in.receiver_locations, in.nshots, s.first, s.count);
  return local;
}

template <class T>
std::vector<T> copy_rows(const std::vector<T>& a, std::int64_t total, std::int64_t first,
                         std::int64_t count) {
  const auto part = rows_of(std::span<const T>(a), total, first, count);
  return {part.begin(), part.end()};
}

// This rank's shots of a state (every field is [nshots, *padded_shape]).
template <class T>
ScalarState<T> local_state(const ScalarState<T>& state, const Shots& s, RankItems given,
                           std::int64_t nshots) {
  if (given == RankItems::own || state.empty()) return state;
  ScalarState<T> local;
  local.padded_shape = state.padded_shape;
  local.wavefield = copy_rows(state.wavefield, nshots, s.first, s.count);
  local.previous_wavefield = copy_rows(state.previous_wavefield, nshots, s.first, s.count);
  for (int d = 0; d < kMaxDims; ++d) {
    local.psi[d] = copy_rows(state.psi[d], nshots, s.first, s.count);
    local.zeta[d] = copy_rows(state.zeta[d], nshots, s.first, s.count);
  }
  return local;
}

// Puts this rank's rows (`count` of them) where the layout says: the whole on every rank, the
// whole on rank 0 (empty elsewhere), or this rank's own. Ranks without shots pass nothing and
// learn the row length from the others.
template <class T>
std::vector<T> place_rows(const Communicator& comm, const Shots& s, std::vector<T> mine,
                          ResultLayout layout) {
  const std::int64_t own_row = s.count > 0 ? static_cast<std::int64_t>(mine.size()) / s.count : 0;
  const std::int64_t row = collective::allreduce_max(comm, own_row);
  if (row == 0) return {};
  if (s.count == 0) mine.clear();
  if (layout == ResultLayout::own) return mine;
  if (layout == ResultLayout::root) {
    std::vector<T> whole(comm.rank() == 0 ? static_cast<std::size_t>(s.total * row) : 0);
    collective::gather_rows<T>(comm, mine, whole, s.counts, row, 0);
    return whole;
  }
  std::vector<T> whole(static_cast<std::size_t>(s.total * row));
  std::copy(mine.begin(), mine.end(), whole.begin() + s.first * row);
  collective::allgather_rows<T>(comm, whole, s.counts, row);
  return whole;
}

template <class T>
ScalarState<T> place_state(const Communicator& comm, const Shots& s, ScalarState<T> mine,
                           ResultLayout layout) {
  ScalarState<T> out;
  // Ranks without shots learn the padded shape from the others.
  std::array<std::int64_t, kMaxDims> shape = mine.padded_shape;
  for (auto& n : shape) n = collective::allreduce_max(comm, s.count > 0 ? n : std::int64_t(0));
  out.padded_shape = shape;
  out.wavefield = place_rows(comm, s, std::move(mine.wavefield), layout);
  out.previous_wavefield = place_rows(comm, s, std::move(mine.previous_wavefield), layout);
  for (int d = 0; d < kMaxDims; ++d) {
    out.psi[d] = place_rows(comm, s, std::move(mine.psi[d]), layout);
    out.zeta[d] = place_rows(comm, s, std::move(mine.zeta[d]), layout);
  }
  return out;
}

template <class T>
Precision precision_of() {
  return sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
}

// The whole call's work: every rank's, summed (ranks without shots add nothing).
WorkModel total_work(const Communicator& comm, WorkModel w, bool has_shots, Precision precision) {
  if (!has_shots) {
    w = WorkModel{};
    w.precision = precision;
  }
  double sums[5] = {w.points, w.flops, w.bytes, w.cache_bytes, w.working_set_bytes};
  collective::allreduce_sum<double>(comm, sums);
  w.points = sums[0];
  w.flops = sums[1];
  w.bytes = sums[2];
  w.cache_bytes = sums[3];
  w.working_set_bytes = sums[4];
  return w;
}

// A model gradient: summed over the ranks when the model is shared, else rows of models.
template <class T>
std::vector<T> place_model_gradient(const Communicator& comm, const Shots& s, std::vector<T> mine,
                                    std::size_t model_cells, ResultLayout layout) {
  if (!s.shared_model) return place_rows(comm, s, std::move(mine), layout);
  const std::int64_t any =
      collective::allreduce_max(comm, static_cast<std::int64_t>(s.count > 0 && !mine.empty()));
  if (!any) return {};
  if (s.count == 0 || mine.empty()) mine.assign(model_cells, T(0));
  collective::allreduce_sum<T>(comm, mine);
  return mine;
}

template <class T>
ScalarOutput<T> place_forward(const Communicator& comm, const Shots& s, ScalarOutput<T> mine,
                              ResultLayout layout) {
  ScalarOutput<T> out;
  out.receiver_amplitudes = place_rows(comm, s, std::move(mine.receiver_amplitudes), layout);
  out.state = place_state(comm, s, std::move(mine.state), layout);
  out.step_ratio = collective::allreduce_max(comm, s.count > 0 ? mine.step_ratio : std::int64_t(0));
  out.inner_dt = collective::allreduce_max(comm, s.count > 0 ? mine.inner_dt : 0.0);
  out.storage_bytes = collective::allreduce_max(comm, mine.storage_bytes);
  out.work = total_work(comm, mine.work, s.count > 0, precision_of<T>());
  return out;
}

// What every rank must pass alike, and the checks of the shape of the split.
template <class T>
std::vector<collective::Field> agreed_fields(const ScalarInput<T>& in, const ScalarOptions& opt) {
  std::vector<collective::Field> f{
      {"dtype (bytes per value)", sizeof(T)},
      {"shots", static_cast<int>(opt.shots)},
      {"results", static_cast<int>(opt.results)},
      {"ndim", in.grid.ndim},
      {"accuracy", opt.accuracy},
      {"nt", in.nt},
      {"nsources", in.nsources},
      {"nreceivers", in.nreceivers},
      {"dt", collective::hash_of(std::span<const double>(&in.dt, 1)), true},
      {"grid",
       collective::hash_of(
           std::span<const std::int64_t>(in.grid.shape.data(), in.grid.shape.size())),
       true},
      {"grid spacing",
       collective::hash_of(std::span<const double>(in.grid.spacing.data(), in.grid.spacing.size())),
       true},
      {"pml_width", collective::hash_of(std::span<const std::int64_t>(opt.pml_width)), true},
      {"storage", static_cast<int>(opt.storage)},
      {"model_gradient_sampling_interval", opt.model_gradient_sampling_interval}};
  if (opt.shots == RankItems::all) {
    f.push_back({"nshots", in.nshots});
    f.push_back({"nmodels", in.nmodels});
    f.push_back({"source_amplitudes", collective::hash_of(in.source_amplitudes), true});
    f.push_back({"source_locations", collective::hash_of(in.source_locations), true});
    f.push_back({"receiver_locations", collective::hash_of(in.receiver_locations), true});
  }
  if (in.nmodels == 1 || opt.shots == RankItems::all)
    f.push_back({"v", collective::hash_of(in.v), true});
  return f;
}

template <class T>
void check_split(const Communicator& comm, const ScalarInput<T>& in, const ScalarOptions& opt) {
  collective::on_every_rank(comm, [&] {
    require(opt.shots == RankItems::all || opt.shots == RankItems::own, "shots",
            "0 (all: every rank passes every shot) or 1 (own: each rank its own)",
            std::to_string(static_cast<int>(opt.shots)));
    require(opt.results == ResultLayout::all_ranks || opt.results == ResultLayout::root ||
                opt.results == ResultLayout::own,
            "results", "0 (all ranks), 1 (rank 0) or 2 (each rank its own shots)",
            std::to_string(static_cast<int>(opt.results)));
    // With each rank's own shots, the model is the one all of them share.
    if (opt.shots == RankItems::own)
      require(in.nmodels == 1, "nmodels",
              "1 with shots own (one model shared by every rank's shots; models per shot need "
              "shots all)",
              std::to_string(in.nmodels));
    // The survey window spans every shot's sources and receivers: a rank sees only its own.
    for (const auto pad : opt.survey_pad)
      require(pad == -1, "survey_pad",
              "-1 on every side when the shots are split across ranks (the window of the whole "
              "survey is not each rank's)",
              std::to_string(pad));
  });
  collective::require_same(comm, agreed_fields(in, opt), "scalar");
}

template <class T>
ScalarOptions alone(const ScalarOptions& opt) {
  ScalarOptions local = opt;
  local.comm = Communicator();
  return local;
}

// The options of this rank's part: on this process alone, and with what one process derives
// from every shot fixed to the whole's values. max_vel (0: max |v| over every model) sets the
// PML profiles and the time step, so with a model per shot each rank takes the maximum over all
// the models, not over its own.
template <class T>
ScalarOptions part_options(const ScalarOptions& opt, const ScalarInput<T>& in) {
  ScalarOptions local = alone<T>(opt);
  if (local.max_vel == 0 && in.nmodels > 1) {
    double max_vel = 0;
    for (const T x : in.v) max_vel = std::max(max_vel, std::abs(static_cast<double>(x)));
    local.max_vel = max_vel;
  }
  return local;
}

// The whole input's checks on every rank (the call's own, run as it runs them), so that a bad
// input fails every rank before any rank propagates.
template <class T>
void check_whole(const Communicator& comm, const ScalarInput<T>& in, const ScalarOptions& opt,
                 const ScalarState<T>* initial) {
  collective::on_every_rank(comm, [&] {
    if (in.nshots > 0) scalar_state_shape<T>(in, alone<T>(opt), initial);
  });
}

}  // namespace

template <class T>
ScalarOutput<T> scalar_on_ranks(const Device& device, const ScalarInput<T>& in,
                                const ScalarOptions& opt, const ScalarState<T>* initial,
                                Timers* timers) {
  const Communicator& comm = opt.comm;
  auto top = Timers::region(timers, "scalar_ranks");
  check_split(comm, in, opt);
  check_whole(comm, in, opt, initial);
  const Shots s = split_shots(comm, in, opt);
  const ScalarInput<T> local = local_input(in, s, opt.shots);
  const ScalarState<T> local_initial =
      initial ? local_state(*initial, s, opt.shots, in.nshots) : ScalarState<T>();
  ScalarOutput<T> mine;
  collective::on_every_rank(comm, [&] {
    if (s.count > 0)
      mine = scalar<T>(device, local, part_options(opt, in), initial ? &local_initial : nullptr,
                       timers);
  });
  auto exchange = Timers::region(timers, "exchange");
  ScalarOutput<T> out;
  out.receiver_amplitudes = place_rows(comm, s, std::move(mine.receiver_amplitudes), opt.results);
  out.state = place_state(comm, s, std::move(mine.state), opt.results);
  out.step_ratio = collective::allreduce_max(comm, s.count > 0 ? mine.step_ratio : std::int64_t(0));
  out.inner_dt = collective::allreduce_max(comm, s.count > 0 ? mine.inner_dt : 0.0);
  out.work = total_work(comm, mine.work, s.count > 0, precision_of<T>());
  return out;
}

template <class T>
ScalarGradient<T> scalar_gradient_on_ranks(const Device& device, const ScalarInput<T>& in,
                                           const ScalarOptions& opt,
                                           std::span<const T> grad_receiver_amplitudes,
                                           const ScalarState<T>* initial,
                                           const ScalarState<T>* grad_final, Timers* timers) {
  const Communicator& comm = opt.comm;
  auto top = Timers::region(timers, "scalar_ranks");
  check_split(comm, in, opt);
  check_whole(comm, in, opt, initial);
  const Shots s = split_shots(comm, in, opt);
  if (opt.shots == RankItems::all)
    collective::require_same(
        comm,
        std::vector<collective::Field>{
            {"grad_receiver_amplitudes", collective::hash_of(grad_receiver_amplitudes), true}},
        "scalar_gradient");
  const ScalarInput<T> local = local_input(in, s, opt.shots);
  const ScalarState<T> local_initial =
      initial ? local_state(*initial, s, opt.shots, in.nshots) : ScalarState<T>();
  const ScalarState<T> local_final =
      grad_final ? local_state(*grad_final, s, opt.shots, in.nshots) : ScalarState<T>();
  const auto local_grad = opt.shots == RankItems::all
                              ? rows_of(grad_receiver_amplitudes, in.nshots, s.first, s.count)
                              : grad_receiver_amplitudes;
  ScalarGradient<T> mine;
  collective::on_every_rank(comm, [&] {
    if (s.count > 0)
      mine = scalar_gradient<T>(device, local, part_options(opt, in), local_grad,
                                initial ? &local_initial : nullptr,
                                grad_final ? &local_final : nullptr, timers);
  });
  auto exchange = Timers::region(timers, "exchange");
  std::size_t cells = 1;
  for (int d = 0; d < in.grid.ndim; ++d) cells *= static_cast<std::size_t>(in.grid.shape[d]);
  ScalarGradient<T> out;
  out.v = place_model_gradient(comm, s, std::move(mine.v), cells, opt.results);
  out.source_amplitudes = place_rows(comm, s, std::move(mine.source_amplitudes), opt.results);
  out.initial_state = place_state(comm, s, std::move(mine.initial_state), opt.results);
  out.forward = place_forward(comm, s, std::move(mine.forward), opt.results);
  out.work = total_work(comm, mine.work, s.count > 0, precision_of<T>());
  return out;
}

namespace {

// This rank's part of a Born input: its shots, their models and scatters (one per shot).
template <class T>
ScalarBornInput<T> local_born_input(const ScalarBornInput<T>& in, const Shots& s, RankItems given) {
  if (given == RankItems::own) return in;
  ScalarBornInput<T> local = in;
  local.background = local_input(in.background, s, given);
  if (!s.shared_model) local.scatter = rows_of(in.scatter, in.background.nmodels, s.first, s.count);
  local.bg_receiver_locations =
      rows_of(in.bg_receiver_locations, in.background.nshots, s.first, s.count);
  return local;
}

template <class T>
void check_born(const Communicator& comm, const ScalarBornInput<T>& in, const ScalarOptions& opt) {
  check_split(comm, in.background, opt);
  std::vector<collective::Field> f{{"nbg_receivers", in.nbg_receivers}};
  if (opt.shots == RankItems::all || in.background.nmodels == 1)
    f.push_back({"scatter", collective::hash_of(in.scatter), true});
  if (opt.shots == RankItems::all)
    f.push_back({"bg_receiver_locations", collective::hash_of(in.bg_receiver_locations), true});
  collective::require_same(comm, f, "scalar_born");
}

}  // namespace

template <class T>
ScalarBornOutput<T> scalar_born_on_ranks(const Device& device, const ScalarBornInput<T>& in,
                                         const ScalarOptions& opt, const ScalarState<T>* initial,
                                         const ScalarState<T>* initial_scattered, Timers* timers) {
  const Communicator& comm = opt.comm;
  auto top = Timers::region(timers, "scalar_born_ranks");
  check_born(comm, in, opt);
  check_whole(comm, in.background, opt, initial);
  const Shots s = split_shots(comm, in.background, opt);
  const auto local = local_born_input(in, s, opt.shots);
  const std::int64_t nshots = in.background.nshots;
  const ScalarState<T> local_initial =
      initial ? local_state(*initial, s, opt.shots, nshots) : ScalarState<T>();
  const ScalarState<T> local_scattered =
      initial_scattered ? local_state(*initial_scattered, s, opt.shots, nshots) : ScalarState<T>();
  ScalarBornOutput<T> mine;
  collective::on_every_rank(comm, [&] {
    if (s.count > 0)
      mine = scalar_born<T>(device, local, part_options(opt, in.background),
                            initial ? &local_initial : nullptr,
                            initial_scattered ? &local_scattered : nullptr, timers);
  });
  auto exchange = Timers::region(timers, "exchange");
  ScalarBornOutput<T> out;
  out.state = place_state(comm, s, std::move(mine.state), opt.results);
  out.scattered_state = place_state(comm, s, std::move(mine.scattered_state), opt.results);
  out.bg_receiver_amplitudes =
      place_rows(comm, s, std::move(mine.bg_receiver_amplitudes), opt.results);
  out.receiver_amplitudes = place_rows(comm, s, std::move(mine.receiver_amplitudes), opt.results);
  out.step_ratio = collective::allreduce_max(comm, s.count > 0 ? mine.step_ratio : std::int64_t(0));
  out.inner_dt = collective::allreduce_max(comm, s.count > 0 ? mine.inner_dt : 0.0);
  out.work = total_work(comm, mine.work, s.count > 0, precision_of<T>());
  return out;
}

template <class T>
ScalarBornGradient<T> scalar_born_gradient_on_ranks(
    const Device& device, const ScalarBornInput<T>& in, const ScalarOptions& opt,
    std::span<const T> grad_receiver_amplitudes, std::span<const T> grad_bg_receiver_amplitudes,
    bool source_gradient, const ScalarState<T>* initial, Timers* timers) {
  const Communicator& comm = opt.comm;
  auto top = Timers::region(timers, "scalar_born_ranks");
  check_born(comm, in, opt);
  check_whole(comm, in.background, opt, initial);
  const Shots s = split_shots(comm, in.background, opt);
  const std::int64_t nshots = in.background.nshots;
  if (opt.shots == RankItems::all)
    collective::require_same(
        comm,
        std::vector<collective::Field>{
            {"grad_receiver_amplitudes", collective::hash_of(grad_receiver_amplitudes), true},
            {"grad_bg_receiver_amplitudes", collective::hash_of(grad_bg_receiver_amplitudes), true},
            {"source_gradient", source_gradient}},
        "scalar_born_gradient");
  const auto local = local_born_input(in, s, opt.shots);
  const ScalarState<T> local_initial =
      initial ? local_state(*initial, s, opt.shots, nshots) : ScalarState<T>();
  const bool all = opt.shots == RankItems::all;
  const auto grad =
      all ? rows_of(grad_receiver_amplitudes, nshots, s.first, s.count) : grad_receiver_amplitudes;
  const auto grad_bg = all ? rows_of(grad_bg_receiver_amplitudes, nshots, s.first, s.count)
                           : grad_bg_receiver_amplitudes;
  ScalarBornGradient<T> mine;
  collective::on_every_rank(comm, [&] {
    if (s.count > 0)
      mine = scalar_born_gradient<T>(device, local, part_options(opt, in.background), grad, grad_bg,
                                     source_gradient, initial ? &local_initial : nullptr, timers);
  });
  auto exchange = Timers::region(timers, "exchange");
  std::size_t cells = 1;
  for (int d = 0; d < in.background.grid.ndim; ++d)
    cells *= static_cast<std::size_t>(in.background.grid.shape[d]);
  ScalarBornGradient<T> out;
  out.scatter = place_model_gradient(comm, s, std::move(mine.scatter), cells, opt.results);
  out.source_amplitudes = place_rows(comm, s, std::move(mine.source_amplitudes), opt.results);
  out.forward = place_forward(comm, s, std::move(mine.forward), opt.results);
  out.work = total_work(comm, mine.work, s.count > 0, precision_of<T>());
  return out;
}

#define SCIPROXY_INSTANTIATE(T)                                                                    \
  template ScalarOutput<T> scalar_on_ranks<T>(                                                     \
      const Device&, const ScalarInput<T>&, const ScalarOptions&, const ScalarState<T>*, Timers*); \
  template ScalarGradient<T> scalar_gradient_on_ranks<T>(                                          \
      const Device&, const ScalarInput<T>&, const ScalarOptions&, std::span<const T>,              \
      const ScalarState<T>*, const ScalarState<T>*, Timers*);                                      \
  template ScalarBornOutput<T> scalar_born_on_ranks<T>(                                            \
      const Device&, const ScalarBornInput<T>&, const ScalarOptions&, const ScalarState<T>*,       \
      const ScalarState<T>*, Timers*);                                                             \
  template ScalarBornGradient<T> scalar_born_gradient_on_ranks<T>(                                 \
      const Device&, const ScalarBornInput<T>&, const ScalarOptions&, std::span<const T>,          \
      std::span<const T>, bool, const ScalarState<T>*, Timers*);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::wave::detail
