// pg_decoupled_replicad: the replica engine as a standalone process.
//
// The same engine as the in-server replica worker, hosted by an ordinary
// program that may run on another machine: it needs only a connection
// string and the replica's identity.  Declare the replica with
// decoupled.create_replica(cluster, name, external => true) so that the
// controller leaves it to this daemon.
//
//   pg_decoupled_replicad --conninfo 'host=... dbname=...' --cluster c --replica r
//                         [--deployment default] [--poll-ms 1000]
//
// Exit status: 0 after SIGTERM/SIGINT, 1 on failure, 3 when a newer
// incarnation fenced this one.  Run it under a supervisor that restarts it.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <iostream>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "../bgworker/replica_engine.hpp"

namespace {

volatile sig_atomic_t stop_flag = 0;

void on_signal(int) { stop_flag = 1; }

class DaemonHost : public decoupled::EngineHost {
  public:
    bool stop_requested() override { return stop_flag != 0; }
    void sleep_ms(int64_t ms) override {
        // Short steps keep a stop request responsive.
        for (int64_t slept = 0; slept < ms && !stop_flag; slept += 10)
            std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(10, ms - slept)));
    }
    // Wake-ups come from the relay the server runs with (brief C8).
    bool follows_relay() override { return true; }
    void log(const std::string& message) override {
        std::time_t now = std::time(nullptr);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::gmtime(&now));
        std::cerr << stamp << " UTC [" << getpid() << "] " << message << std::endl;
    }
};

[[noreturn]] void usage(const char* error) {
    if (error) std::cerr << "pg_decoupled_replicad: " << error << "\n";
    std::cerr << "usage: pg_decoupled_replicad --conninfo STRING (--cluster NAME --replica NAME "
                 "| --replica-id ID) [--deployment NAME] [--poll-ms MS]\n";
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::string conninfo, cluster, replica, deployment = "default";
    int64_t replica_id = 0, poll_ms = 1000;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(("missing value for " + arg).c_str());
            return argv[++i];
        };
        if (arg == "--conninfo") conninfo = value();
        else if (arg == "--cluster") cluster = value();
        else if (arg == "--replica") replica = value();
        else if (arg == "--replica-id") replica_id = std::stoll(value());
        else if (arg == "--deployment") deployment = value();
        else if (arg == "--poll-ms") poll_ms = std::stoll(value());
        else if (arg == "--help" || arg == "-h") usage(nullptr);
        else usage(("unknown argument " + arg).c_str());
    }
    if (conninfo.empty()) usage("--conninfo is required");
    if (replica_id == 0 && (cluster.empty() || replica.empty()))
        usage("give --cluster and --replica, or --replica-id");

    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    DaemonHost host;
    try {
        if (replica_id == 0) {
            pqxx::connection conn(conninfo);
            pqxx::nontransaction tx(conn);
            auto rows = tx.exec_params(
                "SELECT replica_id FROM decoupled.catalog_replicas WHERE cluster = $1 AND name = $2",
                cluster, replica);
            if (rows.empty()) {
                host.log("replica \"" + replica + "\" does not exist in cluster \"" + cluster + "\"");
                return 1;
            }
            replica_id = rows[0][0].as<int64_t>();
        }
        char hostname[256] = "";
        gethostname(hostname, sizeof hostname - 1);
        decoupled::ReplicaIdentity identity{replica_id, deployment, static_cast<int>(getpid()),
                                            hostname};
        decoupled::ReplicaEngine engine(conninfo, identity, host, poll_ms);
        engine.run();
    } catch (const decoupled::Fenced& e) {
        host.log(std::string("fenced: ") + e.what());
        return 3;
    } catch (const std::exception& e) {
        host.log(std::string("failed: ") + e.what());
        return 1;
    }
    host.log("stopped");
    return 0;
}
