# apiserver: watches this node's pods, and the cluster's Nodes when routes need them (included
# by Makefile.am).
APISERVER_SOURCES = \
	modules/apiserver/apiserver.c \
	modules/apiserver/event-correlator.c modules/apiserver/event-correlator.h \
	modules/apiserver/event-writer.c modules/apiserver/event-writer.h \
	modules/apiserver/kube-writer.c modules/apiserver/kube-writer.h \
	modules/apiserver/node-table.c modules/apiserver/node-table.h \
	modules/apiserver/pod-ready.c modules/apiserver/pod-ready.h \
	modules/apiserver/pod-sink.c modules/apiserver/pod-sink.h \
	modules/apiserver/reflector.c modules/apiserver/reflector.h \
	modules/apiserver/watch-stream.c modules/apiserver/watch-stream.h
noinst_LIBRARIES += libpinion-apiserver.a
libpinion_apiserver_a_SOURCES = $(APISERVER_SOURCES)
libpinion_apiserver_a_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
MODULE_LIBS += libpinion-apiserver.a
EXTRA_DIST += modules/apiserver/local.mk

UNIT_TESTS += tests/unit/test-event-correlator
tests_unit_test_event_correlator_SOURCES = tests/unit/test-event-correlator.c
tests_unit_test_event_correlator_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/apiserver
tests_unit_test_event_correlator_LDADD = libpinion-apiserver.a libpinion-pods.a libpinion-lib.a $(UNIT_LIBS)

# A libFuzzer target driving the event correlator through any sequence of events, forgets and
# clock jumps against its invariants; its corpus replays as a unit test.
FUZZ_TARGETS += event-correlator
FUZZ_REPLAY_TESTS += tests/fuzz/replay-event-correlator
FUZZ_EVENT_CORRELATOR_SOURCES = tests/fuzz/fuzz-event-correlator.c
FUZZ_EVENT_CORRELATOR_LIBS = libpinion-apiserver.a libpinion-lib.a
FUZZ_EVENT_CORRELATOR_EXT = -lm
tests_fuzz_replay_event_correlator_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_EVENT_CORRELATOR_SOURCES)
tests_fuzz_replay_event_correlator_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/event-correlator\"
tests_fuzz_replay_event_correlator_CFLAGS = $(AM_CFLAGS)
tests_fuzz_replay_event_correlator_LDADD = $(FUZZ_EVENT_CORRELATOR_LIBS) $(FUZZ_EVENT_CORRELATOR_EXT)
tests/fuzz/fuzz-event-correlator: $(FUZZ_EVENT_CORRELATOR_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_EVENT_CORRELATOR_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_EVENT_CORRELATOR)
