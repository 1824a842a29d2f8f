# podnet (included by Makefile.am).
MODULE_SOURCES += \
	modules/podnet/podnet.c
EXTRA_DIST += modules/podnet/local.mk
