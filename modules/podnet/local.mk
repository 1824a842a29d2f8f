# podnet (included by Makefile.am): the pod network module, its CNI plugin pinion-cni, their
# unit tests, integration tests, fuzz targets and benchmark.
PODNET_SOURCES = \
	modules/podnet/podnet.c modules/podnet/podnet.h modules/podnet/podnet-api.c \
	modules/podnet/attachment.c modules/podnet/deletion.c modules/podnet/network-gate.c \
	modules/podnet/cni.c modules/podnet/cni.h modules/podnet/cni-json.c modules/podnet/cni-json.h \
	modules/podnet/json-text.c modules/podnet/json-text.h \
	modules/podnet/ipam.c modules/podnet/ipam.h \
	modules/podnet/ipam-state.c modules/podnet/ipam-reserve.c modules/podnet/ipam-index.c modules/podnet/ipam-addr.c modules/podnet/ipam-internal.h \
	modules/podnet/wire.c modules/podnet/wire.h modules/podnet/wire6.c modules/podnet/wire-internal.h \
	modules/podnet/reaper.c modules/podnet/reaper.h modules/podnet/syncer.c modules/podnet/syncer.h \
	modules/podnet/reconcile.c \
	modules/podnet/routes.c modules/podnet/routes.h modules/podnet/routing.c modules/podnet/routing.h \
	modules/podnet/routing-plan.c modules/podnet/routing-plan.h \
	modules/podnet/link-monitor.c modules/podnet/link-monitor.h
noinst_LIBRARIES += libpinion-podnet.a
libpinion_podnet_a_SOURCES = $(PODNET_SOURCES)
libpinion_podnet_a_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
MODULE_LIBS += libpinion-podnet.a
EXTRA_DIST += modules/podnet/local.mk

# The CNI plugin: exec'd by the container runtime per operation and copied onto nodes as it is,
# so it links nothing but libc (no cJSON: json-text.c reads the few strings it needs), and with
# musl (configure: --with-static-plugin) is one static binary: glibc's start-up alone costs
# 0.6-0.8 ms per exec on a VM, where each of its dozens of CPUID instructions is a VM exit.
PINION_CNI_SOURCES = modules/podnet/pinion-cni.c modules/podnet/cni.c modules/podnet/cni.h \
	modules/podnet/json-text.c modules/podnet/json-text.h agent/lib/socket-trust.c agent/lib/socket-trust.h
if STATIC_PLUGIN
cnibin_SCRIPTS = pinion-cni
CLEANFILES += pinion-cni
EXTRA_DIST += $(PINION_CNI_SOURCES)
# A static PIE (musl-gcc's specs know only -static): musl's self-relocating start file, no
# interpreter, no NEEDED; still randomised like every other binary of the package.
pinion-cni: $(PINION_CNI_SOURCES) agent/lib/macro.h agent/lib/string-table.h build-config.h
	$(AM_V_CCLD)$(MUSL_GCC) $(DEFS) $(AM_CPPFLAGS) $(CPPFLAGS) $(AM_CFLAGS) $(CFLAGS) -fPIE $(LDFLAGS) \
		-nostartfiles -Wl,-static,-pie,--no-dynamic-linker,-z,text -o $@ \
		$(MUSL_LIBDIR)/rcrt1.o $(MUSL_LIBDIR)/crti.o `$(MUSL_GCC) -print-file-name=crtbeginS.o` \
		`for f in $(filter %.c,$(PINION_CNI_SOURCES)); do echo $(srcdir)/$$f; done` \
		`$(MUSL_GCC) -print-file-name=crtendS.o` $(MUSL_LIBDIR)/crtn.o
else
cnibin_PROGRAMS = pinion-cni
pinion_cni_SOURCES = $(PINION_CNI_SOURCES)
endif

# The network config list a runtime reads (cniconfdir: configure --with-cni-conf-dir): pinion-cni
# chained with portmap.
dist_cniconf_DATA = conf/cni/10-pinion.conflist

# ---- unit tests ----
UNIT_TESTS += \
	tests/unit/test-podnet-cni \
	tests/unit/test-podnet-ipam \
	tests/unit/test-podnet-routing-plan \
	tests/unit/test-json-text

tests_unit_test_podnet_routing_plan_SOURCES = tests/unit/test-podnet-routing-plan.c
tests_unit_test_podnet_routing_plan_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/podnet
tests_unit_test_podnet_routing_plan_LDADD = libpinion-podnet.a libpinion-lib.a $(UNIT_LIBS)

tests_unit_test_json_text_SOURCES = tests/unit/test-json-text.c
tests_unit_test_json_text_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/podnet
tests_unit_test_json_text_LDADD = libpinion-podnet.a $(UNIT_LIBS)

tests_unit_test_podnet_cni_SOURCES = tests/unit/test-podnet-cni.c
tests_unit_test_podnet_cni_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/podnet
tests_unit_test_podnet_cni_LDADD = libpinion-podnet.a $(UNIT_LIBS)

tests_unit_test_podnet_ipam_SOURCES = tests/unit/test-podnet-ipam.c
tests_unit_test_podnet_ipam_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/podnet
tests_unit_test_podnet_ipam_LDADD = libpinion-podnet.a libpinion-lib.a $(UNIT_LIBS)
# (fsync and fdatasync are wrapped: the test makes them fail)
tests_unit_test_podnet_ipam_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=fsync -Wl,--wrap=fdatasync

# ---- integration tests (real network namespaces, real reference plugins) ----
INTEGRATION_TESTS += tests/integration/test_podnet.py tests/integration/test_podnet_foreign.py \
	tests/integration/test_podnet_static.py tests/integration/test_podnet_dualstack.py \
	tests/integration/test_podnet_state.py tests/integration/test_podnet_reconcile.py \
	tests/integration/test_podnet_compat.py tests/integration/test_install_cni.py \
	tests/integration/test_podnet_routes.py tests/integration/test_podnet_diskfull.py
EXTRA_DIST += tests/integration/podnet_testlib.py tests/integration/diskfull_testlib.py
# Routes between nodes ([network] routing): a cluster on one machine, nodes as network
# namespaces on one bridge, each with its own piniond; bird2 for routing = bgp.
INTEGRATION_TESTS += tests/integration/test_cluster_nodes.py tests/integration/test_cluster_bgp.py \
	tests/integration/test_cluster_bench.py
EXTRA_DIST += tests/integration/cluster_testlib.py units/bird/pinion-node.conf units/bird/route-reflector.conf
pinionbirddir = $(datadir)/pinion/bird
pinionbird_DATA = units/bird/pinion-node.conf units/bird/route-reflector.conf

# ---- fuzzing: the plugin's environment + stdin parser, and the agent's /v1/cni body parser ----
FUZZ_TARGETS += podnet-cni-env podnet-cni-request podnet-json-text
FUZZ_REPLAY_TESTS += \
	tests/fuzz/replay-podnet-cni-env \
	tests/fuzz/replay-podnet-cni-request \
	tests/fuzz/replay-podnet-json-text
UNIT_TESTS += \
	tests/fuzz/replay-podnet-cni-env \
	tests/fuzz/replay-podnet-cni-request \
	tests/fuzz/replay-podnet-json-text
FUZZ_PODNET_JSON_TEXT_SOURCES = tests/fuzz/fuzz-podnet-json-text.c
FUZZ_PODNET_JSON_TEXT_LIBS = libpinion-podnet.a
FUZZ_PODNET_CNI_ENV_SOURCES = tests/fuzz/fuzz-podnet-cni-env.c
FUZZ_PODNET_CNI_ENV_LIBS = libpinion-podnet.a
FUZZ_PODNET_CNI_REQUEST_SOURCES = tests/fuzz/fuzz-podnet-cni-request.c
FUZZ_PODNET_CNI_REQUEST_LIBS = libpinion-podnet.a
FUZZ_INCLUDES += -I$(top_srcdir)/modules/podnet

tests_fuzz_replay_podnet_cni_env_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_PODNET_CNI_ENV_SOURCES)
tests_fuzz_replay_podnet_cni_env_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/podnet-cni-env\"
tests_fuzz_replay_podnet_cni_env_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS)
tests_fuzz_replay_podnet_cni_env_LDADD = $(FUZZ_PODNET_CNI_ENV_LIBS) $(CJSON_LIBS)

tests_fuzz_replay_podnet_cni_request_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_PODNET_CNI_REQUEST_SOURCES)
tests_fuzz_replay_podnet_cni_request_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/podnet-cni-request\"
tests_fuzz_replay_podnet_cni_request_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS)
tests_fuzz_replay_podnet_cni_request_LDADD = $(FUZZ_PODNET_CNI_REQUEST_LIBS) $(CJSON_LIBS)

tests_fuzz_replay_podnet_json_text_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_PODNET_JSON_TEXT_SOURCES)
tests_fuzz_replay_podnet_json_text_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/podnet-json-text\"
tests_fuzz_replay_podnet_json_text_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS)
tests_fuzz_replay_podnet_json_text_LDADD = $(FUZZ_PODNET_JSON_TEXT_LIBS) $(CJSON_LIBS)

tests/fuzz/fuzz-podnet-json-text: $(FUZZ_PODNET_JSON_TEXT_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_PODNET_JSON_TEXT_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_PODNET_JSON_TEXT,$(CJSON_LIBS))
tests/fuzz/fuzz-podnet-cni-env: $(FUZZ_PODNET_CNI_ENV_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_PODNET_CNI_ENV_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_PODNET_CNI_ENV,$(CJSON_LIBS))
tests/fuzz/fuzz-podnet-cni-request: $(FUZZ_PODNET_CNI_REQUEST_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_PODNET_CNI_REQUEST_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_PODNET_CNI_REQUEST,$(CJSON_LIBS))

# ---- `make bench-podnet`: ADD+DEL cycles of pinion-cni against the reference ptp and bridge
# plugins (host-local IPAM), side by side in one run; BENCH_PODNET_FLAGS='--cycles 200'.
bench-podnet: piniond$(EXEEXT) pinion-cni$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' PINION_SRCDIR='$(abs_top_srcdir)' \
		$(PYTHON3) $(srcdir)/tests/bench/podnet-cycles.py $(BENCH_PODNET_FLAGS)
.PHONY: bench-podnet
EXTRA_DIST += tests/bench/podnet-cycles.py

# ---- `make bench-cluster`: a node joining, until a pod on it answers the others' pods, with
# [network] routing = nodes and = bgp (bird2) side by side; BENCH_CLUSTER_FLAGS='--nodes 10'.
bench-cluster: piniond$(EXEEXT) pinion-cni$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' PINION_SRCDIR='$(abs_top_srcdir)' \
		$(PYTHON3) $(srcdir)/tests/bench/cluster-converge.py $(BENCH_CLUSTER_FLAGS)
.PHONY: bench-cluster
EXTRA_DIST += tests/bench/cluster-converge.py
