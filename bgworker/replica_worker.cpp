// The in-server host of the replica engine: a dynamic background worker
// started by the controller for one supervised slot.
//
// It claims its slot (recording its pid, which is how a restarted controller
// adopts it), connects back to the server over libpq, and runs the engine
// until SIGTERM or a failure.  Exit code 1 on failure: the controller
// restarts it with backoff.  No C++ exception or PostgreSQL error crosses
// the other's frames: PostgreSQL calls from the engine's callbacks go
// through pg_call, and errors are reported only after the engine unwound.
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
}

#include <string>

#include "../extension/gucs.hpp"
#include "../extension/pg_guard.hpp"
#include "../extension/shmem.hpp"
#include "replica_engine.hpp"

extern "C" {
PGDLLEXPORT void decoupled_replica_main(Datum);
}

namespace {

class WorkerHost : public decoupled::EngineHost {
  public:
    bool stop_requested() override {
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            decoupled::pg_call([] { ProcessConfigFile(PGC_SIGHUP); });
        }
        return ShutdownRequestPending;
    }
    void sleep_ms(int64_t ms) override {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, (long)ms,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
    }
    void log(const std::string& message) override {
        decoupled::pg_call([&] { ereport(LOG, (errmsg("%s", message.c_str()))); });
    }
};

// The first Unix socket directory, the server's port and the catalog
// database; decoupled.replica_conninfo overrides it.
std::string default_conninfo(const char* label) {
    if (decoupled::guc_replica_conninfo && *decoupled::guc_replica_conninfo)
        return decoupled::guc_replica_conninfo;
    std::string dirs = Unix_socket_directories ? Unix_socket_directories : "";
    std::string host = dirs.substr(0, dirs.find(','));
    while (!host.empty() && host.front() == ' ') host.erase(0, 1);
    while (!host.empty() && host.back() == ' ') host.pop_back();
    if (host.empty()) host = "localhost";
    auto quote = [](const std::string& v) {
        std::string q = "'";
        for (char c : v) {
            if (c == '\'' || c == '\\') q += '\\';
            q += c;
        }
        return q + "'";
    };
    return "host=" + quote(host) + " port=" + std::to_string(PostPortNumber) +
           " dbname=" + quote(decoupled::guc_database) +
           " options=" + quote("-c search_path=pg_catalog,pg_temp") +
           " application_name=" + quote(std::string("pg_decoupled replica ") + label);
}

}  // namespace

void decoupled_replica_main(Datum arg) {
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGINT, SIG_IGN);
    BackgroundWorkerUnblockSignals();

    decoupled::SpecSlot spec;
    decoupled::claim_own_slot(arg, &spec);
    decoupled::ReplicaIdentity identity;
    identity.replica_id = spec.replica_id;
    identity.deployment = spec.deployment;
    char label[2 * NAMEDATALEN + 2];
    snprintf(label, sizeof(label), "%s.%s", spec.cluster, spec.name);
    identity.pid = MyProcPid;
    identity.host = "in-server";

    char* failure = nullptr;
    bool fenced = false;
    {
        std::string conninfo = default_conninfo(label);
        WorkerHost host;
        try {
            decoupled::ReplicaEngine engine(conninfo, identity, host, decoupled::guc_poll_interval);
            engine.run();
        } catch (const decoupled::Fenced& e) {
            fenced = true;
            failure = pstrdup(e.what());
        } catch (const std::exception& e) {
            failure = pstrdup(e.what());
        }
    }
    if (failure)
        ereport(LOG, (errmsg("pg_decoupled replica %s stops: %s", label, failure),
                      fenced ? errdetail("A newer incarnation of this replica took over.") : 0));
    proc_exit(failure ? 1 : 0);
}
