// pg_decoupled_relayd: the external relay (brief C8.2).
//
// Owns the shared-memory segment named by decoupled.relay_name (a
// Boost.Interprocess segment in /dev/shm): the server's processes publish
// wake-ups into it at commit, and this daemon fans each one out to every
// process on this host that follows it (pg_decoupled_replicad attaches by
// itself when the server runs with decoupled.relay = external).  It may
// start before or after the server and be stopped, killed or restarted at
// any time: a restart reuses the segment, so nobody needs to re-attach, and
// while it is away followers wake at their poll interval.
//
//   pg_decoupled_relayd [--name pg_decoupled_relay] [--remove]
//
// --remove deletes the segment and exits.  Exit status: 0 after
// SIGTERM/SIGINT, 1 on failure, 2 on bad arguments.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <iostream>
#include <string>

#include "../extension/core/relay_segment.hpp"

namespace {

volatile sig_atomic_t stop_flag = 0;

void on_signal(int) { stop_flag = 1; }

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void log(const std::string& message) {
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::gmtime(&now));
    std::cerr << stamp << " UTC [" << getpid() << "] " << message << std::endl;
}

bool process_alive(int32_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

[[noreturn]] void usage(const char* error) {
    if (error) std::cerr << "pg_decoupled_relayd: " << error << "\n";
    std::cerr << "usage: pg_decoupled_relayd [--name NAME] [--remove]\n";
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::string name = "pg_decoupled_relay";
    bool remove = false;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--name") {
            if (i + 1 >= argc) usage("missing value for --name");
            name = argv[++i];
        } else if (arg == "--remove") {
            remove = true;
        } else if (arg == "--help" || arg == "-h") {
            usage(nullptr);
        } else {
            usage(("unknown argument " + arg).c_str());
        }
    }
    if (!decoupled::relay::valid_name(name))
        usage("the name must be 1 to 200 letters, digits, '_', '-' or '.'");
    if (remove) {
        bool removed = decoupled::relay::Segment::remove(name);
        log(removed ? "removed segment " + name : "no segment " + name);
        return 0;
    }

    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    std::unique_ptr<decoupled::relay::Segment> segment;
    try {
        segment = decoupled::relay::Segment::own(name);
    } catch (const std::exception& e) {
        log(std::string("failed: ") + e.what());
        return 1;
    }
    log("relaying through segment " + name);
    const int32_t pid = static_cast<int32_t>(getpid());
    uint32_t seen = segment->layout().publish_word.load();
    int64_t last_reclaim = 0;
    while (!stop_flag) {
        segment->heartbeat(pid, now_ms());
        // Short waits keep the heartbeat fresh and a stop responsive.
        uint32_t now = segment->wait_publication(seen, 100);
        if (now != seen) {
            seen = now;
            segment->fan_out(now_ms());
        }
        if (now_ms() - last_reclaim >= 1000) {
            last_reclaim = now_ms();
            segment->reclaim_followers(process_alive);
        }
    }
    // Followers see no heartbeat and poll; the segment stays for the next run.
    segment->heartbeat(0, 0);
    log("stopped");
    return 0;
}
