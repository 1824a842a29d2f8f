# identity (included by Makefile.am).
MODULE_SOURCES += \
	modules/identity/identity.c modules/identity/identity.h \
	modules/identity/identity-api.c \
	modules/identity/workload.c \
	modules/identity/cred.c modules/identity/cred.h \
	modules/identity/signer.h modules/identity/signer-local.c modules/identity/signer-cfssl.c \
	modules/identity/ca.c modules/identity/ca.h \
	modules/identity/x509.c modules/identity/x509.h
EXTRA_DIST += modules/identity/local.mk
INTEGRATION_TESTS += tests/integration/test_identity.py
EXTRA_DIST += tests/integration/identity_testlib.py
