# identity (included by Makefile.am).
MODULE_SOURCES += \
	modules/identity/identity.c
EXTRA_DIST += modules/identity/local.mk
