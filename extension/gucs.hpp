// The decoupled.* configuration parameters.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

extern char* guc_database;      // decoupled.database: where the catalog lives
extern int guc_poll_interval;   // decoupled.poll_interval: ms between catalog polls
extern int guc_max_workers;     // decoupled.max_workers: supervised process slots

void define_gucs();

}  // namespace decoupled
