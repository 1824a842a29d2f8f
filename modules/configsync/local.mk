# configsync: config bundles downloaded, verified and swapped in atomically (included by Makefile.am).
MODULE_SOURCES += \
	modules/configsync/configsync.c modules/configsync/configsync.h \
	modules/configsync/configsync-api.c \
	modules/configsync/bundle.c \
	modules/configsync/fetch.c modules/configsync/fetch.h \
	modules/configsync/manifest.c modules/configsync/manifest.h \
	modules/configsync/runner.c modules/configsync/runner.h
EXTRA_DIST += modules/configsync/local.mk
INTEGRATION_TESTS += tests/integration/test_configsync.py
EXTRA_DIST += tests/integration/configsync_testlib.py
