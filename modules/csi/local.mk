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
