#include "replica_engine.hpp"

#include <algorithm>
#include <map>
#include <pqxx/pqxx>
#include <vector>

#include "../extension/core/generators.hpp"

namespace decoupled {

namespace {

// Ticks appended per output and call, so that catching up after a long
// outage proceeds in bounded transactions.
constexpr size_t kMaxTicksPerAppend = 1000;
constexpr int64_t kHeartbeatMs = 1000;

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
};

bool is_fencing(const pqxx::sql_error& e) {
    return e.sqlstate() == "55000" &&
           std::string(e.what()).find("is not current") != std::string::npos;
}

}  // namespace

struct ReplicaEngine::Impl {
    Impl(const std::string& conninfo, ReplicaIdentity identity, EngineHost& host, int64_t poll_ms)
        : conn(conninfo), id(std::move(identity)), host(host), poll_ms(poll_ms) {
        // It connects as a privileged role: never resolve a name in a schema
        // another user can create objects in.
        pqxx::nontransaction tx(conn);
        tx.exec("SET search_path = pg_catalog, pg_temp");
    }

    pqxx::connection conn;
    ReplicaIdentity id;
    EngineHost& host;
    int64_t poll_ms;

    int64_t incarnation = 0;
    int64_t catalog_version = -1;
    bool writes_enabled = true;
    int64_t last_heartbeat = 0;
    int64_t publication_ms = 0;  // decoupled.bound_publication_interval; 0: off
    int64_t last_compaction = 0;
    std::map<int64_t, Source> sources;
    std::map<int64_t, Maintained> maintained;  // ordered: inputs before readers

    void start() {
        pqxx::work tx(conn);
        incarnation = tx.exec_params("SELECT decoupled.replica_start($1, $2, $3, $4)", id.replica_id,
                                     id.deployment, id.pid, id.host)[0][0]
                          .as<int64_t>();
        tx.commit();
        host.log("pg_decoupled replica " + std::to_string(id.replica_id) + " started incarnation " +
                 std::to_string(incarnation));
    }

    void stop() {
        try {
            pqxx::work tx(conn);
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
        pqxx::transaction<pqxx::isolation_level::repeatable_read> tx(conn);
        auto rows = tx.exec_params("SELECT * FROM decoupled.replica_desired_state($1)", incarnation);
        auto views = tx.exec_params("SELECT * FROM decoupled.replica_maintained($1)", incarnation);
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
                m.upper = std::max(m.upper, existing->second.upper);
            } else {
                host.log("pg_decoupled replica installs " + m.kind + " \"" + m.name + "\"");
            }
            desired.emplace(m.id, std::move(m));
        }
        maintained = std::move(desired);
    }

    void report(Maintained& m, const std::string& status, const std::string& error,
                bool hydrated) {
        if (m.reported == status && m.hydrated == hydrated && error.empty()) return;
        pqxx::work tx(conn);
        tx.exec_params("SELECT decoupled.replica_report($1, $2, $3, $4, NULL, $5)", incarnation, m.id,
                       status, error.empty() ? nullptr : error.c_str(), hydrated);
        tx.commit();
        m.reported = status;
        m.hydrated = hydrated;
    }

    // One step of a view or sink; returns whether it caught up with its
    // inputs.  A sibling that got there first is no error: continue from
    // the upper it wrote.
    bool step_maintained(Maintained& m) {
        if (m.reported.empty()) report(m, "starting", "", false);
        if (!writes_enabled) return true;
        const char* sql = m.kind == "sink"
                              ? "SELECT upper, caught_up FROM decoupled.replica_sink($1, $2, $3)"
                              : "SELECT upper, caught_up FROM decoupled.replica_maintain($1, $2, $3)";
        pqxx::work tx(conn);
        auto row = tx.exec_params(sql, incarnation, m.id, m.upper)[0];
        bool caught_up = row[1].as<bool>();
        bool hydrated = caught_up || m.hydrated;
        // Reported in the step's transaction: whoever sees the new upper
        // sees the health that goes with it.
        bool changed = m.reported != "running" || m.hydrated != hydrated;
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

    void report(Source& s, const std::string& status, const std::string& error, bool hydrated) {
        if (s.reported == status && error.empty()) return;
        pqxx::work tx(conn);
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
        if (!writes_enabled) return now + poll_ms;
        bool caught_up = true;
        pqxx::work tx(conn);
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
        if (caught_up && s.reported != "running") report(s, "running", "", true);
        int64_t next = now + s.tick_ms;
        for (const auto& out : s.outputs) {
            auto due = tick_times(s.epoch, s.tick_ms, out.upper, out.upper + s.tick_ms, 1);
            if (!due.empty()) next = std::min(next, due.front());
        }
        return caught_up ? next : now;
    }

    // One pass; returns how long to sleep.
    int64_t step() {
        int64_t version, now;
        {
            pqxx::nontransaction tx(conn);
            auto row = tx.exec("SELECT decoupled.catalog_version(), decoupled.oracle_now()")[0];
            version = row[0].as<int64_t>();
            now = row[1].as<int64_t>();
        }
        if (version != catalog_version) reconcile();
        if (now - last_heartbeat >= kHeartbeatMs) {
            pqxx::work tx(conn);
            tx.exec_params("SELECT decoupled.replica_heartbeat($1)", incarnation);
            publication_ms = tx.exec("SELECT setting::bigint FROM pg_settings "
                                     "WHERE name = 'decoupled.bound_publication_interval'")[0][0]
                                 .as<int64_t>();
            tx.commit();
            last_heartbeat = now;
        }
        // Compaction by replicas: publish and apply bounds for what runs on
        // this cluster; it needs no adapter (C3.5, C5.5).
        if (writes_enabled && publication_ms > 0 && now - last_compaction >= publication_ms) {
            pqxx::work tx(conn);
            tx.exec_params("SELECT decoupled.replica_compact($1)", incarnation);
            tx.commit();
            last_compaction = now;
        }
        int64_t wake = now + poll_ms;
        for (auto it = sources.begin(); it != sources.end();) {
            Source& s = it->second;
            try {
                wake = std::min(wake, advance(s, now));
                ++it;
            } catch (const pqxx::sql_error& e) {
                if (is_fencing(e)) throw Fenced(e.what());
                if (e.sqlstate() == "42704") {  // dropped meanwhile
                    it = sources.erase(it);
                    continue;
                }
                host.log("pg_decoupled replica: source \"" + s.name + "\" stalled: " + e.what());
                try {
                    report(s, "stalled", e.what(), false);
                } catch (const pqxx::sql_error& r) {
                    if (is_fencing(r)) throw Fenced(r.what());
                }
                ++it;
            }
        }
        for (auto it = maintained.begin(); it != maintained.end();) {
            Maintained& m = it->second;
            try {
                if (!step_maintained(m)) wake = now;  // more to do: go on at once
                ++it;
            } catch (const pqxx::sql_error& e) {
                if (is_fencing(e)) throw Fenced(e.what());
                if (e.sqlstate() == "42704") {  // dropped meanwhile
                    it = maintained.erase(it);
                    continue;
                }
                host.log("pg_decoupled replica: " + m.kind + " \"" + m.name + "\" stalled: " +
                         e.what());
                try {
                    report(m, "stalled", e.what(), false);
                } catch (const pqxx::sql_error& r) {
                    if (is_fencing(r)) throw Fenced(r.what());
                }
                ++it;
            }
        }
        return std::max<int64_t>(wake - now, 0);
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
        while (!e.host.stop_requested()) {
            int64_t sleep = e.step();
            if (sleep > 0) e.host.sleep_ms(sleep);
        }
    } catch (const pqxx::sql_error& err) {
        if (is_fencing(err)) throw Fenced(err.what());
        throw;
    }
    e.stop();
}

}  // namespace decoupled
