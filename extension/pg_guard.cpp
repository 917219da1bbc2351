#include "pg_guard.hpp"

namespace decoupled {

void raise_caught(ErrorData* pg_error, int sqlstate, const char* message, const char* detail,
                  const char* hint) {
    if (pg_error) ReThrowError(pg_error);
    ereport(ERROR, (errcode(sqlstate), errmsg_internal("%s", message),
                    detail ? errdetail_internal("%s", detail) : 0,
                    hint ? errhint("%s", hint) : 0));
    pg_unreachable();
}

}  // namespace decoupled
