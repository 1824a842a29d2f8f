# csi: a CSI node plugin publishing the sockets directory (included by Makefile.am).
MODULE_SOURCES += \
	modules/csi/csi.c modules/csi/csi.h modules/csi/csi-api.c \
	modules/csi/csi-mount.c modules/csi/csi-mount.h
EXTRA_DIST += modules/csi/local.mk docs/csi.md tests/integration/csi_testlib.py
INTEGRATION_TESTS += tests/integration/test_csi.py

# Target paths the kubelet could never mean, refused before anything is looked at on disk.
UNIT_TESTS += tests/unit/test-csi-mount
tests_unit_test_csi_mount_SOURCES = tests/unit/test-csi-mount.c modules/csi/csi-mount.c agent/fsutil.c agent/strv.c
tests_unit_test_csi_mount_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/csi
tests_unit_test_csi_mount_LDADD = $(UNIT_LIBS)

# A libFuzzer target for target_path (what a CSI caller sends) and the rule's invariants; its
# corpus replays as a unit test.
FUZZ_TARGETS += csi-target
FUZZ_REPLAY_TESTS += tests/fuzz/replay-csi-target
FUZZ_CSI_TARGET_SOURCES = tests/fuzz/fuzz-csi-target.c modules/csi/csi-mount.c agent/fsutil.c agent/strv.c
tests_fuzz_replay_csi_target_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_CSI_TARGET_SOURCES)
tests_fuzz_replay_csi_target_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) -I$(top_srcdir)/modules/csi \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/csi-target\"
tests_fuzz_replay_csi_target_CFLAGS = $(AM_CFLAGS)
tests/fuzz/fuzz-csi-target: $(FUZZ_CSI_TARGET_SOURCES) tests/fuzz/fuzz.h build-config.h
	$(AM_V_at)$(MKDIR_P) tests/fuzz
	$(AM_V_CCLD)$(FUZZ_COMPILE) -I$(top_srcdir)/modules/csi -o $@ \
		`for f in $(filter %.c,$(FUZZ_CSI_TARGET_SOURCES)); do echo $(srcdir)/$$f; done`
