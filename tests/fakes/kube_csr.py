# SPDX-License-Identifier: MIT
"""The test apiserver's CertificateSigningRequests (certificates.k8s.io/v1)."""

import base64
import json
import uuid

from kube_common import _json_copy, _now_rfc3339, ApiError

# =============================================================================================
# certificates.k8s.io/v1 CertificateSigningRequests (for the identity module's kubernetes
# signer). Create (POST), get, list; the test approves or denies with approve_csr()/deny_csr(),
# and an approved request for a known signer gets its certificate issued by the fake's CA
# (tls=True), valid for spec.expirationSeconds (default 1h), as kube-controller-manager's
# signer does. Shapes are checked against the official client in test_fake_apiserver.py.
# =============================================================================================

CSR_PREFIX = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CSR_SIGNERS = ("kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kube-apiserver-client",
               "kubernetes.io/kubelet-serving")


class _CsrMixin:
    """The CSR store and its routes, mixed into FakeApiserver."""

    def _csr_store(self):
        with self._lock:
            if not hasattr(self, "_csrs"):
                self._csrs = {}
                self.csr_creates = 0
            return self._csrs

    def _serve_csr(self, h, path, params):
        """Handles every request under CSR_PREFIX; returns True if it did."""
        if not (path == CSR_PREFIX or path.startswith(CSR_PREFIX + "/")):
            return False
        store = self._csr_store()
        rest = path[len(CSR_PREFIX):].strip("/")
        try:
            if h.command == "POST" and not rest:
                h.send_json(201, self._csr_create(store, getattr(h, "request_body", b"")))
            elif h.command == "GET" and not rest:
                with self._lock:
                    items = [_json_copy(o) for _, o in sorted(store.items())]
                h.send_json(200, {"kind": "CertificateSigningRequestList",
                                  "apiVersion": "certificates.k8s.io/v1",
                                  "metadata": {"resourceVersion": str(self._rv)}, "items": items})
            elif h.command == "GET" and "/" not in rest:
                with self._lock:
                    obj = store.get(rest)
                    obj = _json_copy(obj) if obj else None
                if obj is None:
                    raise ApiError(404, "NotFound",
                                   'certificatesigningrequests.certificates.k8s.io "%s" not found' % rest,
                                   details={"name": rest, "group": "certificates.k8s.io",
                                            "kind": "certificatesigningrequests"})
                h.send_json(200, obj)
            else:
                raise ApiError(405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource", details={})
        except ApiError as err:
            h.send_error_status(err)
        return True

    def _csr_create(self, store, body):
        try:
            obj = json.loads(body or b"null")
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format: %s" % e)
        # kind and apiVersion may be left out (the URL says them), as the real apiserver allows.
        if not isinstance(obj, dict) or obj.setdefault("kind", "CertificateSigningRequest") != "CertificateSigningRequest" \
                or obj.setdefault("apiVersion", "certificates.k8s.io/v1") != "certificates.k8s.io/v1":
            raise ApiError(400, "BadRequest", "expected a certificates.k8s.io/v1 CertificateSigningRequest")
        meta = obj.setdefault("metadata", {})
        spec = obj.get("spec") or {}
        name = meta.get("name") or (meta.get("generateName", "") + uuid.uuid4().hex[:5]
                                    if meta.get("generateName") else None)
        problems = []
        if not name:
            problems.append("metadata.name: Required value: name or generateName is required")
        if spec.get("signerName") not in CSR_SIGNERS:
            problems.append("spec.signerName: Invalid value: %r" % spec.get("signerName"))
        try:
            csr_pem = base64.b64decode(spec.get("request", ""), validate=True)
            if b"BEGIN CERTIFICATE REQUEST" not in csr_pem:
                raise ValueError
        except ValueError:
            problems.append("spec.request: Invalid value: not a PEM CERTIFICATE REQUEST")
        if not isinstance(spec.get("usages"), list) or not spec["usages"]:
            problems.append("spec.usages: Required value")
        if problems:
            raise ApiError(422, "Invalid", 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: %s'
                           % (name, "; ".join(problems)),
                           details={"name": name, "group": "certificates.k8s.io",
                                    "kind": "CertificateSigningRequest"})
        with self._lock:
            if name in store:
                raise ApiError(409, "AlreadyExists",
                               'certificatesigningrequests.certificates.k8s.io "%s" already exists' % name,
                               details={"name": name, "group": "certificates.k8s.io",
                                        "kind": "certificatesigningrequests"})
            self._rv += 1
            meta.update({"name": name, "uid": str(uuid.uuid4()), "resourceVersion": str(self._rv),
                         "creationTimestamp": _now_rfc3339()})
            meta.pop("generateName", None)
            obj["status"] = {}
            obj["spec"].setdefault("username", "system:bootstrap:fake")
            store[name] = obj
            self.csr_creates += 1
            return _json_copy(obj)

    def csrs(self):
        """Every CSR object (copies), by name."""
        store = self._csr_store()
        with self._lock:
            return {k: _json_copy(v) for k, v in store.items()}

    def _csr_condition(self, name, ctype, reason, message):
        store = self._csr_store()
        with self._lock:
            obj = store[name]
            conds = obj["status"].setdefault("conditions", [])
            now = _now_rfc3339()
            conds.append({"type": ctype, "status": "True", "reason": reason, "message": message,
                          "lastUpdateTime": now, "lastTransitionTime": now})
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            return obj

    def deny_csr(self, name, message="denied by the test"):
        self._csr_condition(name, "Denied", "TestDenied", message)

    def approve_csr(self, name, issue=True):
        """Approves the CSR and (issue=True) puts the certificate signed by the fake's CA into
        status.certificate, as the signing controller does."""
        obj = self._csr_condition(name, "Approved", "TestApproved", "approved by the test")
        if issue:
            pem = self._csr_sign(base64.b64decode(obj["spec"]["request"]),
                                 int(obj["spec"].get("expirationSeconds") or 3600))
            with self._lock:
                obj["status"]["certificate"] = base64.b64encode(pem).decode()
                self._rv += 1
                obj["metadata"]["resourceVersion"] = str(self._rv)

    def _csr_sign(self, csr_pem, seconds):
        import datetime
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID
        if not self.ca_file:
            raise RuntimeError("issuing CSR certificates needs tls=True (the fake's CA signs them)")
        with open(self.ca_file, "rb") as f:
            ca = x509.load_pem_x509_certificate(f.read())
        with open(self.ca_key, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
        csr = x509.load_pem_x509_csr(csr_pem)
        now = datetime.datetime.utcnow().replace(microsecond=0)
        cert = (x509.CertificateBuilder().subject_name(csr.subject).issuer_name(ca.subject)
                .public_key(csr.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(now + datetime.timedelta(seconds=seconds))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM)

# ============================ end of the CertificateSigningRequest block ======================
