# reclaim (included by Makefile.am).
MODULE_SOURCES += \
	modules/reclaim/reclaim.c
EXTRA_DIST += modules/reclaim/local.mk
