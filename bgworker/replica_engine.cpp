#include "replica_engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <limits>
#include <set>
#include <pqxx/pqxx>
#include <vector>

#include "../extension/core/generators.hpp"
#include "../extension/core/relay_segment.hpp"
#include "../extension/core/worker_settings.hpp"

namespace decoupled {

namespace {

// Ticks appended per output and call, so that catching up after a long
// outage proceeds in bounded transactions.
constexpr size_t kMaxTicksPerAppend = 1000;
constexpr int64_t kHeartbeatMs = 1000;
// A stalled object is retried after poll_ms, doubling per failure up to this.
constexpr int64_t kMaxRetryMs = 10'000;

// The protocol's conditions, in the extension's own SQLSTATE class ZD.  The
// engine tells them apart by code only; every other error of an object's
// step stalls that object.
constexpr const char* kFenced = "ZD001";        // this incarnation is no longer current
constexpr const char* kDroppedMeanwhile = "ZD002";  // the catalog dropped the object
constexpr const char* kLostRace = "ZD003";      // a concurrent start of the same replica won
// Storage another transaction holds (one creating views over it): the step
// is tried again shortly, reported stalled only once that has lasted
// kBusyStallMs (extension/write_locks.hpp).
constexpr const char* kBusy = "ZD004";
// So is a step that could not take a lock within a moment (lock_timeout):
// what its view reads (extension/step_deadline.hpp) — a role that may lock
// one of its tables holds up that view, not the replica — or its frontier
// row, which a session's open apply_compaction() may hold.
constexpr const char* kLockNotAvailable = "55P03";
constexpr int64_t kBusyRetryMs = 50;
// A step's session ended under it (attempt_in_session): PostgreSQL's code
// for a session ended by the server or an administrator.
constexpr const char* kSessionEnded = "57P01";
constexpr int64_t kBusyStallMs = 10'000;

struct Output {
    int64_t id = 0;
    std::string name;
    std::string role;
    int64_t upper = 0;
};

struct Source {
    int64_t id = 0;
    std::string name;
    std::string generator;
    int64_t tick_ms = 0;
    int64_t epoch = 0;
    std::unique_ptr<Generator> gen;
    std::vector<Output> outputs;
    std::string reported;  // the status last reported
    int failures = 0;      // consecutive failed steps
    int64_t retry_at = 0;  // stalled: not stepped again before this time
    int64_t busy_since = 0;  // its storage locked by another transaction since
};

// A materialized view or sink: stepped by a server function that computes
// (or copies) what its input frontier allows and appends it with
// compare-and-append on its own upper.
struct Maintained {
    int64_t id = 0;
    std::string name;
    std::string kind;
    int64_t upper = 0;
    std::string reported;  // the status last reported
    bool hydrated = false;
    bool prewarmed = false;  // computed once by this prewarming incarnation
    int failures = 0;      // consecutive failed steps
    int64_t retry_at = 0;  // stalled: not stepped again before this time
    int64_t busy_since = 0;  // its storage locked by another transaction since
    // In a batch whose session ended (attempt_in_session): stepped alone,
    // after the others of a pass, until a step of its own succeeds.
    bool suspect = false;
};

bool is_fencing(const pqxx::sql_error& e) { return e.sqlstate() == kFenced; }

int64_t steady_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// NOTIFY decoupled_wakeup, sent by the in-process relay.
class Wakeups : public pqxx::notification_receiver {
  public:
    explicit Wakeups(pqxx::connection_base& c) : pqxx::notification_receiver(c, "decoupled_wakeup") {}
    void operator()(const std::string&, int) override { received = true; }
    bool received = false;
};

// How a host outside the server hears of new frontiers and catalog
// changes (brief C8): the relay the server runs with, or nothing — then
// the engine polls.  Every wait is bounded by the poll interval, so a
// dead, wedged or absent relay only costs latency.
class RelayFollower {
  public:
    RelayFollower(pqxx::connection& conn, EngineHost& host) : conn_(conn), host_(host) {
        pqxx::nontransaction tx(conn_);
        auto row = tx.exec("SELECT current_setting('decoupled.relay', true), "
                           "current_setting('decoupled.relay_name', true)")[0];
        mode_ = row[0].is_null() ? "" : row[0].as<std::string>();
        name_ = row[1].is_null() ? "" : row[1].as<std::string>();
        if (mode_ == "in_process") listener_ = std::make_unique<Wakeups>(conn_);
    }
    ~RelayFollower() {
        if (segment_) segment_->leave(slot_);
    }

    // Waits up to `ms` for a wake-up (or a stop request).
    void wait(int64_t ms) {
        int64_t deadline = steady_ms() + ms;
        while (!host_.stop_requested()) {
            int64_t chunk = std::min<int64_t>(deadline - steady_ms(), 100);
            if (chunk <= 0) return;
            if (mode_ == "in_process") {
                listener_->received = false;
                conn_.await_notification(chunk / 1000, (chunk % 1000) * 1000);
                if (listener_->received) return;
            } else if (relay::Segment* segment = external()) {
                uint32_t now = segment->wait_fanout(seen_, chunk);
                if (now != seen_) {
                    seen_ = now;
                    return;
                }
            } else {
                host_.sleep_ms(chunk);
            }
        }
    }

  private:
    // The external relay's segment on this host, attached lazily and again
    // every few seconds (a segment removed and created anew is found).
    relay::Segment* external() {
        if (mode_ != "external") return nullptr;
        int64_t now = steady_ms();
        if (now >= next_attach_) {
            next_attach_ = now + (segment_ ? 5000 : 1000);
            auto fresh = relay::Segment::attach(name_);
            if (fresh || !segment_) {
                if (segment_) segment_->leave(slot_);
                segment_ = std::move(fresh);
                if (segment_) {
                    slot_ = segment_->join(static_cast<int32_t>(getpid()), "replicad", wall_ms());
                    seen_ = segment_->fanout_seen();
                }
            }
        }
        return segment_.get();
    }

    pqxx::connection& conn_;
    EngineHost& host_;
    std::string mode_, name_;
    std::unique_ptr<Wakeups> listener_;
    std::unique_ptr<relay::Segment> segment_;
    int slot_ = -1;
    uint32_t seen_ = 0;
    int64_t next_attach_ = 0;
};

// An error's message: its first line, without PostgreSQL's "ERROR:  "
// prefix (the context lines that follow are for the server log).
std::string error_text(const std::exception& e) {
    std::string text = e.what();
    if (text.rfind("ERROR:  ", 0) == 0) text.erase(0, 8);
    auto end = text.find('\n');
    if (end != std::string::npos) text.erase(end);
    return text;
}

}  // namespace

struct ReplicaEngine::Impl {
    Impl(const std::string& conninfo, ReplicaIdentity identity, EngineHost& host, int64_t poll_ms)
        : conninfo(conninfo), id(std::move(identity)), host(host), poll_ms(poll_ms) {
        open_session();
    }

    // A new session: the connection, its settings and its statements.
    void open_session() {
        connection = std::make_unique<pqxx::connection>(conninfo);
        pqxx::connection& conn = *connection;
        // Its own settings over the database's defaults, search_path first:
        // it connects as a privileged role (core/worker_settings.hpp).
        pqxx::nontransaction tx(*connection);
        tx.exec("SET SESSION AUTHORIZATION DEFAULT");
        std::string pin = "SELECT ";
        for (const PinnedSetting& setting : kPinnedSettings)
            pin += std::string(pin.size() > 7 ? ", " : "") + "pg_catalog.set_config(" +
                   tx.quote(setting.name) + ", " + tx.quote(setting.value) + ", false)";
        tx.exec(pin);
        apply_step_timeout(tx);
        // The statements of every pass and step, parsed and planned once
        // per connection: with ten views ticked ten times a second, planning
        // them again was a measurable share of the replica's time.
        conn.prepare("pass", "SELECT decoupled.catalog_version(), decoupled.oracle_now()");
        conn.prepare("maintain",
                     "SELECT upper, caught_up FROM decoupled.replica_maintain($1, $2, $3)");
        conn.prepare("sink", "SELECT upper, caught_up FROM decoupled.replica_sink($1, $2, $3)");
        conn.prepare("maintain_many",
                     "SELECT lifetime_id, upper, caught_up, error_state, error_message "
                     "  FROM decoupled.replica_maintain_many($1, $2::bigint[], $3::bigint[], $4)");
        conn.prepare("idle",
                     "SELECT lifetime_id, upper FROM decoupled.replica_advance_idle("
                     "$1, $2::bigint[], $3::bigint[])");
    }

    std::string conninfo;
    std::unique_ptr<pqxx::connection> connection;  // open_session
    ReplicaIdentity id;
    EngineHost& host;
    int64_t poll_ms;
    int64_t step_timeout_ms = 0;  // decoupled.step_timeout, as last applied

    std::unique_ptr<RelayFollower> relay;  // hosts outside the server only
    int64_t incarnation = 0;
    int64_t catalog_version = -1;
    bool batches = true;  // the catalog has replica_maintain_many and replica_advance_idle
    bool writes_enabled = true;
    int64_t last_heartbeat = 0;
    int64_t publication_ms = 0;  // decoupled.bound_publication_interval; 0: off
    int64_t last_compaction = 0;
    std::map<int64_t, Source> sources;
    std::map<int64_t, Maintained> maintained;  // ordered: inputs before readers

    void start() {
        pqxx::work tx(*connection);
        incarnation = tx.exec_params("SELECT decoupled.replica_start($1, $2, $3, $4)", id.replica_id,
                                     id.deployment, id.pid, id.host)[0][0]
                          .as<int64_t>();
        tx.commit();
        host.log("pg_decoupled replica " + std::to_string(id.replica_id) + " started incarnation " +
                 std::to_string(incarnation));
        if (host.follows_relay()) relay = std::make_unique<RelayFollower>(*connection, host);
    }

    void wait(int64_t ms) {
        if (relay)
            relay->wait(ms);
        else
            host.sleep_ms(ms);
    }

    void stop() {
        try {
            pqxx::work tx(*connection);
            // Not after DROP EXTENSION: the server would log the call's error.
            if (tx.exec("SELECT to_regprocedure('decoupled.replica_stop(bigint)') IS NOT NULL")[0][0]
                    .as<bool>())
                tx.exec_params("SELECT decoupled.replica_stop($1)", incarnation);
            tx.commit();
        } catch (const std::exception&) {
            // Best effort: a crashed replica is retired by its successor.
        }
    }

    // Loads the desired state in one snapshot and reconciles: sources that
    // are new are installed from their durable uppers, gone ones removed.
    void reconcile() {
        // One snapshot for everything the replica runs.
        pqxx::transaction<pqxx::isolation_level::repeatable_read> tx(*connection);
        auto rows = tx.exec_params("SELECT * FROM decoupled.replica_desired_state($1)", incarnation);
        auto views = tx.exec_params("SELECT * FROM decoupled.replica_maintained($1)", incarnation);
        // The batch calls came with 1.1: a catalog of 1.0 not yet updated
        // (the library opens it) has only the step of one view, which then
        // takes every step, instead of each pass failing on them.
        batches = tx.exec("SELECT to_regprocedure('decoupled.replica_maintain_many(bigint, "
                          "bigint[], bigint[], integer)') IS NOT NULL "
                          "AND to_regprocedure('decoupled.replica_advance_idle(bigint, bigint[], "
                          "bigint[])') IS NOT NULL")[0][0]
                      .as<bool>();
        tx.commit();
        reconcile_maintained(views);
        std::map<int64_t, Source> desired;
        for (const auto& row : rows) {
            catalog_version = row["catalog_version"].as<int64_t>();
            writes_enabled = row["writes_enabled"].as<bool>();
            if (row["source_id"].is_null()) continue;
            int64_t source_id = row["source_id"].as<int64_t>();
            Source& s = desired[source_id];
            if (s.outputs.empty()) {
                s.id = source_id;
                s.name = row["source_name"].as<std::string>();
                s.generator = row["generator"].as<std::string>();
                s.tick_ms = row["tick_ms"].as<int64_t>();
                s.epoch = row["epoch"].as<int64_t>();
            }
            Output out;
            out.id = row["output_id"].as<int64_t>();
            out.name = row["output_name"].as<std::string>();
            out.role = row["output_role"].as<std::string>();
            out.upper = row["upper"].as<int64_t>();
            s.outputs.push_back(std::move(out));
        }
        for (auto& [source_id, s] : desired) {
            auto existing = sources.find(source_id);
            if (existing != sources.end()) {
                // Keep what this incarnation already reported.
                s.reported = existing->second.reported;
            } else {
                host.log("pg_decoupled replica installs source \"" + s.name + "\"");
            }
            s.gen = make_generator(s.generator, s.id, s.epoch, s.tick_ms);
            if (!s.gen) throw std::runtime_error("unknown generator \"" + s.generator + "\"");
        }
        sources = std::move(desired);
    }

    void reconcile_maintained(const pqxx::result& rows) {
        std::map<int64_t, Maintained> desired;
        for (const auto& row : rows) {
            Maintained m;
            m.id = row["lifetime_id"].as<int64_t>();
            m.name = row["name"].as<std::string>();
            m.kind = row["kind"].as<std::string>();
            m.upper = row["upper"].as<int64_t>();
            auto existing = maintained.find(m.id);
            if (existing != maintained.end()) {
                m.reported = existing->second.reported;
                m.hydrated = existing->second.hydrated;
                m.prewarmed = existing->second.prewarmed;
                m.upper = std::max(m.upper, existing->second.upper);
            } else {
                host.log("pg_decoupled replica installs " + m.kind + " \"" + m.name + "\"");
            }
            desired.emplace(m.id, std::move(m));
        }
        maintained = std::move(desired);
    }

    // The replica's own failure: the error of a pass outside any object's
    // step (reading the catalog, reconciling, heartbeat, compaction), empty
    // while it is healthy.  Meanwhile its objects show `stalled` with it
    // and its heartbeat reports it; a pass without failure ends it.
    std::string replica_error;

    void report(Maintained& m, const std::string& status, const std::string& error,
                bool hydrated) {
        if (m.reported == status && m.hydrated == hydrated && error.empty()) return;
        pqxx::work tx(*connection);
        tx.exec_params("SELECT decoupled.replica_report($1, $2, $3, $4, NULL, $5)", incarnation, m.id,
                       status, error.empty() ? nullptr : error.c_str(), hydrated);
        tx.commit();
        m.reported = status;
        m.hydrated = hydrated;
    }

    // Whether `m` may be stepped with others (advance_idle, step_together):
    // running and hydrated, past any retry delay, while the replica and its
    // writes are healthy.  Everything else takes its own step, which
    // reports its health.
    bool steady(const Maintained& m, int64_t now) const {
        return writes_enabled && replica_error.empty() && m.reported == "running" &&
               m.hydrated && now >= m.retry_at && !m.suspect;
    }

    bool idle_batch_failed = false;  // advance_idle's failure, logged once per episode
    // The earliest retry of a step that found its storage busy in this pass.
    int64_t busy_wake = std::numeric_limits<int64_t>::max();

    // The views of this pass whose step would only move their upper, in
    // one transaction (replica_advance_idle): a transaction per idle view
    // was most of what ten views ticked ten times a second cost.  Only
    // steady views; any view the batch leaves takes its own step.  Returns
    // the views it advanced (or found caught up); a failed batch advances
    // none, and the steps say what is wrong.
    std::set<int64_t> advance_idle(int64_t now) {
        std::set<int64_t> advanced;
        std::string ids = "{", uppers = "{";
        int candidates = 0;
        for (const auto& [lifetime_id, m] : maintained) {
            if (m.kind != "materialized view" || !steady(m, now)) continue;
            if (candidates++ > 0) {
                ids += ',';
                uppers += ',';
            }
            ids += std::to_string(lifetime_id);
            uppers += std::to_string(m.upper);
        }
        // One view: its own step costs the same.
        if (candidates < 2 || !batches) return advanced;
        ids += '}';
        uppers += '}';
        Failure f = attempt([&] {
            pqxx::work tx(*connection);
            auto rows = tx.exec_prepared("idle", incarnation, ids, uppers);
            tx.commit();
            for (const auto& row : rows) {
                int64_t lifetime_id = row[0].as<int64_t>();
                auto it = maintained.find(lifetime_id);
                if (it == maintained.end()) continue;
                it->second.upper = row[1].as<int64_t>();
                advanced.insert(lifetime_id);
            }
        });
        if (f.failed) {
            advanced.clear();
            if (!idle_batch_failed)
                host.log("pg_decoupled replica steps idle views one by one: " + f.text);
            idle_batch_failed = true;
        } else {
            idle_batch_failed = false;
        }
        return advanced;
    }

    // The views and sinks of this pass that have something to compute, a
    // few per transaction.  A transaction per step waited for its own WAL
    // flush, ten views a tick for ten of them one after another; one
    // transaction for all of them made every view wait for the last before
    // any became visible.  So a transaction takes the steps that start
    // within kStepsCommitMs of its first, then commits.  Views go first, in
    // one call (replica_maintain_many: a subtransaction each, their
    // requirements advanced together), then sinks, a savepoint each.  Only
    // steady views and sinks; a step's error rolls back that step only,
    // and is handled as its own step's would be once the others committed.
    // If a transaction as a whole fails (its commit-time checks, say) its
    // objects are not stepped here: each takes its own step, which says
    // what is wrong.  Returns the objects stepped.
    static constexpr int kStepsCommitMs = 15;

    struct Failure {
        bool failed = false;
        std::string sqlstate, text;
        bool deadline = false;  // its session ended at the step's hard deadline
    };

    struct Outcome {
        Maintained* m;
        int64_t upper;
        bool caught_up;
        Failure failure;
    };

    std::set<int64_t> step_together(int64_t now, const std::set<int64_t>& skip, int64_t& wake) {
        std::set<int64_t> stepped;
        std::vector<Outcome> views, sinks;
        for (auto& [lifetime_id, m] : maintained)
            if (skip.count(lifetime_id) == 0 && steady(m, now) && (batches || m.kind == "sink"))
                (m.kind == "sink" ? sinks : views).push_back({&m, m.upper, false, {}});
        if (views.size() + sinks.size() < 2) return stepped;
        std::vector<int64_t> gone;
        auto settle = [&](std::vector<Outcome>& outcomes, size_t first, size_t next) {
            for (size_t k = first; k < next; ++k) {
                Outcome& o = outcomes[k];
                stepped.insert(o.m->id);
                if (!o.failure.failed) {
                    o.m->upper = o.upper;
                    if (!o.caught_up) wake = now;  // more to do: go on at once
                }
                if (!step_ended(*o.m, o.m->kind + " \"" + o.m->name + "\"", now, o.failure))
                    gone.push_back(o.m->id);
            }
        };
        size_t next = 0;
        while (next < views.size()) {
            size_t first = next;
            // A session ended under the batch: each view takes its own
            // step, which finds the one that ended it.
            Failure whole = attempt_in_session([&] {
                pqxx::work tx(*connection);
                next = first + step_views(tx, views, first);
                tx.commit();
            });
            if (whole.failed) {
                if (whole.sqlstate == kSessionEnded)
                    for (size_t k = first; k < views.size(); ++k) views[k].m->suspect = true;
                next = views.size();  // each takes its own step
                continue;
            }
            settle(views, first, next);
        }
        next = 0;
        while (next < sinks.size()) {
            size_t first = next;
            int64_t opened = steady_ms();
            Failure whole = attempt_in_session([&] {
                pqxx::work tx(*connection);
                do {
                    Outcome& o = sinks[next++];
                    // A savepoint by hand: libpqxx 6.4's subtransaction
                    // does not roll back to its savepoint when a statement
                    // in it failed, and every later sink of the batch then
                    // failed with "current transaction is aborted".
                    o.failure = attempt([&] {
                        tx.exec0("SAVEPOINT step");
                        try {
                            auto row = tx.exec_prepared("sink", incarnation, o.m->id, o.m->upper)[0];
                            tx.exec0("RELEASE SAVEPOINT step");
                            o.upper = row[0].as<int64_t>();
                            o.caught_up = row[1].as<bool>();
                        } catch (const pqxx::sql_error&) {
                            tx.exec0("ROLLBACK TO SAVEPOINT step");
                            throw;
                        }
                    });
                } while (next < sinks.size() && steady_ms() - opened < kStepsCommitMs);
                tx.commit();
            });
            if (whole.failed) continue;
            settle(sinks, first, next);
        }
        for (int64_t lifetime_id : gone) maintained.erase(lifetime_id);
        return stepped;
    }

    // Steps views[first..] in `tx` with one replica_maintain_many call, as
    // many as start within kStepsCommitMs; fills their outcomes and returns
    // how many it stepped (at least one).
    size_t step_views(pqxx::work& tx, std::vector<Outcome>& views, size_t first) {
        std::string ids = "{", uppers = "{";
        for (size_t k = first; k < views.size(); ++k) {
            if (k > first) {
                ids += ',';
                uppers += ',';
            }
            ids += std::to_string(views[k].m->id);
            uppers += std::to_string(views[k].m->upper);
        }
        ids += '}';
        uppers += '}';
        auto rows = tx.exec_prepared("maintain_many", incarnation, ids, uppers, kStepsCommitMs);
        size_t k = first;
        for (const auto& row : rows) {
            if (k >= views.size() || row[0].as<int64_t>() != views[k].m->id)
                throw std::runtime_error("replica_maintain_many returned views out of order");
            Outcome& o = views[k++];
            if (row[3].is_null()) {
                o.upper = row[1].as<int64_t>();
                o.caught_up = row[2].as<bool>();
            } else {
                o.failure = {true, row[3].as<std::string>(), row[4].as<std::string>()};
            }
        }
        if (k == first) throw std::runtime_error("replica_maintain_many stepped no view");
        return k - first;
    }

    // One step of a view or sink; returns whether it caught up with its
    // inputs.  A sibling that got there first is no error: continue from
    // the upper it wrote.
    bool step_maintained(Maintained& m) {
        if (m.reported.empty()) report(m, "starting", "", false);
        if (!writes_enabled) return prewarm(m);
        pqxx::work tx(*connection);
        auto row = tx.exec_prepared(m.kind == "sink" ? "sink" : "maintain", incarnation, m.id,
                                    m.upper)[0];
        bool caught_up = row[1].as<bool>();
        bool hydrated = caught_up || m.hydrated;
        // Reported in the step's transaction: whoever sees the new upper
        // sees the health that goes with it.  While the replica itself
        // fails, its objects stay stalled.
        bool changed = replica_error.empty() && (m.reported != "running" || m.hydrated != hydrated);
        if (changed)
            tx.exec_params("SELECT decoupled.replica_report($1, $2, 'running', NULL, NULL, $3)",
                           incarnation, m.id, hydrated);
        tx.commit();
        m.upper = row[0].as<int64_t>();
        if (changed) {
            m.reported = "running";
            m.hydrated = hydrated;
        }
        return caught_up;
    }

    // A replica of a prewarming deployment (C10.1) computes each view and
    // sink once from the durable state into private storage and never
    // appends: write authority belongs to the active deployment.  Once
    // promoted it steps from the durable uppers like any replica.  Returns
    // true: nothing is left to do at once (not yet computable: next pass).
    bool prewarm(Maintained& m) {
        if (m.prewarmed) return true;
        pqxx::work tx(*connection);
        bool hydrated =
            tx.exec_params("SELECT decoupled.replica_prewarm($1, $2)", incarnation, m.id)[0][0]
                .as<bool>();
        bool report_it = hydrated && replica_error.empty();
        if (report_it)
            tx.exec_params("SELECT decoupled.replica_report($1, $2, 'running', NULL, NULL, true)",
                           incarnation, m.id);
        tx.commit();
        m.prewarmed = hydrated;
        if (report_it) {
            m.reported = "running";
            m.hydrated = true;
        }
        return true;
    }

    void report(Source& s, const std::string& status, const std::string& error, bool hydrated) {
        if (s.reported == status && error.empty()) return;
        pqxx::work tx(*connection);
        for (const auto& out : s.outputs)
            tx.exec_params("SELECT decoupled.replica_report($1, $2, $3, $4, NULL, $5)", incarnation,
                           out.id, status, error.empty() ? nullptr : error.c_str(), hydrated);
        tx.commit();
        s.reported = status;
    }

    // Appends every due tick of every output of `s`; returns when its next
    // tick is due.
    int64_t advance(Source& s, int64_t now) {
        if (s.reported.empty()) report(s, "starting", "", false);
        if (!writes_enabled) {
            // Prewarming: the generator is installed; the active deployment
            // appends its ticks.
            if (s.reported != "running" && replica_error.empty()) report(s, "running", "", true);
            return now + poll_ms;
        }
        bool caught_up = true;
        pqxx::work tx(*connection);
        for (auto& out : s.outputs) {
            auto ticks = tick_times(s.epoch, s.tick_ms, out.upper, now, kMaxTicksPerAppend);
            if (ticks.empty()) continue;
            std::vector<GeneratedUpdate> updates;
            for (int64_t t : ticks) s.gen->tick(out.role, t, updates);
            int64_t new_upper = ticks.back() + 1;
            // Losing the race to a sibling is no error: continue from its upper.
            out.upper = tx.exec_params("SELECT decoupled.replica_append($1, $2, $3::jsonb, $4, $5)",
                                       incarnation, out.id, updates_json(updates), out.upper,
                                       new_upper)[0][0]
                            .as<int64_t>();
            if (ticks.size() == kMaxTicksPerAppend) caught_up = false;
        }
        tx.commit();
        if (caught_up && s.reported != "running" && replica_error.empty())
            report(s, "running", "", true);
        int64_t next = now + s.tick_ms;
        for (const auto& out : s.outputs) {
            auto due = tick_times(s.epoch, s.tick_ms, out.upper, out.upper + s.tick_ms, 1);
            if (!due.empty()) next = std::min(next, due.front());
        }
        return caught_up ? next : now;
    }

    int64_t retry_delay(int failures) const {
        int64_t ms = std::max<int64_t>(poll_ms, 1);
        for (int i = 1; i < failures && ms < kMaxRetryMs; ++i) ms *= 2;
        return std::min(ms, kMaxRetryMs);
    }

    // A failed report must not hide the failure it reports: only fencing
    // and a lost connection go further.
    template <typename Report>
    void try_report(Report report_it) {
        try {
            report_it();
        } catch (const pqxx::broken_connection&) {
            throw;
        } catch (const pqxx::sql_error& e) {
            if (is_fencing(e)) throw Fenced(e.what());
            host.log("pg_decoupled replica could not report its health: " + error_text(e));
        }
    }

    // Runs one step of a source, view or sink (`what` names it).  Its
    // failure means, by SQLSTATE only: fenced (ZD001) — the run ends;
    // dropped meanwhile (ZD002) — returns false, the object leaves the
    // replica's work and the catalog is read again; a lost race (ZD003) —
    // retried at the next pass; anything else — the object is reported
    // `stalled` with the error and retried with backoff, while the replica
    // goes on with its other objects.
    // How a piece of a pass ended: fencing and a lost connection end the
    // run (they propagate); any other error is returned with its SQLSTATE
    // (empty when it was not SQL's) and its text.
    template <typename Run>
    Failure attempt(Run run) {
        try {
            run();
            return {};
        } catch (const Fenced&) {
            throw;
        } catch (const pqxx::broken_connection&) {
            throw;
        } catch (const pqxx::sql_error& e) {
            if (is_fencing(e)) throw Fenced(e.what());
            return {true, e.sqlstate(), error_text(e)};
        } catch (const std::exception& e) {
            return {true, "", error_text(e)};
        }
    }

    template <typename Object, typename Step>
    bool guarded_step(Object& o, const std::string& what, int64_t now, Step step) {
        return step_ended(o, what, now, attempt_in_session(step));
    }

    // A step's session ended in this pass: the pass ends after that step,
    // so that one owner's views that end their sessions take one such step
    // a pass between everyone else's steps, not one after another.
    bool session_ended_in_pass = false;

    // As attempt, for steps: one whose session ended under it failed, if a
    // new session opens.  The server ends a step's session when the step ran
    // for twice decoupled.step_timeout without stopping when cancelled (its
    // owner's code caught the cancel: extension/step_deadline.cpp): that
    // object is then held back (step_ended) and the replica goes on with
    // the others.  A session an administrator ended fails its step like any
    // error.  If no session opens (the server is gone), the run ends as
    // before.  Run must hold its transaction inside: none may outlive the
    // old session.
    template <typename Run>
    Failure attempt_in_session(Run run) {
        int64_t started = steady_ms();
        try {
            return attempt(run);
        } catch (const pqxx::broken_connection& e) {
            std::string lost = error_text(e);
            session_ended_in_pass = true;
            relay.reset();  // it holds the old connection
            try {
                open_session();
                if (host.follows_relay())
                    relay = std::make_unique<RelayFollower>(*connection, host);
            } catch (const std::exception& again) {
                host.log("pg_decoupled replica could not open a new session: " +
                         error_text(again));
                throw e;
            }
            if (step_timeout_ms > 0 && steady_ms() - started >= 2 * step_timeout_ms)
                return {true, kSessionEnded,
                        "the step ran for twice decoupled.step_timeout without stopping when "
                        "cancelled; the server ended its session",
                        true};
            // Ended otherwise (an administrator's pg_terminate_backend):
            // retried as any failed step.
            return {true, kSessionEnded, "the step's session ended: " + lost};
        }
    }

    // decoupled.step_timeout (the server's, followed at every heartbeat) as
    // the session's statement_timeout: a step whose query never ends — a
    // function of the view's creator that sleeps — is cancelled instead of
    // holding up every other object of the replica (C5).
    template <typename Tx>
    void apply_step_timeout(Tx& tx) {
        step_timeout_ms =
            tx.exec("SELECT (extract(epoch FROM set_config('statement_timeout', "
                    "coalesce(current_setting('decoupled.step_timeout', true), '0'), false)"
                    "::interval) * 1000)::bigint")[0][0]
                .template as<int64_t>();
    }

    // A step cancelled by decoupled.step_timeout is retried only after ten
    // times that: a view that always runs out of time takes a tenth of its
    // replica's time at most.
    bool timed_out(const Failure& f) const {
        return f.sqlstate == "57014" && f.text.find("statement timeout") != std::string::npos &&
               step_timeout_ms > 0;
    }

    // What a step's end `f` means for `o` (see guarded_step); false: it
    // leaves the replica's work.
    template <typename Object>
    bool step_ended(Object& o, const std::string& what, int64_t now, const Failure& f) {
        if (!f.failed) {
            o.failures = 0;
            o.retry_at = 0;
            o.busy_since = 0;
            return true;
        }
        if (f.sqlstate == kDroppedMeanwhile) {
            catalog_version = -1;
            return false;
        }
        if (f.sqlstate == kLostRace) return true;
        if (f.sqlstate == kBusy || f.sqlstate == kLockNotAvailable) {
            if (o.busy_since == 0) o.busy_since = now;
            if (now - o.busy_since < kBusyStallMs) {
                o.retry_at = now + kBusyRetryMs;
                busy_wake = std::min(busy_wake, o.retry_at);
                return true;
            }
        } else {
            o.busy_since = 0;
        }
        // Dropped while the step ran (its written plan or storage went with
        // the drop's commit, which the step waited for): no stall, the
        // catalog is read again as for ZD002.
        if (dropped_meanwhile(o.id)) {
            catalog_version = -1;
            return false;
        }
        const std::string error =
            f.sqlstate == kLockNotAvailable
                ? "another transaction holds a lock it needs (" + f.text + ")"
                : f.text;
        o.failures++;
        // A step that ran out of time is held back ten times that; one that
        // ignored its cancel until its session ended, twice as long again
        // at each repetition (up to 32 times), so that views that always
        // do take less and less of their replica.
        int64_t held_back = 0;
        if (timed_out(f)) held_back = 11 * step_timeout_ms;
        if (f.deadline) held_back = (11 * step_timeout_ms) << std::min(o.failures - 1, 5);
        o.retry_at = now + retry_delay(o.failures) + held_back;
        host.log("pg_decoupled replica: " + what + " stalled: " + error);
        try_report([&] { report(o, "stalled", error, false); });
        return true;
    }

    // Whether the catalog no longer has `lifetime_id` live (any failure to
    // ask counts as no: the step's error is then reported as it is).
    bool dropped_meanwhile(int64_t lifetime_id) {
        try {
            pqxx::nontransaction tx(*connection);
            return !tx.exec_params("SELECT EXISTS (SELECT FROM decoupled.objects "
                                   "WHERE lifetime_id = $1)",
                                   lifetime_id)[0][0]
                        .as<bool>();
        } catch (const pqxx::broken_connection&) {
            throw;
        } catch (const std::exception&) {
            return false;
        }
    }

    // Every source output, view and sink of this replica: `stalled` with
    // `error`, in the caller's transaction.
    void report_every_object_stalled(pqxx::work& tx, const std::string& error) {
        for (const auto& [source_id, s] : sources)
            for (const auto& out : s.outputs)
                tx.exec_params("SELECT decoupled.replica_report($1, $2, 'stalled', $3, NULL, false)",
                               incarnation, out.id, error);
        for (const auto& [lifetime_id, m] : maintained)
            tx.exec_params("SELECT decoupled.replica_report($1, $2, 'stalled', $3, NULL, false)",
                           incarnation, lifetime_id, error);
    }

    // A phase of a pass outside any object's step failed: the replica
    // reports itself stalled with the error (replica_statuses) and, once per
    // episode, each of its objects too (object_statuses, status_history).
    void replica_failed(const std::string& error) {
        if (error == replica_error) return;
        host.log("pg_decoupled replica " + std::to_string(id.replica_id) + " stalled: " + error);
        replica_error = error;
        try_report([&] {
            pqxx::work tx(*connection);
            tx.exec_params("SELECT decoupled.replica_heartbeat($1, 'stalled', $2)", incarnation,
                           error);
            report_every_object_stalled(tx, error);
            tx.commit();
            for (auto& [source_id, s] : sources) s.reported = "stalled";
            for (auto& [lifetime_id, m] : maintained) m.reported = "stalled";
        });
    }

    // A pass without failure after one: the replica runs again; its objects
    // report `running` at their next successful step.
    void replica_recovered() {
        host.log("pg_decoupled replica " + std::to_string(id.replica_id) + " recovered");
        replica_error.clear();
        try_report([&] {
            pqxx::work tx(*connection);
            tx.exec_params("SELECT decoupled.replica_heartbeat($1)", incarnation);
            tx.commit();
        });
    }

    // Runs one phase of a pass; its error becomes the replica's failure
    // (fencing and a lost connection end the run).  Returns whether it
    // succeeded.
    template <typename Phase>
    bool phase(const char* what, bool& failed, Phase run_phase) {
        Failure f = attempt(run_phase);
        if (!f.failed) return true;
        failed = true;
        replica_failed(std::string(what) + ": " + f.text);
        return false;
    }

    // One pass; returns how long to sleep.
    int64_t step() {
        bool failed = false;
        int64_t version = 0, now = 0;
        if (!phase("reading the catalog version", failed, [&] {
                pqxx::nontransaction tx(*connection);
                auto row = tx.exec_prepared("pass")[0];
                version = row[0].as<int64_t>();
                now = row[1].as<int64_t>();
            }))
            return poll_ms;
        if (version != catalog_version) phase("reading the catalog", failed, [&] { reconcile(); });
        if (now - last_heartbeat >= kHeartbeatMs) {
            phase("heartbeat", failed, [&] {
                pqxx::work tx(*connection);
                tx.exec_params("SELECT decoupled.replica_heartbeat($1, $2, $3)", incarnation,
                               replica_error.empty() ? "running" : "stalled",
                               replica_error.empty() ? nullptr : replica_error.c_str());
                apply_step_timeout(tx);
                // The setting as an interval ("1s", "500ms"): pg_settings
                // would compute every setting of the server to show one.
                publication_ms =
                    tx.exec("SELECT (extract(epoch FROM current_setting("
                            "'decoupled.bound_publication_interval')::interval) * 1000)::bigint")[0][0]
                        .as<int64_t>();
                tx.commit();
            });
            last_heartbeat = now;
        }
        // Compaction by replicas: publish and apply bounds for what runs on
        // this cluster; it needs no adapter (C3.5, C5.5).  A failed round is
        // retried at the next interval.
        if (writes_enabled && publication_ms > 0 && now - last_compaction >= publication_ms) {
            last_compaction = now;
            phase("compaction", failed, [&] {
                pqxx::work tx(*connection);
                // decoupled.step_timeout bounds steps, not compaction: a
                // round after a long outage deletes much history, and one
                // cancelled each time would never free it.
                tx.exec0("SET LOCAL statement_timeout = 0");
                tx.exec_params("SELECT decoupled.replica_compact($1)", incarnation);
                tx.commit();
            });
        }
        int64_t wake = now + poll_ms;
        busy_wake = std::numeric_limits<int64_t>::max();
        for (auto it = sources.begin(); it != sources.end();) {
            Source& s = it->second;
            if (now < s.retry_at) {
                wake = std::min(wake, s.retry_at);
                ++it;
                continue;
            }
            bool kept = guarded_step(s, "source \"" + s.name + "\"", now,
                                     [&] { wake = std::min(wake, advance(s, now)); });
            it = kept ? std::next(it) : sources.erase(it);
        }
        session_ended_in_pass = false;
        std::set<int64_t> done = advance_idle(now);
        for (int64_t lifetime_id : step_together(now, done, wake)) done.insert(lifetime_id);
        // The others first, then the suspects; after a step whose session
        // ended, the next pass.
        for (int round = 0; round < 2 && !session_ended_in_pass; ++round) {
            for (auto it = maintained.begin(); it != maintained.end();) {
                Maintained& m = it->second;
                if (session_ended_in_pass) {
                    wake = now;  // the rest at once, in a new pass
                    break;
                }
                if (done.count(it->first) > 0 || m.suspect != (round == 1)) {
                    ++it;
                    continue;
                }
                if (now < m.retry_at) {
                    wake = std::min(wake, m.retry_at);
                    ++it;
                    continue;
                }
                bool kept = guarded_step(m, m.kind + " \"" + m.name + "\"", now, [&] {
                    if (!step_maintained(m)) wake = now;  // more to do: go on at once
                    m.suspect = false;
                });
                it = kept ? std::next(it) : maintained.erase(it);
            }
        }
        if (session_ended_in_pass) wake = now;
        if (!failed && !replica_error.empty()) replica_recovered();
        wake = std::min(wake, busy_wake);
        return std::max<int64_t>(wake - now, 0);
    }

    // The run ends on an error no pass could absorb (a lost connection):
    // say so in the replica's health and history before the host restarts
    // it, over a new connection if this one is gone.  Best effort.
    void report_stop(const std::string& error) {
        try {
            std::unique_ptr<pqxx::connection> fresh;
            pqxx::connection* c = connection.get();
            if (!c->is_open()) {
                fresh = std::make_unique<pqxx::connection>(conninfo);
                c = fresh.get();
            }
            pqxx::work tx(*c);
            tx.exec("SET LOCAL search_path = pg_catalog, pg_temp");
            std::string message = "replica stopped: " + error;
            tx.exec_params("SELECT decoupled.replica_heartbeat($1, 'stalled', $2)", incarnation,
                           message);
            report_every_object_stalled(tx, message);
            tx.commit();
        } catch (const std::exception& e) {
            host.log("pg_decoupled replica could not report its stop: " + error_text(e));
        }
    }
};

ReplicaEngine::ReplicaEngine(const std::string& conninfo, ReplicaIdentity identity,
                             EngineHost& host, int64_t poll_ms)
    : impl_(std::make_unique<Impl>(conninfo, std::move(identity), host, poll_ms)) {}

ReplicaEngine::~ReplicaEngine() = default;

void ReplicaEngine::run() {
    Impl& e = *impl_;
    try {
        e.start();
    } catch (const pqxx::sql_error& err) {
        // Fenced at once, or another process started this replica first.
        if (is_fencing(err) || err.sqlstate() == kLostRace) throw Fenced(err.what());
        throw;
    }
    try {
        while (!e.host.stop_requested()) {
            int64_t sleep = e.step();
            if (sleep > 0) e.wait(sleep);
        }
    } catch (const Fenced&) {
        throw;  // the successor owns the health now
    } catch (const std::exception& err) {
        e.report_stop(error_text(err));
        throw;
    }
    e.stop();
}

}  // namespace decoupled
