"""The CSI node plugin ([csi], modules/csi), driven as the kubelet drives it: python3-grpcio
with the CSI spec's messages (csi.v1, generated from proto/csi.proto) on the CSI socket, and
the kubelet's plugin registration messages on <registration-dir>/<name>-reg.sock. A publish
bind-mounts the agent's sockets directory read-only at a target below the pods root; the test
reaches the agent's API through it. Every mount a test makes is taken away at teardown."""

import errno
import re
import os
import shutil
import socket
import stat
import subprocess
import sys
import uuid

import grpc
import pytest

from csi_testlib import DRIVER, Client, generate_messages, mount_roots_below, unmount_all_below
from identity_testlib import PodCgroup, new_uid
from pinion_testlib import EXIT_CONFIG, Agent, line_of, make_pod, unix_request

NOBODY = 65534
ID = "/csi.v1.Identity/"
NODE = "/csi.v1.Node/"
REG = "/pluginregistration.Registration/"


@pytest.fixture(scope="module")
def pb():
    d, csi, reg = generate_messages()
    yield csi, reg
    shutil.rmtree(d, ignore_errors=True)


class Kubelet:
    """The kubelet's directories in a temp dir, an agent serving the plugin there, and a client."""

    def __init__(self, agent_factory, pb):
        self.csi, self.reg = pb
        self.dir = os.path.realpath(os.path.join("/tmp", "pinion-csi-" + uuid.uuid4().hex[:8]))
        self.pods = os.path.join(self.dir, "pods")
        self.registry = os.path.join(self.dir, "plugins_registry")
        self.socket = os.path.join(self.dir, "plugins", DRIVER, "csi.sock")
        self.reg_socket = os.path.join(self.registry, DRIVER + "-reg.sock")
        os.makedirs(self.pods)
        os.makedirs(self.registry, mode=0o750)
        try:
            self.agent = agent_factory(config={"csi": {
                "enable": "yes", "socket": self.socket, "registration-dir": self.registry, "pods-root": self.pods}})
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.client = Client(self.socket)

    def close(self):
        self.client.close()
        # The agent first: its sockets' directories go next, which it would take for an attack.
        if self.agent.running():
            self.agent.assert_exit(self.agent.stop())
        unmount_all_below(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)

    def target(self, pod=None, volume="pinion"):
        """A kubelet target path; its parent made, as the kubelet makes it."""
        parent = os.path.join(self.pods, pod or uuid.uuid4().hex[:12], "volumes", "kubernetes.io~csi", volume)
        os.makedirs(parent, exist_ok=True)
        return os.path.join(parent, "mount")

    def publish_request(self, target, volume_id="csi-0123", block=False, readonly=True, capability=True):
        c = self.csi
        req = c.NodePublishVolumeRequest(volume_id=volume_id, target_path=target, readonly=readonly,
                                         volume_context={"csi.storage.k8s.io/ephemeral": "true"})
        if capability:
            cap = req.volume_capability
            if block:
                cap.block.SetInParent()
            else:
                cap.mount.SetInParent()
            cap.access_mode.mode = c.VolumeCapability.AccessMode.SINGLE_NODE_READER_ONLY
        return req

    def publish(self, target, **kw):
        return self.client.call(NODE + "NodePublishVolume", self.publish_request(target, **kw),
                                self.csi.NodePublishVolumeResponse)

    def unpublish(self, target, volume_id="csi-0123"):
        return self.client.call(NODE + "NodeUnpublishVolume",
                                self.csi.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target),
                                self.csi.NodeUnpublishVolumeResponse)

    def module(self):
        return [m for m in self.agent.status()["modules"] if m["name"] == "csi"][0]


@pytest.fixture
def kubelet(agent_factory, pb):
    k = Kubelet(agent_factory, pb)
    yield k
    k.close()


def test_identity_and_node_info(kubelet):
    c, call = kubelet.csi, kubelet.client.call
    info = call(ID + "GetPluginInfo", c.GetPluginInfoRequest(), c.GetPluginInfoResponse)
    assert info.name == DRIVER
    assert info.vendor_version == kubelet.agent.status()["version"]
    caps = call(ID + "GetPluginCapabilities", c.GetPluginCapabilitiesRequest(), c.GetPluginCapabilitiesResponse)
    assert list(caps.capabilities) == []  # no controller service: attachRequired false
    probe = call(ID + "Probe", c.ProbeRequest(), c.ProbeResponse)
    assert probe.HasField("ready") and probe.ready.value
    node = call(NODE + "NodeGetInfo", c.NodeGetInfoRequest(), c.NodeGetInfoResponse)
    assert node.node_id == "test-node"
    ncaps = call(NODE + "NodeGetCapabilities", c.NodeGetCapabilitiesRequest(), c.NodeGetCapabilitiesResponse)
    assert list(ncaps.capabilities) == []
    m = kubelet.module()
    assert m["state"] == "running", m


def test_publish_reaches_the_agent_read_only_and_unpublish_removes_it(kubelet):
    target = kubelet.target()
    assert not os.path.exists(target)  # the plugin makes it, as the spec allows
    kubelet.publish(target, readonly=False)  # read-only all the same: pods only connect
    sock = os.path.join(target, os.path.basename(kubelet.agent.socket))
    r = unix_request(sock, "GET", "/v1/health")
    assert r.status == 200 and r.body["status"] == "ok", r
    with pytest.raises(OSError) as e:
        open(os.path.join(target, "written-by-a-pod"), "w").close()
    assert e.value.errno == errno.EROFS
    assert not os.path.exists(os.path.join(kubelet.agent.runtime_dir, "written-by-a-pod"))

    # Again, as the kubelet retries: one mount, not two.
    kubelet.publish(target)
    assert mount_roots_below(target) == [target]
    assert unix_request(sock, "GET", "/v1/health").status == 200

    kubelet.unpublish(target)
    assert not os.path.exists(target)
    assert mount_roots_below(target) == []
    assert os.path.exists(kubelet.agent.socket)  # the agent's own socket is untouched
    kubelet.unpublish(target)  # nothing there: still OK
    m = kubelet.module()
    assert (m["details"]["published"], m["details"]["unpublished"]) == (2, 2), m


def test_bad_requests_get_the_specs_codes(kubelet):
    c, code = kubelet.csi, kubelet.client.code
    pub = lambda req: code(NODE + "NodePublishVolume", req, c.NodePublishVolumeResponse)  # noqa: E731
    unpub = lambda req: code(NODE + "NodeUnpublishVolume", req, c.NodeUnpublishVolumeResponse)  # noqa: E731
    target = kubelet.target()
    INVALID, DENIED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED

    assert pub(kubelet.publish_request(target, volume_id=""))[0] == INVALID
    assert pub(kubelet.publish_request(""))[0] == INVALID
    assert pub(kubelet.publish_request(target, capability=False))[0] == INVALID
    assert pub(kubelet.publish_request(target, block=True))[0] == INVALID
    assert pub(b"\xff\xff\xff")[0] == INVALID  # not the message at all
    assert pub(kubelet.publish_request(target.replace("/volumes/", "/volumes/../../")))[0] == INVALID
    assert unpub(c.NodeUnpublishVolumeRequest(volume_id="", target_path=target))[0] == INVALID
    assert unpub(c.NodeUnpublishVolumeRequest(volume_id="v", target_path=""))[0] == INVALID
    assert not os.path.exists(target)

    # Outside the pods root, or the root's own entries: never mounted on.
    outside = os.path.join(kubelet.dir, "etc")
    os.makedirs(outside)
    for t in (outside, kubelet.pods, os.path.join(kubelet.pods, "some-pod")):
        got = pub(kubelet.publish_request(t))
        assert got[0] == DENIED, (t, got)
    # A symlink on the way that leads out of the pods root.
    pod = os.path.join(kubelet.pods, "escaping-pod")
    os.makedirs(pod)
    os.symlink(outside, os.path.join(pod, "volumes"))
    got = pub(kubelet.publish_request(os.path.join(pod, "volumes", "mount")))
    assert got[0] == DENIED, got
    assert os.listdir(outside) == [] and mount_roots_below(kubelet.dir) == []

    # The kubelet makes the target's parent: missing, the volume cannot be found a place.
    got = pub(kubelet.publish_request(os.path.join(kubelet.pods, "no-such-pod", "volumes", "mount")))
    assert got[0] == grpc.StatusCode.NOT_FOUND, got
    # Something that is not a directory at the target.
    file_target = kubelet.target()
    open(file_target, "w").close()
    assert pub(kubelet.publish_request(file_target))[0] == grpc.StatusCode.FAILED_PRECONDITION

    # A non-empty directory two levels below the pods root (here the pod's own volumes
    # directory, which holds its other volumes): a publish would hide them, so it is refused.
    kubelet.target(pod="victim-pod")
    volumes = os.path.join(kubelet.pods, "victim-pod", "volumes")
    os.makedirs(os.path.join(volumes, "other-volume"), exist_ok=True)
    with open(os.path.join(volumes, "other-volume", "data"), "w") as f:
        f.write("the pod's")
    got = pub(kubelet.publish_request(volumes))
    assert got[0] == grpc.StatusCode.FAILED_PRECONDITION, got
    assert "not empty" in got[1], got
    assert mount_roots_below(kubelet.dir) == []
    with open(os.path.join(volumes, "other-volume", "data")) as f:
        assert f.read() == "the pod's"

    # A mount at the target that is not this driver's volume is not taken away.
    foreign = kubelet.target()
    os.makedirs(foreign)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", foreign], check=True)
    got = unpub(c.NodeUnpublishVolumeRequest(volume_id="v", target_path=foreign))
    assert got[0] == grpc.StatusCode.NOT_FOUND, got
    assert mount_roots_below(foreign) == [foreign]
    assert pub(kubelet.publish_request(foreign))[0] == grpc.StatusCode.FAILED_PRECONDITION
    assert kubelet.module()["details"]["refused"] >= 14


def test_registration_socket_answers_as_the_kubelet_expects(kubelet):
    r = kubelet.reg
    reg = Client(kubelet.reg_socket)
    try:
        info = reg.call(REG + "GetInfo", r.InfoRequest(), r.PluginInfo)
        assert (info.type, info.name, info.endpoint) == ("CSIPlugin", DRIVER, kubelet.socket)
        assert list(info.supported_versions) == ["1.0.0"]

        reg.call(REG + "NotifyRegistrationStatus", r.RegistrationStatus(plugin_registered=True),
                 r.RegistrationStatusResponse)
        m = kubelet.module()
        assert m["details"]["registered"] and m["state"] == "running", m
        reg.call(REG + "NotifyRegistrationStatus", r.RegistrationStatus(plugin_registered=False, error="version"),
                 r.RegistrationStatusResponse)
        m = kubelet.module()
        assert m["state"] == "degraded" and "version" in m["reason"], m
        reg.call(REG + "NotifyRegistrationStatus", r.RegistrationStatus(plugin_registered=True),
                 r.RegistrationStatusResponse)
        assert kubelet.module()["state"] == "running"
    finally:
        reg.close()


def _connect_as_nobody(path):
    """0 if a process running as nobody could connect to path, else its errno."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            os._exit(0)
        except OSError as e:
            os._exit(e.errno or 255)
        except BaseException:
            os._exit(255)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_sockets_are_root_only(kubelet):
    for path in (kubelet.socket, kubelet.reg_socket):
        st = os.stat(path)
        assert stat.S_ISSOCK(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o600, path
        assert _connect_as_nobody(path) == errno.EACCES, path


# One unary call with raw request bytes (hex in argv[3]); prints "OK" or the status code's name.
RAW_CALL = r"""
import grpc, sys
channel = grpc.insecure_channel("unix:" + sys.argv[1])
fn = channel.unary_unary(sys.argv[2], request_serializer=lambda m: m, response_deserializer=lambda b: b)
try:
    fn(bytes.fromhex(sys.argv[3]), timeout=10)
    print("OK")
except grpc.RpcError as e:
    print(e.code().name, e.details())
"""


def call_from(cg, path, method, request):
    p = subprocess.run([sys.executable, "-c", RAW_CALL, path, method, request.SerializeToString().hex()],
                       preexec_fn=cg.preexec() if cg else None, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_root_in_a_pod_is_not_the_kubelet(kubelet):
    """A root process in a pod that has the plugin's sockets (a hostPath of the kubelet's plugins
    directory) is refused like anyone but the host's root: it publishes nothing, learns nothing.
    In a pod this node knows or in one it does not; the host's root still is served."""
    c, r = kubelet.csi, kubelet.reg
    known = new_uid()
    kubelet.agent.write_pod("privileged", make_pod("privileged", uid=known))
    kubelet.agent.wait_pod("default", "privileged")
    for pod_uid in (known, new_uid()):
        try:
            cg = PodCgroup(pod_uid, hierarchy="pids")
        except (OSError, RuntimeError) as e:
            pytest.skip("cannot create test cgroups: %s" % e)
        try:
            target = kubelet.target()
            calls = ((kubelet.socket, NODE + "NodePublishVolume", kubelet.publish_request(target)),
                     (kubelet.socket, NODE + "NodeUnpublishVolume",
                      c.NodeUnpublishVolumeRequest(volume_id="csi-0123", target_path=kubelet.agent.runtime_dir)),
                     (kubelet.socket, ID + "GetPluginInfo", c.GetPluginInfoRequest()),
                     (kubelet.socket, NODE + "NodeGetInfo", c.NodeGetInfoRequest()),
                     (kubelet.reg_socket, REG + "GetInfo", r.InfoRequest()),
                     (kubelet.reg_socket, REG + "NotifyRegistrationStatus", r.RegistrationStatus(plugin_registered=False)))
            for path, method, request in calls:
                got = call_from(cg, path, method, request)
                assert got.startswith("PERMISSION_DENIED") and "host's root" in got, (pod_uid == known, method, got)
            assert not os.path.exists(target) and mount_roots_below(kubelet.pods) == []
            assert os.path.exists(kubelet.agent.socket)
        finally:
            cg.close()
    log = kubelet.agent.log_text()
    assert re.search(r"NodePublishVolume refused: caller pid \d+ has uid 0 but is not the host "
                     r"\(caller: pod, in pod %s\)" % known, log), log[-2000:]
    assert re.search(r"refused: caller pid \d+ has uid 0 but is not the host \(caller: outsider, in pod ", log)
    # The host's root, the same call: served.
    assert call_from(None, kubelet.socket, NODE + "NodePublishVolume", kubelet.publish_request(target)) == "OK"
    assert mount_roots_below(target) == [target]
    kubelet.unpublish(target)
    m = kubelet.module()
    assert m["state"] == "running" and m["details"]["published"] == 1 and m["details"]["refused"] == 12, m
    metrics = kubelet.agent.metrics()
    denied = sum(v for (_, labels, v) in metrics.find("pinion_grpc_calls_total")
                 if labels.get("server", "").startswith("csi") and labels.get("status") == "PERMISSION_DENIED")
    assert denied == 12, denied


def test_off_by_default(agent):
    m = [m for m in agent.status()["modules"] if m["name"] == "csi"][0]
    assert m["state"] == "disabled" and "enable" in m["reason"], m


@pytest.mark.parametrize("key,value", [("name", "-bad-name"), ("pods-root", "/var/lib/../pods"),
                                       ("enable", "maybe")])
def test_bad_config_is_refused_with_its_line(key, value):
    a = Agent(config={"csi": {key: value}})
    try:
        rc, out, err = a.check_config()
        assert rc == EXIT_CONFIG, (rc, out, err)
        text = open(a.config_file).read()
        assert err.startswith("%s:%d: " % (a.config_file, line_of(text, "%s=%s" % (key, value)))), err
    finally:
        a.close()


def test_reload_serves_a_new_socket_and_applies_a_new_pods_root(kubelet):
    a = kubelet.agent
    other_pods = os.path.join(kubelet.dir, "pods2")
    os.makedirs(other_pods)
    new_socket = os.path.join(kubelet.dir, "plugins", "moved", "csi.sock")
    a.write_config(sections={"csi": {"socket": new_socket, "pods-root": other_pods}})
    a.sighup()
    a.wait_log(r"CSI node plugin csi\.pinion\.dev serving .* on %s" % re.escape(new_socket))
    assert not os.path.exists(kubelet.socket)  # the old socket went with its server
    client = Client(new_socket)
    try:
        c = kubelet.csi
        old_target = kubelet.target()
        got = client.code(NODE + "NodePublishVolume", kubelet.publish_request(old_target), c.NodePublishVolumeResponse)
        assert got[0] == grpc.StatusCode.PERMISSION_DENIED, got  # no longer below the pods root
        parent = os.path.join(other_pods, "pod", "volumes", "kubernetes.io~csi", "v")
        os.makedirs(parent)
        target = os.path.join(parent, "mount")
        client.call(NODE + "NodePublishVolume", kubelet.publish_request(target), c.NodePublishVolumeResponse)
        assert mount_roots_below(target) == [target]
        client.call(NODE + "NodeUnpublishVolume", c.NodeUnpublishVolumeRequest(volume_id="v", target_path=target),
                    c.NodeUnpublishVolumeResponse)
        assert not os.path.exists(target)
    finally:
        client.close()
