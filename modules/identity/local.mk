# identity (included by Makefile.am).
IDENTITY_SOURCES = \
	modules/identity/identity.c modules/identity/identity.h modules/identity/identity-clock.c \
	modules/identity/identity-views.c modules/identity/identity-views.h modules/identity/identity-api.c \
	modules/identity/workload-api.c modules/identity/workload-api-jwt.c modules/identity/workload-api-internal.h \
	modules/identity/workload.c modules/identity/workload-files.c modules/identity/workload-events.c modules/identity/workload-service.c modules/identity/workload-internal.h modules/identity/issue-worker.c modules/identity/issue-worker.h \
	modules/identity/issue-job.c modules/identity/issue-job.h \
	modules/identity/cred.c modules/identity/cred.h \
	modules/identity/signer.h modules/identity/signer.c modules/identity/signer-kind.c modules/identity/signer-local.c modules/identity/signer-cfssl.c \
	modules/identity/cfssl-wire.c modules/identity/cfssl-wire.h \
	modules/identity/signer-kubernetes.c modules/identity/kube-csr.c modules/identity/kube-csr.h \
	modules/identity/ca.c modules/identity/ca.h \
	modules/identity/x509.c modules/identity/x509.h \
	modules/identity/jwt.c modules/identity/jwt.h modules/identity/jwt-keys.c \
	modules/identity/jwt-api.c
noinst_LIBRARIES += libpinion-identity.a
libpinion_identity_a_SOURCES = $(IDENTITY_SOURCES)
libpinion_identity_a_CFLAGS = $(AM_CFLAGS) $(DEP_CFLAGS)
MODULE_LIBS += libpinion-identity.a
EXTRA_DIST += modules/identity/local.mk
INTEGRATION_TESTS += tests/integration/test_identity.py tests/integration/test_identity_dirs.py tests/integration/test_identity_jwt.py tests/integration/test_workload_api.py \
	tests/integration/test_workload_api_jwt.py tests/integration/test_workload_api_grpcjs.py \
	tests/integration/test_workload_api_limits.py tests/integration/test_identity_diskfull.py \
	tests/integration/test_key_exposure.py tests/integration/test_services.py tests/integration/test_static_pods.py
EXTRA_DIST += tests/integration/identity_testlib.py tests/integration/workload_api_testlib.py \
	tests/integration/workload_api_client.py tests/integration/workload_api_client.js \
	tests/integration/grpcjs/package.json tests/integration/grpcjs/package-lock.json docs/workload-api.md

# Unit tests: the crypto plumbing and the CFSSL wire format (no loop, no IO but temp dirs).
UNIT_TESTS += tests/unit/test-identity-x509
tests_unit_test_identity_x509_SOURCES = tests/unit/test-identity-x509.c
tests_unit_test_identity_x509_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/identity
tests_unit_test_identity_x509_LDADD = libpinion-identity.a libpinion-lib.a $(UNIT_LIBS)

# The issue worker: a real thread signing with a real CA, results back on a real loop.
UNIT_TESTS += tests/unit/test-identity-worker
tests_unit_test_identity_worker_SOURCES = tests/unit/test-identity-worker.c
tests_unit_test_identity_worker_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/identity
tests_unit_test_identity_worker_LDADD = libpinion-identity.a libpinion-lib.a $(UNIT_LIBS)

# JWT-SVIDs: mint, JWKS, and hostile tokens refused.
UNIT_TESTS += tests/unit/test-identity-jwt
tests_unit_test_identity_jwt_SOURCES = tests/unit/test-identity-jwt.c
tests_unit_test_identity_jwt_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/identity
tests_unit_test_identity_jwt_LDADD = libpinion-identity.a libpinion-lib.a $(UNIT_LIBS)

# The model's observers, the views' way to hear of its changes (no loop, no agent running).
UNIT_TESTS += tests/unit/test-identity-observers
tests_unit_test_identity_observers_SOURCES = tests/unit/test-identity-observers.c
tests_unit_test_identity_observers_CFLAGS = $(UNIT_CFLAGS) -I$(top_srcdir)/modules/identity
tests_unit_test_identity_observers_LDADD = libpinion-identity.a $(CORE_LIBS) libpinion-proto.a $(UNIT_LIBS)

# Fuzzing what the CA sends back: CFSSL responses, PEM chains (and their fields), PEM keys.
FUZZ_TARGETS += identity
FUZZ_REPLAY_TESTS += tests/fuzz/replay-identity
UNIT_TESTS += tests/fuzz/replay-identity
FUZZ_IDENTITY_SOURCES = tests/fuzz/fuzz-identity.c
FUZZ_IDENTITY_LIBS = libpinion-identity.a libpinion-lib.a
FUZZ_IDENTITY_INCLUDES = -I$(top_srcdir)/modules/identity

tests_fuzz_replay_identity_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_IDENTITY_SOURCES)
tests_fuzz_replay_identity_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) $(FUZZ_IDENTITY_INCLUDES) \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/identity\"
tests_fuzz_replay_identity_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS) $(OPENSSL_CFLAGS)
tests_fuzz_replay_identity_LDADD = $(FUZZ_IDENTITY_LIBS) $(CJSON_LIBS) $(OPENSSL_LIBS)

tests/fuzz/fuzz-identity: $(FUZZ_IDENTITY_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_IDENTITY_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_IDENTITY,$(FUZZ_IDENTITY_INCLUDES) $(CJSON_LIBS) $(OPENSSL_LIBS))

# `make bench-identity`: time to the node certificate (local CA, cfssl serve) and workload
# certificates per second for 1,000 pods, each beside a peer run in the same process tree.
# BENCH_IDENTITY_FLAGS='--pods 2000 --runs 10'.
bench-identity: piniond$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' $(PYTHON3) $(srcdir)/tests/bench/identity-bench.py $(BENCH_IDENTITY_FLAGS)
.PHONY: bench-identity
EXTRA_DIST += tests/bench/identity-bench.py

# `make bench-workload-api`: time to the first FetchX509SVID response (python3-grpcio in a pod's
# cgroup) against GET /v1/identity, p50/p99 over 200 calls each, and the agent's memory per open
# stream (0, 100, 500, 1,000 FetchX509SVID streams against as many long-polls and watch streams
# on the HTTP API), in one run (tests/bench/workload-api-bench.py; root, cgroups, python3-grpcio,
# protoc). BENCH_WORKLOAD_API_FLAGS='--calls 500 --streams 100,1000'.
bench-workload-api: piniond$(EXEEXT)
	PINION_BUILDDIR='$(abs_top_builddir)' PINION_SRCDIR='$(abs_top_srcdir)' $(PYTHON3) \
		$(srcdir)/tests/bench/workload-api-bench.py $(BENCH_WORKLOAD_API_FLAGS)
.PHONY: bench-workload-api
EXTRA_DIST += tests/bench/workload-api-bench.py tests/bench/workload-api-load.py

# Fuzzing JWT-SVID validation (tokens from strangers) and JWT bundles (JWKS, PEM public keys).
FUZZ_TARGETS += jwt
FUZZ_REPLAY_TESTS += tests/fuzz/replay-jwt
UNIT_TESTS += tests/fuzz/replay-jwt
FUZZ_JWT_SOURCES = tests/fuzz/fuzz-jwt.c
FUZZ_JWT_LIBS = libpinion-identity.a

tests_fuzz_replay_jwt_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz.h $(FUZZ_JWT_SOURCES)
tests_fuzz_replay_jwt_CPPFLAGS = $(AM_CPPFLAGS) $(FUZZ_INCLUDES) $(FUZZ_IDENTITY_INCLUDES) \
	-DCORPUS_DIR=\"$(FUZZ_CORPUS)/jwt\"
tests_fuzz_replay_jwt_CFLAGS = $(AM_CFLAGS) $(CJSON_CFLAGS) $(OPENSSL_CFLAGS)
tests_fuzz_replay_jwt_LDADD = $(FUZZ_JWT_LIBS) $(CJSON_LIBS) $(OPENSSL_LIBS)

tests/fuzz/fuzz-jwt: $(FUZZ_JWT_SOURCES) $(addprefix tests/fuzz/,$(FUZZ_JWT_LIBS)) tests/fuzz/fuzz.h
	$(call fuzz_link,FUZZ_JWT,$(FUZZ_IDENTITY_INCLUDES) $(CJSON_LIBS) $(OPENSSL_LIBS))

