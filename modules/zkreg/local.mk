# zkreg (included by Makefile.am).
MODULE_SOURCES += \
	modules/zkreg/zkreg.c
EXTRA_DIST += modules/zkreg/local.mk
