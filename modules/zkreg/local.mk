# zkreg: ServerSet registration in ZooKeeper (included by Makefile.am).
ZKREG_SOURCES = \
	modules/zkreg/zk-error.c modules/zkreg/zk-error.h \
	modules/zkreg/zk-session.c modules/zkreg/zk-session.h \
	modules/zkreg/zk-watches.c modules/zkreg/zk-watches.h \
	modules/zkreg/serverset.c modules/zkreg/serverset.h \
	modules/zkreg/health.c modules/zkreg/health.h \
	modules/zkreg/reg-plan.c modules/zkreg/reg-plan.h \
	modules/zkreg/write-pacer.c modules/zkreg/write-pacer.h \
	modules/zkreg/zk-ops.c modules/zkreg/zk-ops.h \
	modules/zkreg/member-watch.c modules/zkreg/member-watch.h \
	modules/zkreg/reg.c modules/zkreg/registration.h \
	modules/zkreg/registry.c modules/zkreg/registry.h \
	modules/zkreg/drain-state.c modules/zkreg/drain-state.h
noinst_LIBRARIES += libpinion-zkreg.a
libpinion_zkreg_a_SOURCES = modules/zkreg/zkreg.c modules/zkreg/zkreg.h modules/zkreg/zkreg-api.c $(ZKREG_SOURCES)
libpinion_zkreg_a_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
MODULE_LIBS += libpinion-zkreg.a

# The FACT_ZOOKEEPER watches on the real session code, driven against a real ZooKeeper by
# tests/integration/test_zkreg_fact.py.
check_PROGRAMS += tests/zkreg/zk-watch-probe
tests_zkreg_zk_watch_probe_SOURCES = tests/zkreg/zk-watch-probe.c
tests_zkreg_zk_watch_probe_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/zkreg
tests_zkreg_zk_watch_probe_LDADD = libpinion-zkreg.a libpinion-lib.a $(UNIT_LIBS)

# The registrations with the core's pod store and pod gates (the gate API that configsync and
# identity use), driven against a real ZooKeeper by tests/integration/test_zkreg_gates.py.
check_PROGRAMS += tests/zkreg/zk-registry-probe
tests_zkreg_zk_registry_probe_SOURCES = tests/zkreg/zk-registry-probe.c
tests_zkreg_zk_registry_probe_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/zkreg
tests_zkreg_zk_registry_probe_LDADD = libpinion-zkreg.a $(CORE_LIBS) libpinion-proto.a $(UNIT_LIBS)

INTEGRATION_TESTS += tests/integration/test_zkreg_gates.py
INTEGRATION_TESTS += tests/integration/test_zkreg_fact.py tests/integration/test_zkreg.py \
	tests/integration/test_zkreg_ensemble.py tests/integration/test_zkreg_bench.py \
	tests/integration/test_zkreg_prefixes.py tests/integration/test_zkreg_ownership.py \
	tests/integration/test_zkreg_session.py tests/integration/test_zkreg_writes.py \
	tests/integration/test_zkreg_multi.py tests/integration/test_zkreg_drain.py \
	tests/integration/test_zkreg_batch.py tests/integration/test_zk_fleet_sim.py
EXTRA_DIST += modules/zkreg/local.mk tests/integration/zkreg_testlib.py

# Unit tests of the pure parts: ServerSet build/parse, path check, health annotations.
UNIT_TESTS += tests/unit/test-zkreg-serverset
tests_unit_test_zkreg_serverset_SOURCES = tests/unit/test-zkreg-serverset.c
tests_unit_test_zkreg_serverset_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/zkreg
tests_unit_test_zkreg_serverset_LDADD = libpinion-zkreg.a libpinion-pods.a libpinion-lib.a $(UNIT_LIBS)

# Unit tests of the registration plan: the next operation and the state for what a registration
# wants and knows, the check after a lost create, flap damping, the parents zkreg creates.
UNIT_TESTS += tests/unit/test-zkreg-registration-plan
tests_unit_test_zkreg_registration_plan_SOURCES = tests/unit/test-zkreg-registration-plan.c
tests_unit_test_zkreg_registration_plan_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/zkreg
tests_unit_test_zkreg_registration_plan_LDADD = libpinion-zkreg.a libpinion-lib.a $(UNIT_LIBS)

# Unit tests of the drain file: its format, what it refuses and why, on a real directory.
UNIT_TESTS += tests/unit/test-zkreg-drain-state
tests_unit_test_zkreg_drain_state_SOURCES = tests/unit/test-zkreg-drain-state.c
tests_unit_test_zkreg_drain_state_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/zkreg
tests_unit_test_zkreg_drain_state_LDADD = libpinion-zkreg.a libpinion-lib.a $(UNIT_LIBS)

# Unit tests of the write pacing: tokens per ZooKeeper request, operations per request.
UNIT_TESTS += tests/unit/test-zkreg-write-pacer
tests_unit_test_zkreg_write_pacer_SOURCES = tests/unit/test-zkreg-write-pacer.c
tests_unit_test_zkreg_write_pacer_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/zkreg
tests_unit_test_zkreg_write_pacer_LDADD = libpinion-zkreg.a libpinion-lib.a $(UNIT_LIBS)

# Fuzz target: the registration plan's invariants over any facts; its corpus replays as a unit test.
FUZZ_TARGETS += zkreg-registration-plan
FUZZ_REPLAY_TESTS += tests/fuzz/replay-zkreg-registration-plan
FUZZ_ZKREG_REGISTRATION_PLAN_SOURCES = tests/fuzz/fuzz-zkreg-registration-plan.c
FUZZ_ZKREG_REGISTRATION_PLAN_LIBS = libpinion-zkreg.a libpinion-lib.a
tests_fuzz_replay_zkreg_registration_plan_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h \
	$(FUZZ_ZKREG_REGISTRATION_PLAN_SOURCES)
tests_fuzz_replay_zkreg_registration_plan_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) -I$(top_srcdir)/modules/zkreg \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/zkreg-registration-plan\"
tests_fuzz_replay_zkreg_registration_plan_CFLAGS = $(AM_CFLAGS)
tests_fuzz_replay_zkreg_registration_plan_LDADD = $(FUZZ_ZKREG_REGISTRATION_PLAN_LIBS)
tests/fuzz/fuzz-zkreg-registration-plan: $(FUZZ_ZKREG_REGISTRATION_PLAN_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_ZKREG_REGISTRATION_PLAN_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_ZKREG_REGISTRATION_PLAN,-I$(top_srcdir)/modules/zkreg)

# Fuzz target: the ServerSet member data zkreg reads back from ZooKeeper (and the path check).
FUZZ_TARGETS += zkreg-serverset
FUZZ_REPLAY_TESTS += tests/fuzz/replay-zkreg-serverset
FUZZ_ZKREG_SERVERSET_SOURCES = tests/fuzz/fuzz-zkreg-serverset.c
FUZZ_ZKREG_SERVERSET_LIBS = libpinion-zkreg.a libpinion-pods.a libpinion-lib.a
tests_fuzz_replay_zkreg_serverset_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_ZKREG_SERVERSET_SOURCES)
tests_fuzz_replay_zkreg_serverset_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) -I$(top_srcdir)/modules/zkreg \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/zkreg-serverset\"
tests_fuzz_replay_zkreg_serverset_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS)
tests_fuzz_replay_zkreg_serverset_LDADD = $(FUZZ_ZKREG_SERVERSET_LIBS) $(CJSON_LIBS)
tests/fuzz/fuzz-zkreg-serverset: $(FUZZ_ZKREG_SERVERSET_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_ZKREG_SERVERSET_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_ZKREG_SERVERSET,-I$(top_srcdir)/modules/zkreg $(CJSON_LIBS))

# `make bench-zkreg`: 5,000 endpoints registered by piniond vs kazoo's async client against one
# real ZooKeeper, and the ready-to-visible latency (tests/bench/zkreg-bench.py). The table goes to
# stdout and zkreg-bench.md. BENCH_ZKREG_FLAGS='--endpoints 1000 --samples 50'.
bench-zkreg: piniond$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' PINION_SRCDIR='$(abs_top_srcdir)' $(PYTHON3) \
		$(srcdir)/tests/bench/zkreg-bench.py --md zkreg-bench.md $(BENCH_ZKREG_FLAGS)
.PHONY: bench-zkreg
CLEANFILES += zkreg-bench.md
EXTRA_DIST += tests/bench/zkreg-bench.py

# `make bench-zkreg-batch`: zkreg's bulk writes at the default pacing, end to end (250 members
# after a session expiry, 5,000 pods at start) against kazoo's async client, and the server's
# transaction rate (tests/bench/zkreg-batch-bench.py). BENCH_ZKREG_BATCH_FLAGS='--runs 3'.
bench-zkreg-batch: piniond$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' PINION_SRCDIR='$(abs_top_srcdir)' $(PYTHON3) \
		$(srcdir)/tests/bench/zkreg-batch-bench.py --md zkreg-batch-bench.md $(BENCH_ZKREG_BATCH_FLAGS)
.PHONY: bench-zkreg-batch
CLEANFILES += zkreg-batch-bench.md
EXTRA_DIST += tests/bench/zkreg-batch-bench.py
