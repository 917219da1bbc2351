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
	extension/core/generators.o \
	extension/core/keyed_changes.o \
	extension/core/launch_spec.o \
	extension/core/record_text.o \
	extension/core/relay_segment.o \
	extension/core/schema_version.o \
	extension/core/strategy.o \
	extension/core/weighted_sum.o \
	extension/core/write_path.o

OBJS = \
	$(CORE_OBJS) \
	extension/module.o \
	extension/gucs.o \
	extension/step_deadline.o \
	extension/shmem.o \
	extension/pg_guard.o \
	extension/catalog_functions.o \
	extension/controller_functions.o \
	extension/oracle.o \
	extension/as_of.o \
	extension/storage_stats.o \
	extension/caller.o \
	extension/owner_errors.o \
	extension/permission.o \
	extension/read_rewrite.o \
	extension/ddl_guard.o \
	extension/familiar_ddl.o \
	extension/wait_functions.o \
	extension/append_core.o \
	extension/domain_types.o \
	extension/write_locks.o \
	extension/index_tick.o \
	extension/table_contents.o \
	extension/history_writes.o \
	extension/replace_rows.o \
	extension/written_plan.o \
	extension/delta_plan.o \
	extension/preaggregate.o \
	extension/weighted_sum_aggregate.o \
	extension/partition_plan.o \
	extension/outer_join_terms.o \
	extension/sessions.o \
	extension/subscribe.o \
	extension/capture_functions.o \
	extension/capture_plugin.o \
	extension/relay_client.o \
	extension/wait_points.o \
	extension/kept_statements.o \
	extension/plan_growth.o \
	extension/step_texts.o \
	extension/scratch.o \
	extension/change_times.o \
	bgworker/adapterd.o \
	bgworker/capture_worker.o \
	bgworker/capture_lookup.o \
	bgworker/capture_skip.o \
	bgworker/pending_writes.o \
	bgworker/controller.o \
	bgworker/relay_worker.o \
	bgworker/replica_engine.o \
	bgworker/replica_worker.o

# The install script of the current version (the control file's
# default_version) is assembled from control/parts/ in name order.  Released
# versions' install scripts are frozen, committed copies, and each release
# adds the update script from the previous one (docs/upgrades.md).
EXTVERSION := $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" control/pg_decoupled.control)
DATA = control/pg_decoupled.control control/pg_decoupled--1.0.sql \
	control/pg_decoupled--1.0--1.1.sql
DATA_built = control/pg_decoupled--$(EXTVERSION).sql
EXTRA_CLEAN = control/pg_decoupled--$(EXTVERSION).sql
ifeq ($(EXTVERSION),)
$(error no default_version in control/pg_decoupled.control)
endif
ifneq ($(filter $(DATA_built),$(DATA)),)
$(error $(DATA_built) is a released, frozen script: the build must not regenerate it)
endif

# Test suites; test/check.sh runs them against throwaway servers.
REGRESS = catalog ddl familiar_ddl dump_restore privileges collections permission sources materialized_views sinks subscribe \
	ddl_integrity limits replica_errors incremental mv_corpus security security_attacks view_meaning read_plan write_path \
	wal_capture deployments
ISOLATION = ddl_race append_race hold_vs_publication compaction_vs_reader maintain_race \
	hold_quota append_vs_compaction tick_vs_writers capture_vs_drop tick_vs_drop hold_vs_compaction_point promote_vs_append \
	compaction_vs_arrangement drop_extension_vs_readers drop_extension_vs_cached_reads capture_vs_extension_recreate \
	tick_cancel tick_compacts_pending capture_open_transaction arrangement_drop_retry \
	admission_vs_maintenance time_index_lock drop_vs_maintenance capture_set_aside tick_mixed_capture

PG_CONFIG ?= pg_config
# PostgreSQL headers are system headers here: their own unused parameters
# must not fail our -Werror build.  Frame pointers, as PostgreSQL's own C
# is built: a profile (perf record -g) of a worker then sees through the
# extension's frames (bench/maintenance_cpu.sh PERF_OUT=...).
PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Werror -Wno-register -fno-omit-frame-pointer -isystem $(shell $(PG_CONFIG) --includedir-server) -I$(srcdir)/extension
SHLIB_LINK = -lpqxx -lpq -lstdc++ -lrt

# No LLVM bitcode: JIT-inlining this library's C++ buys nothing and would
# need clang on every build machine.
override with_llvm = no
# Rebuild objects when a header they include changes (dependencies in .deps/).
override autodepend = yes

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The standalone replica host: the same engine outside the server.
REPLICAD = tools/pg_decoupled_replicad
REPLICAD_SRCS = tools/pg_decoupled_replicad.cpp bgworker/replica_engine.cpp \
	extension/core/generators.cpp extension/core/relay_segment.cpp
EXTRA_CLEAN += $(REPLICAD)
# The external relay daemon.
RELAYD = tools/pg_decoupled_relayd
RELAYD_SRCS = tools/pg_decoupled_relayd.cpp extension/core/relay_segment.cpp
EXTRA_CLEAN += $(RELAYD)

all: $(REPLICAD) $(RELAYD)
$(REPLICAD): $(REPLICAD_SRCS) bgworker/replica_engine.hpp extension/core/generators.hpp \
		extension/core/relay_segment.hpp extension/core/worker_settings.hpp
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -o $@ $(REPLICAD_SRCS) -lpqxx -lpq -lrt
$(RELAYD): $(RELAYD_SRCS) extension/core/relay_segment.hpp
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -o $@ $(RELAYD_SRCS) -lrt

install: install-tools
install-tools: $(REPLICAD) $(RELAYD)
	$(INSTALL_PROGRAM) $(REPLICAD) '$(DESTDIR)$(bindir)/pg_decoupled_replicad'
	$(INSTALL_PROGRAM) $(RELAYD) '$(DESTDIR)$(bindir)/pg_decoupled_relayd'
.PHONY: install-tools

control/pg_decoupled--$(EXTVERSION).sql: $(sort $(wildcard $(srcdir)/control/parts/*.sql))
	cat $^ > $@

# Let the test driver read the suite lists from here.
print-%:
	@echo '$($*)'

endif
