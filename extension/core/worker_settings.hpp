// The session settings every process of the extension runs with —
// controller, capture worker, adapterd, relay and replica sessions (in the
// server or pg_decoupled_replicad) — whatever the database's or a role's
// defaults say.  A database's owner needs no superuser to run
// `ALTER DATABASE ... SET default_transaction_read_only = on` (or a
// serializable isolation, a statement, lock or idle timeout): the
// extension's sessions, which take those defaults at connection, then
// failed every transaction, and maintenance stopped for every owner.
// PostgreSQL-free: the replica engine (a libpq client) uses it too.
#pragma once

namespace decoupled {

struct PinnedSetting {
    const char* name;
    const char* value;
    // The process bounds its own waits with it later (the controller's
    // lock_timeout around a drop a reader may hold, a replica's
    // statement_timeout per step): pinned as a session's own SET, which
    // those later settings override.  The others are pinned above
    // anything set later in the session — code that runs there as a
    // table's owner (a domain's check, say) cannot change them for the
    // process.
    bool set_later = false;
};

// In this order, after the session's authorization is set back to the user
// it connected as (`session_authorization` as a database default — which
// a superuser's session takes — made every worker run as the database's
// owner; the in-server processes set it to that user's name, a libpq
// session runs SET SESSION AUTHORIZATION DEFAULT).  What a process sets
// for itself later (a replica's statement_timeout per step, a capture
// switch's lock_timeout) overrides.
inline constexpr PinnedSetting kPinnedSettings[] = {
    // Nobody else's role either (`role` as a database default).
    {"role", "none"},
    // It connects as a privileged role: never resolve a name in a schema
    // another user can create objects in.
    {"search_path", "pg_catalog, pg_temp"},
    // Rows travel as text (capture reads the WAL's rows back through their
    // types' input functions; history matches rows by their text): a NULL
    // array element must read back as NULL, not the string "NULL", and an
    // xml value that is content, not only a document.
    {"array_nulls", "on"},
    {"xmloption", "content"},
    // Its transactions write, and read what committed before each
    // statement (a worker reads the latest state after its own writes).
    {"default_transaction_read_only", "off"},
    {"default_transaction_isolation", "read committed"},
    {"default_transaction_deferrable", "off"},
    // Its own bounds, never a database's: a long tick or catch-up is not an
    // error, and an idle connection is how a replica waits.
    {"statement_timeout", "0", true},
    {"lock_timeout", "0", true},
    {"idle_in_transaction_session_timeout", "0", true},
    {"idle_session_timeout", "0", true},
};

}  // namespace decoupled
