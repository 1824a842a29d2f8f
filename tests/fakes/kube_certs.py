# SPDX-License-Identifier: MIT
"""The test apiserver's throwaway CA, server certificate and client certificates (openssl)."""

import os
import random
import subprocess
import uuid


class _CertsMixin:

    _OPENSSL_CNF = """
[req]
distinguished_name = dn
prompt = no
[dn]
CN = pinion fake kube-apiserver CA
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
[v3_client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
"""

    def _openssl(self, *args):
        r = subprocess.run(["openssl"] + list(args), cwd=self.workdir, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.strip()))

    def _issue(self, name, subj, ext):
        key, csr, crt = (os.path.join(self.workdir, name + s) for s in (".key", ".csr", ".crt"))
        self._openssl("req", "-new", "-config", self._cnf, "-newkey", "ec", "-pkeyopt",
                      "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
                      "-subj", subj)
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca_file, "-CAkey", self.ca_key,
                      "-set_serial", "0x%x" % random.getrandbits(63), "-days", "30",
                      "-extfile", self._cnf, "-extensions", ext, "-out", crt)
        os.unlink(csr)
        return crt, key

    def _make_certs(self):
        self._cnf = os.path.join(self.workdir, "openssl.cnf")
        cnf = self._OPENSSL_CNF
        if self.host not in ("127.0.0.1", "::1"):
            cnf = cnf.replace("subjectAltName = IP:127.0.0.1,", "subjectAltName = IP:%s,IP:127.0.0.1," % self.host)
        with open(self._cnf, "w") as f:
            f.write(cnf)
        self.ca_file = os.path.join(self.workdir, "ca.crt")
        self.ca_key = os.path.join(self.workdir, "ca.key")
        self._openssl("req", "-x509", "-config", self._cnf, "-extensions", "v3_ca", "-newkey",
                      "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                      self.ca_key, "-out", self.ca_file, "-days", "30")
        self.cert_file, self.key_file = self._issue("server", "/CN=kube-apiserver", "v3_server")

    def client_cert(self, cn="system:node:test-node", org="system:nodes"):
        """A client certificate (cert_path, key_path) signed by the fake's CA; with TLS and
        client_certs=True it authenticates like a valid token."""
        if not self.tls:
            raise RuntimeError("client certificates need tls=True")
        name = "client-%s" % uuid.uuid4().hex[:8]
        subj = "/O=%s/CN=%s" % (org, cn) if org else "/CN=%s" % cn
        return self._issue(name, subj, "v3_client")
