// The replica engine: one replica of a cluster, speaking to the server only
// through the extension's SQL functions over libpq (brief C5.7).
//
// It registers a new incarnation, follows the catalog version, reconciles
// the sources, materialized views and sinks placed on its cluster (install,
// remove), appends the sources' due ticks with compare-and-append, steps
// each view and sink through its server function (which computes and
// appends what the inputs' frontiers allow, again compare-and-append), and
// reports health.  Every call carries the
// incarnation; once a newer incarnation exists the server refuses it and
// the engine throws Fenced.  It keeps no state the catalog and the durable
// uppers cannot rebuild, so any restart resumes without gap or duplicate.
//
// No PostgreSQL server headers: the same engine runs inside a background
// worker (replica_worker.cpp) and in tools/pg_decoupled_replicad.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace decoupled {

// What hosts the engine.
class EngineHost {
  public:
    virtual ~EngineHost() = default;
    virtual bool stop_requested() = 0;
    // Sleeps up to `ms`; may return early (a wake-up or a stop request).
    virtual void sleep_ms(int64_t ms) = 0;
    virtual void log(const std::string& message) = 0;
    // Whether the engine waits for the relay's wake-ups itself (a host
    // outside the server, brief C8) instead of sleeping through sleep_ms:
    // LISTEN decoupled_wakeup with the in-process relay, the segment of
    // pg_decoupled_relayd with the external one.  Inside the server, latches
    // carry the wake-ups.
    virtual bool follows_relay() { return false; }
};

struct ReplicaIdentity {
    int64_t replica_id = 0;
    std::string deployment = "default";
    int pid = 0;
    std::string host;
};

// A newer incarnation replaced this one, or its replica was dropped.
class Fenced : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class ReplicaEngine {
  public:
    ReplicaEngine(const std::string& conninfo, ReplicaIdentity identity, EngineHost& host,
                  int64_t poll_ms);
    ~ReplicaEngine();
    ReplicaEngine(const ReplicaEngine&) = delete;
    ReplicaEngine& operator=(const ReplicaEngine&) = delete;

    // Runs until the host asks to stop (then retires the incarnation) or a
    // failure throws.
    void run();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace decoupled
