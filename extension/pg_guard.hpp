// The boundary between C++ and PostgreSQL error handling.
//
// PostgreSQL reports errors with longjmp, C++ with exceptions; neither may
// cross frames of the other kind.  Two helpers keep them apart:
//
//   cpp_entry(fn)  wraps every SQL-callable function written in C++: a C++
//                  exception is caught, reduced to palloc'd data, and raised
//                  as an ereport only after every C++ frame has unwound.
//   pg_call(fn)    wraps a call into PostgreSQL made from code that owns C++
//                  objects: an ereport(ERROR) inside becomes a PgError.
//
// The body given to pg_call must itself own nothing with a destructor that
// matters, since a longjmp out of it skips them.
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/elog.h"
#include "utils/memutils.h"
}

#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace decoupled {

// A PostgreSQL error caught inside C++ code.  The ErrorData is palloc'd in
// the memory context that was current when pg_call started.
class PgError : public std::exception {
  public:
    explicit PgError(ErrorData* data) : data_(data) {}
    ErrorData* data() const { return data_; }
    const char* what() const noexcept override {
        return data_ && data_->message ? data_->message : "unknown PostgreSQL error";
    }

  private:
    ErrorData* data_;
};

// A user-facing error raised from C++: it becomes an ereport(ERROR) with this
// SQLSTATE, message, detail and hint once it reaches cpp_entry.
class UserError : public std::exception {
  public:
    UserError(int sqlstate, std::string message, std::string detail = {}, std::string hint = {})
        : sqlstate_(sqlstate), message_(std::move(message)), detail_(std::move(detail)),
          hint_(std::move(hint)) {}
    int sqlstate() const { return sqlstate_; }
    const char* what() const noexcept override { return message_.c_str(); }
    const std::string& detail() const { return detail_; }
    const std::string& hint() const { return hint_; }

  private:
    int sqlstate_;
    std::string message_, detail_, hint_;
};

template <typename F>
auto pg_call(F&& fn) -> decltype(fn()) {
    using Result = decltype(fn());
    MemoryContext caller_context = CurrentMemoryContext;
    ErrorData* volatile caught = nullptr;
    if constexpr (std::is_void_v<Result>) {
        PG_TRY();
        { fn(); }
        PG_CATCH();
        {
            MemoryContextSwitchTo(caller_context);
            caught = CopyErrorData();
            FlushErrorState();
        }
        PG_END_TRY();
        if (caught) throw PgError(caught);
    } else {
        std::optional<Result> result;
        PG_TRY();
        { result.emplace(fn()); }
        PG_CATCH();
        {
            MemoryContextSwitchTo(caller_context);
            caught = CopyErrorData();
            FlushErrorState();
        }
        PG_END_TRY();
        if (caught) throw PgError(caught);
        return std::move(*result);
    }
}

// Raise what cpp_entry caught.  Only called once no C++ frame is left between
// it and PostgreSQL.
[[noreturn]] void raise_caught(ErrorData* pg_error, int sqlstate, const char* message,
                               const char* detail, const char* hint);

template <typename F>
Datum cpp_entry(F&& fn) {
    ErrorData* pg_error = nullptr;
    int sqlstate = ERRCODE_INTERNAL_ERROR;
    char* message = nullptr;
    char* detail = nullptr;
    char* hint = nullptr;
    try {
        return fn();
    } catch (const PgError& e) {
        pg_error = e.data();
    } catch (const UserError& e) {
        sqlstate = e.sqlstate();
        message = pstrdup(e.what());
        if (!e.detail().empty()) detail = pstrdup(e.detail().c_str());
        if (!e.hint().empty()) hint = pstrdup(e.hint().c_str());
    } catch (const std::exception& e) {
        message = pstrdup(e.what());
    } catch (...) {
        message = pstrdup("unknown C++ exception");
    }
    raise_caught(pg_error, sqlstate, message, detail, hint);
}

}  // namespace decoupled
