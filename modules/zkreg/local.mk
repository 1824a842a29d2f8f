# zkreg: ServerSet registration in ZooKeeper (included by Makefile.am).
ZKREG_SOURCES = \
	modules/zkreg/zk-session.c modules/zkreg/zk-session.h \
	modules/zkreg/zk-watch.c modules/zkreg/zk-watch.h \
	modules/zkreg/serverset.c modules/zkreg/serverset.h \
	modules/zkreg/health.c modules/zkreg/health.h \
	modules/zkreg/registry.c modules/zkreg/registry.h
MODULE_SOURCES += modules/zkreg/zkreg.c $(ZKREG_SOURCES)

# The FACT_ZOOKEEPER watches on the real session code, driven against a real ZooKeeper by
# tests/integration/test_zkreg_fact.py.
check_PROGRAMS += tests/zkreg/zk-watch-probe
tests_zkreg_zk_watch_probe_SOURCES = tests/zkreg/zk-watch-probe.c \
	modules/zkreg/zk-session.c modules/zkreg/zk-watch.c agent/log.c agent/json.c
tests_zkreg_zk_watch_probe_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/zkreg
tests_zkreg_zk_watch_probe_LDADD = $(UNIT_LIBS)

INTEGRATION_TESTS += tests/integration/test_zkreg_fact.py tests/integration/test_zkreg.py \
	tests/integration/test_zkreg_ensemble.py
EXTRA_DIST += modules/zkreg/local.mk tests/integration/zkreg_testlib.py
