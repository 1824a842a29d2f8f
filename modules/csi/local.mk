# csi: a CSI node plugin publishing the sockets directory (included by Makefile.am).
CSI_SOURCES = \
	modules/csi/csi.c modules/csi/csi.h modules/csi/csi-api.c \
	modules/csi/csi-mount.c modules/csi/csi-mount.h
noinst_LIBRARIES += libpinion-csi.a
libpinion_csi_a_SOURCES = $(CSI_SOURCES)
libpinion_csi_a_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
MODULE_LIBS += libpinion-csi.a
EXTRA_DIST += modules/csi/local.mk docs/csi.md tests/integration/csi_testlib.py
INTEGRATION_TESTS += tests/integration/test_csi.py

# Target paths the kubelet could never mean, refused before anything is looked at on disk.
UNIT_TESTS += tests/unit/test-csi-mount
tests_unit_test_csi_mount_SOURCES = tests/unit/test-csi-mount.c
tests_unit_test_csi_mount_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/csi
tests_unit_test_csi_mount_LDADD = libpinion-csi.a libpinion-lib.a $(UNIT_LIBS)

# A libFuzzer target for target_path (what a CSI caller sends) and the rule's invariants; its
# corpus replays as a unit test.
FUZZ_TARGETS += csi-target
FUZZ_REPLAY_TESTS += tests/fuzz/replay-csi-target
FUZZ_CSI_TARGET_SOURCES = tests/fuzz/fuzz-csi-target.c
FUZZ_CSI_TARGET_LIBS = libpinion-csi.a libpinion-lib.a
tests_fuzz_replay_csi_target_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_CSI_TARGET_SOURCES)
tests_fuzz_replay_csi_target_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) -I$(top_srcdir)/modules/csi \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/csi-target\"
tests_fuzz_replay_csi_target_CFLAGS = $(AM_CFLAGS)
tests_fuzz_replay_csi_target_LDADD = $(FUZZ_CSI_TARGET_LIBS) $(ACL_LIBS)
tests/fuzz/fuzz-csi-target: $(FUZZ_CSI_TARGET_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_CSI_TARGET_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_CSI_TARGET,-I$(top_srcdir)/modules/csi)
