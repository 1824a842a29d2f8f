# configsync: config bundles downloaded, verified and swapped in atomically (included by Makefile.am).
CONFIGSYNC_SOURCES = \
	modules/configsync/configsync.c modules/configsync/configsync.h \
	modules/configsync/configsync-api.c \
	modules/configsync/bundle.c modules/configsync/bundle-state.c \
	modules/configsync/fetch.c modules/configsync/fetch.h \
	modules/configsync/stage.c modules/configsync/stage.h \
	modules/configsync/manifest.c modules/configsync/manifest.h \
	modules/configsync/signature.c modules/configsync/signature.h \
	modules/configsync/sha256.c modules/configsync/sha256.h \
	modules/configsync/publish-modes.c modules/configsync/publish-modes.h \
	modules/configsync/runner.c modules/configsync/runner.h \
	modules/configsync/zk-trigger.c modules/configsync/zk-trigger.h
noinst_LIBRARIES += libpinion-configsync.a
libpinion_configsync_a_SOURCES = $(CONFIGSYNC_SOURCES)
libpinion_configsync_a_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
MODULE_LIBS += libpinion-configsync.a
EXTRA_DIST += modules/configsync/local.mk
INTEGRATION_TESTS += tests/integration/test_configsync.py tests/integration/test_configsync_lifecycle.py \
	tests/integration/test_configsync_modes.py tests/integration/test_configsync_limits.py \
	tests/integration/test_configsync_diskfull.py
EXTRA_DIST += tests/integration/configsync_testlib.py

# Unit tests: each links only what it needs.
CONFIGSYNC_UNIT_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/configsync
UNIT_TESTS += \
	tests/unit/test-configsync-manifest \
	tests/unit/test-configsync-modes \
	tests/unit/test-configsync-runner \
	tests/unit/test-configsync-stage \
	tests/unit/test-configsync-zk
tests_unit_test_configsync_manifest_SOURCES = tests/unit/test-configsync-manifest.c
tests_unit_test_configsync_manifest_CFLAGS = $(CONFIGSYNC_UNIT_CFLAGS)
tests_unit_test_configsync_manifest_LDADD = libpinion-configsync.a $(UNIT_LIBS)
tests_unit_test_configsync_modes_SOURCES = tests/unit/test-configsync-modes.c
tests_unit_test_configsync_modes_CFLAGS = $(CONFIGSYNC_UNIT_CFLAGS)
tests_unit_test_configsync_modes_LDADD = libpinion-configsync.a libpinion-lib.a $(UNIT_LIBS)
tests_unit_test_configsync_stage_SOURCES = tests/unit/test-configsync-stage.c
tests_unit_test_configsync_stage_CFLAGS = $(CONFIGSYNC_UNIT_CFLAGS)
tests_unit_test_configsync_stage_LDADD = libpinion-configsync.a libpinion-lib.a $(UNIT_LIBS) -lm
tests_unit_test_configsync_runner_SOURCES = tests/unit/test-configsync-runner.c
tests_unit_test_configsync_runner_CFLAGS = $(CONFIGSYNC_UNIT_CFLAGS)
tests_unit_test_configsync_runner_LDADD = libpinion-configsync.a libpinion-lib.a $(UNIT_LIBS)
# The module against a real manager (config, loop, gates, API); runner_new is wrapped so a
# test can make a bundle's start fail.
UNIT_TESTS += tests/unit/test-configsync-module
tests_unit_test_configsync_module_SOURCES = tests/unit/test-configsync-module.c tests/unit/manager-fixture.h
tests_unit_test_configsync_module_CFLAGS = $(CONFIGSYNC_UNIT_CFLAGS)
tests_unit_test_configsync_module_LDFLAGS = -Wl,--wrap=runner_new
tests_unit_test_configsync_module_LDADD = libpinion-configsync.a $(CORE_LIBS) libpinion-proto.a $(UNIT_LIBS)
tests_unit_test_configsync_zk_SOURCES = tests/unit/test-configsync-zk.c
tests_unit_test_configsync_zk_CFLAGS = $(CONFIGSYNC_UNIT_CFLAGS)
tests_unit_test_configsync_zk_LDADD = libpinion-configsync.a $(UNIT_LIBS)

# Fuzzing: the manifest parser and the signature decoder (outside input); the seed corpus
# replays as a unit test (tests/fuzz/replay.c), `make fuzz FUZZ_TARGETS=configsync-manifest` fuzzes.
FUZZ_TARGETS += configsync-manifest
FUZZ_REPLAY_TESTS += tests/fuzz/replay-configsync-manifest
UNIT_TESTS += tests/fuzz/replay-configsync-manifest
FUZZ_CONFIGSYNC_MANIFEST_SOURCES = tests/fuzz/fuzz-configsync-manifest.c
FUZZ_CONFIGSYNC_MANIFEST_LIBS = libpinion-configsync.a
tests_fuzz_replay_configsync_manifest_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_CONFIGSYNC_MANIFEST_SOURCES)
tests_fuzz_replay_configsync_manifest_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) -I$(top_srcdir)/modules/configsync \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/configsync-manifest\"
tests_fuzz_replay_configsync_manifest_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS) $(CURL_CFLAGS) $(OPENSSL_CFLAGS)
tests_fuzz_replay_configsync_manifest_LDADD = $(FUZZ_CONFIGSYNC_MANIFEST_LIBS) $(CJSON_LIBS) $(CURL_LIBS) $(OPENSSL_LIBS) -lm
tests/fuzz/fuzz-configsync-manifest: $(FUZZ_CONFIGSYNC_MANIFEST_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_CONFIGSYNC_MANIFEST_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_CONFIGSYNC_MANIFEST,-I$(top_srcdir)/modules/configsync $(CJSON_LIBS) $(CURL_LIBS) $(OPENSSL_LIBS) -lm)

# `make bench-configsync`: download+verify of a 1,000-file 100 MB bundle from nginx against
# curl --parallel + sha256sum in the same run, and the agent's CPU per 304 cycle
# (tests/bench/configsync-bench.py). BENCH_CONFIGSYNC_FLAGS='--files 100 --size 10M --rounds 5'.
bench-configsync: piniond$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' $(PYTHON3) $(srcdir)/tests/bench/configsync-bench.py $(BENCH_CONFIGSYNC_FLAGS)
.PHONY: bench-configsync
EXTRA_DIST += tests/bench/configsync-bench.py
