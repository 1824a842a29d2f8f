# apiserver: watches this node's pods (included by Makefile.am).
MODULE_SOURCES += \
	modules/apiserver/apiserver.c \
	modules/apiserver/reflector.c modules/apiserver/reflector.h \
	modules/apiserver/watch-stream.c modules/apiserver/watch-stream.h
EXTRA_DIST += modules/apiserver/local.mk
