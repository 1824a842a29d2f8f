# configsync (included by Makefile.am).
MODULE_SOURCES += \
	modules/configsync/configsync.c
EXTRA_DIST += modules/configsync/local.mk
