// The scalar family's calls on several MPI ranks (on_ranks.cpp): scalar(), scalar_gradient(),
// scalar_born() and scalar_born_gradient() hand over to these when ScalarOptions::comm has more
// than one rank.
#pragma once

#include "sciproxy/wave.hpp"

namespace sciproxy::wave::detail {

template <class T>
ScalarOutput<T> scalar_on_ranks(const Device& device, const ScalarInput<T>& in,
                                const ScalarOptions& opt, const ScalarState<T>* initial,
                                Timers* timers);

template <class T>
ScalarGradient<T> scalar_gradient_on_ranks(const Device& device, const ScalarInput<T>& in,
                                           const ScalarOptions& opt,
                                           std::span<const T> grad_receiver_amplitudes,
                                           const ScalarState<T>* initial,
                                           const ScalarState<T>* grad_final, Timers* timers);

template <class T>
ScalarBornOutput<T> scalar_born_on_ranks(const Device& device, const ScalarBornInput<T>& in,
                                         const ScalarOptions& opt, const ScalarState<T>* initial,
                                         const ScalarState<T>* initial_scattered, Timers* timers);

template <class T>
ScalarBornGradient<T> scalar_born_gradient_on_ranks(
    const Device& device, const ScalarBornInput<T>& in, const ScalarOptions& opt,
    std::span<const T> grad_receiver_amplitudes, std::span<const T> grad_bg_receiver_amplitudes,
    bool source_gradient, const ScalarState<T>* initial, Timers* timers);

}  // namespace sciproxy::wave::detail
