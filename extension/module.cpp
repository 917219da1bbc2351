// Library entry: refuse to load late, define GUCs, reserve shared memory and
// register the controller.
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
}

#include "ddl_guard.hpp"
#include "gucs.hpp"
#include "read_rewrite.hpp"
#include "shmem.hpp"
#include "storage_stats.hpp"

namespace decoupled {
void define_as_of_guc();
}  // namespace decoupled

extern "C" {
PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

namespace {

void register_controller() {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof(worker));
    snprintf(worker.bgw_name, BGW_MAXLEN, "pg_decoupled controller");
    snprintf(worker.bgw_type, BGW_MAXLEN, "pg_decoupled controller");
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    // A crashed or terminated controller comes back on its own; the processes
    // it supervises keep running meanwhile (brief C9.2).
    worker.bgw_restart_time = 5;
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "pg_decoupled");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "decoupled_controller_main");
    RegisterBackgroundWorker(&worker);
}

}  // namespace

void _PG_init(void) {
    // Shared memory and the controller exist only when the postmaster loads
    // the library; a late LOAD would leave half an extension behind.
    if (!process_shared_preload_libraries_in_progress)
        ereport(ERROR,
                (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                 errmsg("pg_decoupled must be loaded via shared_preload_libraries"),
                 errhint("Add pg_decoupled to shared_preload_libraries in postgresql.conf "
                         "and restart the server.")));

    decoupled::define_as_of_guc();
    decoupled::define_gucs();
    decoupled::install_shmem_hooks();
    decoupled::install_read_rewrite();
    decoupled::install_storage_stats_hooks();
    decoupled::install_ddl_guard();
    register_controller();
}
