// What the MPI tests share: the world's ranks as the library's communicator, and checks that a
// call throws the same error on every rank.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::test {

const Communicator& world();  // MPI_COMM_WORLD, made once
void release_world();         // before MPI_Finalize

// Runs f on this rank and expects it to throw E whose message contains `part`. Every rank calls
// it: a call that hangs on some rank hangs the test (ctest's timeout names it).
template <class E, class F>
void expect_error_on_every_rank(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "rank " << world().rank() << ": no error; expected one containing \"" << part
                  << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "rank " << world().rank() << ": " << e.what();
  }
}

}  // namespace sciproxy::test
