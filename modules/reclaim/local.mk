# reclaim: page cache reclaim for memory cgroups (included by Makefile.am).
RECLAIM_SOURCES = \
	modules/reclaim/reclaim.c modules/reclaim/reclaim.h modules/reclaim/reclaim-api.c \
	modules/reclaim/target.c modules/reclaim/target.h modules/reclaim/target-internal.h modules/reclaim/target-settings.c \
	modules/reclaim/target-record.c modules/reclaim/target-events.c modules/reclaim/target-throttle.c \
	modules/reclaim/target-step.c \
	modules/reclaim/target-episode.c \
	modules/reclaim/plan.c modules/reclaim/plan.h \
	modules/reclaim/memcg.c modules/reclaim/memcg.h modules/reclaim/unit-cap.c modules/reclaim/unit-cap.h \
	modules/reclaim/unit-name.c
noinst_LIBRARIES += libpinion-reclaim.a
libpinion_reclaim_a_SOURCES = $(RECLAIM_SOURCES)
libpinion_reclaim_a_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
MODULE_LIBS += libpinion-reclaim.a
EXTRA_DIST += modules/reclaim/local.mk
INTEGRATION_TESTS += tests/integration/test_reclaim.py tests/integration/test_reclaim_oom.py
EXTRA_DIST += tests/integration/reclaim_testlib.py

UNIT_TESTS += tests/unit/test-reclaim-plan
tests_unit_test_reclaim_plan_SOURCES = tests/unit/test-reclaim-plan.c
tests_unit_test_reclaim_plan_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/reclaim
tests_unit_test_reclaim_plan_LDADD = libpinion-reclaim.a libpinion-lib.a $(UNIT_LIBS)

UNIT_TESTS += tests/unit/test-reclaim-unit-name
tests_unit_test_reclaim_unit_name_SOURCES = tests/unit/test-reclaim-unit-name.c
tests_unit_test_reclaim_unit_name_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/reclaim
tests_unit_test_reclaim_unit_name_LDADD = libpinion-reclaim.a libpinion-lib.a $(UNIT_LIBS)

# `make bench-reclaim`: the peak under dd, reaction time, dd's throughput and the anonymous burst
# in a real memory cgroup of this host, with and without the agent (tests/bench/reclaim-bench.py;
# needs root; `make bench` also runs it on cgroup v2 in the VM guest).
# The table goes to stdout and reclaim-bench.md. BENCH_RECLAIM_FLAGS='--reps 5 --limit 128M'.
bench-reclaim: piniond$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' PINION_SRCDIR='$(abs_top_srcdir)' $(PYTHON3) \
		$(srcdir)/tests/bench/reclaim-bench.py --md reclaim-bench.md $(BENCH_RECLAIM_FLAGS)
.PHONY: bench-reclaim
CLEANFILES += reclaim-bench.md
EXTRA_DIST += tests/bench/reclaim-bench.py

# A libFuzzer target for the levels pods hand us (annotations) and the plan's invariants; its
# corpus replays as a unit test.
FUZZ_TARGETS += reclaim-plan
FUZZ_REPLAY_TESTS += tests/fuzz/replay-reclaim-plan
FUZZ_RECLAIM_PLAN_SOURCES = tests/fuzz/fuzz-reclaim-plan.c
FUZZ_RECLAIM_PLAN_LIBS = libpinion-reclaim.a libpinion-lib.a
tests_fuzz_replay_reclaim_plan_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_RECLAIM_PLAN_SOURCES)
tests_fuzz_replay_reclaim_plan_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) -I$(top_srcdir)/modules/reclaim \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/reclaim-plan\"
tests_fuzz_replay_reclaim_plan_CFLAGS = $(AM_CFLAGS)
tests_fuzz_replay_reclaim_plan_LDADD = $(FUZZ_RECLAIM_PLAN_LIBS)
tests/fuzz/fuzz-reclaim-plan: $(FUZZ_RECLAIM_PLAN_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_RECLAIM_PLAN_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_RECLAIM_PLAN,-I$(top_srcdir)/modules/reclaim)
