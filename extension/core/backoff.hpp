// Restart backoff for supervised work.
//
// A worker that keeps failing must not be restarted in a tight loop (it would
// flood the log and steal the CPU from healthy work), yet a single crash must
// be retried quickly.  Exponential backoff with a cap does both; a worker that
// stayed up for `healthy_after_ms` earns a fresh start.
#pragma once

#include <cstdint>

namespace decoupled {

struct BackoffPolicy {
    int64_t initial_ms = 100;
    int64_t max_ms = 30'000;
    int64_t healthy_after_ms = 60'000;
};

class Backoff {
  public:
    explicit Backoff(BackoffPolicy policy = {}, int failures = 0)
        : policy_(policy), failures_(failures) {}

    // Record a failure at `now_ms` of a run that started at `started_ms`;
    // returns the earliest time the next attempt may start.
    int64_t on_failure(int64_t started_ms, int64_t now_ms);

    // Consecutive failures counted so far.
    int failures() const { return failures_; }

    void reset() { failures_ = 0; }

  private:
    BackoffPolicy policy_;
    int failures_ = 0;
};

}  // namespace decoupled
