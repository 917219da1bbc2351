# pg_decoupled — PGXS build of a C++17 PostgreSQL 15 extension.
#
#   make demo     install what is missing, build, run a live demo
#   make check    install what is missing, build, run every test layer
#   make / make install / make installcheck   the usual PGXS targets
#
# `check` and `demo` must work on a machine without PostgreSQL's build
# files yet, so they do not read PGXS; they install it and call back in.

ENTRY_GOALS := check demo deps unit

ifneq ($(filter $(ENTRY_GOALS),$(MAKECMDGOALS)),)

.PHONY: $(ENTRY_GOALS)
check:
	@bash test/check.sh
demo:
	@bash tools/demo.sh
deps:
	@bash tools/install-deps.sh
unit:
	@bash test/check.sh unit

else

MODULE_big = pg_decoupled
MODULEDIR = extension

CORE_OBJS = \
	extension/core/admission.o \
	extension/core/backoff.o \
	extension/core/frontier.o \
	extension/core/launch_spec.o \
	extension/core/schema_version.o

OBJS = \
	$(CORE_OBJS) \
	extension/module.o \
	extension/gucs.o \
	extension/shmem.o \
	extension/pg_guard.o \
	extension/catalog_functions.o \
	extension/controller_functions.o \
	extension/oracle.o \
	extension/as_of.o \
	extension/permission.o \
	extension/read_rewrite.o \
	bgworker/controller.o

# The install script is assembled from control/parts/ in name order.
DATA = control/pg_decoupled.control
DATA_built = control/pg_decoupled--1.0.sql
EXTRA_CLEAN = control/pg_decoupled--1.0.sql

# Test suites; test/check.sh runs them against throwaway servers.
REGRESS = catalog ddl privileges collections permission
ISOLATION = ddl_race append_race hold_vs_publication compaction_vs_reader

PG_CONFIG ?= pg_config
# PostgreSQL headers are system headers here: their own unused parameters
# must not fail our -Werror build.
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Werror -Wno-register -isystem $(shell $(PG_CONFIG) --includedir-server) -I$(srcdir)/extension
SHLIB_LINK = -lstdc++

# No LLVM bitcode: JIT-inlining this library's C++ buys nothing and would
# need clang on every build machine.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

control/pg_decoupled--1.0.sql: $(sort $(wildcard $(srcdir)/control/parts/*.sql))
	cat $^ > $@

# Let the test driver read the suite lists from here.
print-%:
	@echo '$($*)'

endif
