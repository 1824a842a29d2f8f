# SPDX-License-Identifier: MIT
"""[network] routing = bgp on a real node: piniond as the shipped unit, Debian's bird2 as the
package's bird.service with /etc/bird/bird.conf made from the installed
/usr/share/pinion/bird/pinion-node.conf, peering over iBGP (both families) with a route
reflector: a second bird, route-reflector.conf filled in, in a network namespace the test makes
and joins to the node by a veth (192.0.2.0/24, 2001:db8::/64; the guest has no other network).

What is checked: pinion's `unreachable` aggregates appear (proto pinion); the reflector learns
them from the node's BIRD; a restart of piniond with no pod takes them away and back (the
reflector follows); a stop with no pod withdraws them from the reflector within 2 s; a restart
of bird while piniond runs brings them back once the session is up again. The figures are
printed (run with -s) and written to $PINION_VM_OUT/bgp-figures.txt."""

import os
import re
import shutil
import subprocess
import time

from conftest import OUT, run, start_agent, systemctl, wait_for

POD_CIDR4 = "10.244.9.0/24"
POD_CIDR6 = "fd00:10:244:9::/64"
NS = "pinion-rr"
NODE_IF, RR_IF = "pinion-rr0", "eth0"
NODE4, RR4, NET4 = "192.0.2.1", "192.0.2.2", "192.0.2.0/24"
NODE6, RR6, NET6 = "2001:db8::1", "2001:db8::2", "2001:db8::/64"
AS = 64512
# Not what the test waits on (every session here ends with a notification, not silence), but
# small, as in the cluster tests, so that a lost notification costs seconds, not minutes.
HOLD_TIME = 3
TEMPLATES = "/usr/share/pinion/bird"
BIRD_CONF = "/etc/bird/bird.conf"
RR_DIR = "/run/pinion-test-rr"
RR_CTL = RR_DIR + "/bird.ctl"
FORWARDING = ("/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding")


def fill(template, **values):
    """The installed template with its @KEY@ placeholders filled in; none may be left."""
    with open(os.path.join(TEMPLATES, template)) as f:
        text = f.read()
    for k, v in values.items():
        text = text.replace("@%s@" % k, str(v))
    assert not re.search(r"@[A-Z0-9_]+@", text), text
    return text


def rr_birdc(*args):
    return run("birdc", "-s", RR_CTL, *args, check=False).stdout


def rr_has(cidr):
    """The reflector has a route for exactly cidr (learned from the node: it has no other)."""
    return any(line.startswith(cidr + " ") for line in rr_birdc("show", "route", cidr).splitlines())


def rr_has_both():
    return rr_has(POD_CIDR4) and rr_has(POD_CIDR6)


def rr_has_neither():
    return not rr_has(POD_CIDR4) and not rr_has(POD_CIDR6)


def rr_route_stats():
    """The reflector's import updates and withdraws received, summed over its sessions."""
    out = rr_birdc("show", "protocols", "all")
    count = lambda what: sum(int(n) for n in re.findall(r"Import %s:\s+(\d+)" % what, out))  # noqa: E731
    return count("updates"), count("withdraws")


def node_aggregates():
    """The node's unreachable routes of protocol pinion, both families."""
    out = run("ip", "route", "show", "proto", "pinion").stdout + run("ip", "-6", "route", "show", "proto",
                                                                        "pinion").stdout
    return [line.split()[1] for line in out.splitlines() if line.startswith("unreachable ")]


def established():
    """The node's BGP sessions that are Established."""
    out = run("birdc", "show", "protocols", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if " BGP " in line and "Established" in line]


def rr_sessions():
    """The reflector's Established BGP sessions, as (name, since): dynamic BGP reuses the names
    of closed sessions, the time says when each came up."""
    out = rr_birdc("show", "protocols")
    return {tuple(line.split()[0:5:4]) for line in out.splitlines() if " BGP " in line and "Established" in line}


def timed(what, cond, timeout):
    """Seconds until cond() holds, polled every 50 ms."""
    t0 = time.monotonic()
    wait_for(what, cond, timeout=timeout, interval=0.05)
    return time.monotonic() - t0


def wire_reflector(node):
    """The reflector's namespace, joined to the node by a veth, each end with an address of
    both families (no DAD: usable at once)."""
    node.netns(NS)
    run("ip", "link", "add", NODE_IF, "type", "veth", "peer", "name", RR_IF, "netns", NS)
    run("ip", "addr", "add", NODE4 + "/24", "dev", NODE_IF)
    run("ip", "addr", "add", NODE6 + "/64", "dev", NODE_IF, "nodad")
    run("ip", "link", "set", NODE_IF, "up")
    for argv in (("addr", "add", RR4 + "/24", "dev", RR_IF), ("addr", "add", RR6 + "/64", "dev", RR_IF, "nodad"),
                 ("link", "set", RR_IF, "up"), ("link", "set", "lo", "up")):
        run("ip", "-n", NS, *argv)


def start_reflector(node):
    """bird in the namespace, route-reflector.conf filled in (logging to stderr: the journal of
    its transient unit), its own control socket."""
    os.makedirs(RR_DIR, exist_ok=True)
    node.on_cleanup(lambda: shutil.rmtree(RR_DIR, ignore_errors=True))
    conf = fill("route-reflector.conf", ROUTER_ID=RR4, AS=AS, HOLD_TIME=HOLD_TIME, NODES_IPV4=NET4,
                NODES_IPV6=NET6).replace("log syslog all;", "log stderr all;")
    with open(RR_DIR + "/bird.conf", "w") as f:
        f.write(conf)
    run("bird", "-p", "-c", RR_DIR + "/bird.conf")
    node.service("pinion-test-rr.service", "/usr/sbin/ip", "netns", "exec", NS, "/usr/sbin/bird", "-f",
                 "-c", RR_DIR + "/bird.conf", "-s", RR_CTL, "-P", RR_DIR + "/bird.pid")
    wait_for("the reflector's control socket", lambda: "BIRD" in rr_birdc("show", "status"), timeout=20)


def configure_node_bird(node):
    """/etc/bird/bird.conf from the installed template (the package's file comes back at the
    end); bird.service is stopped at the end."""
    with open(BIRD_CONF) as f:
        original = f.read()

    def restore():
        systemctl("stop", "bird.service", check=False)
        systemctl("reset-failed", "bird.service", check=False)
        with open(BIRD_CONF, "w") as f:
            f.write(original)
    node.on_cleanup(restore)
    # Opened for writing, not replaced: the package's owner and mode (bird:bird 0640) stay, and
    # bird reads it as user bird.
    with open(BIRD_CONF, "w") as f:
        f.write(fill("pinion-node.conf", ROUTER_ID=NODE4, AS=AS, HOLD_TIME=HOLD_TIME, RR1_IPV4=RR4, RR1_IPV6=RR6))
    run("bird", "-p", "-c", BIRD_CONF)


def report(figures, line):
    figures.append(line)
    print(line)


def test_bgp_announces_the_pod_cidrs_through_the_package_bird(node):
    figures = []
    assert os.path.exists(TEMPLATES + "/pinion-node.conf") and os.path.exists(TEMPLATES + "/route-reflector.conf")
    assert systemctl("is-enabled", "bird.service", check=False).stdout.strip() == "disabled"
    saved = [open(p).read() for p in FORWARDING]

    def restore_forwarding():
        for p, v in zip(FORWARDING, saved):
            with open(p, "w") as f:
                f.write(v)
    node.on_cleanup(restore_forwarding)
    wire_reflector(node)
    node.conf("50-bgp.conf", "[network]\npod-cidr=%s, %s\nrouting = bgp\n" % (POD_CIDR4, POD_CIDR6))

    start_agent()
    wait_for("the aggregates", lambda: sorted(node_aggregates()) == sorted([POD_CIDR4, POD_CIDR6]), timeout=10)
    assert "unreachable %s" % POD_CIDR4 in run("ip", "route", "show", "proto", "pinion").stdout.splitlines()[0]
    # rt_protos.d/pinion.conf names protocol 177 for iproute2.
    assert run("ip", "route", "show", "exact", POD_CIDR4).stdout.split() == ["unreachable", POD_CIDR4, "proto",
                                                                               "pinion"]

    start_reflector(node)
    configure_node_bird(node)
    t0 = time.monotonic()
    systemctl("start", "bird.service")
    timed("the reflector learning both CIDRs", rr_has_both, timeout=20)
    report(figures, "bird started: the reflector has both CIDRs after %.2fs (sessions %s)" % (
        time.monotonic() - t0, ",".join(established())))
    for cidr, hop in ((POD_CIDR4, NODE4), (POD_CIDR6, NODE6)):
        detail = rr_birdc("show", "route", cidr, "all")
        assert "BGP.next_hop: %s" % hop in detail, detail
    assert sorted(established()) == ["rr1_v4", "rr1_v6"], established()

    # piniond restarted with no pod: the aggregates go at stop, come back at start; what the
    # kernel did is in `ip monitor`, what the reflector received in its counters.
    updates0, withdraws0 = rr_route_stats()
    monitor = subprocess.Popen(["ip", "-o", "monitor", "route"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        systemctl("restart", "piniond.service")
        restarted = time.monotonic() - t0
        wait_for("the aggregates back", lambda: len(node_aggregates()) == 2, timeout=10)
        took = timed("the reflector having both CIDRs again", rr_has_both, timeout=10)
        time.sleep(0.3)
    finally:
        monitor.terminate()
        events = monitor.communicate(timeout=5)[0]
    kernel = [("deleted" if ln.startswith("Deleted") else "added")
              for ln in events.splitlines() if POD_CIDR4 + " " in ln and "unreachable" in ln]
    updates1, withdraws1 = rr_route_stats()
    report(figures, "piniond restarted (%.2fs): kernel %s of %s; the reflector received %d withdraws, %d "
           "updates (both families), has both again %.2fs after the restart returned" % (
               restarted, kernel, POD_CIDR4, withdraws1 - withdraws0, updates1 - updates0, took))
    assert kernel == ["deleted", "added"], events
    assert withdraws1 - withdraws0 == 2 and updates1 - updates0 == 2, (withdraws1, withdraws0, updates1, updates0)

    # bird restarted while piniond runs: the session comes back and so does the route.
    sessions = rr_sessions()
    t0 = time.monotonic()
    systemctl("restart", "bird.service")
    wait_for("the session down and up again", lambda: sorted(established()) == ["rr1_v4", "rr1_v6"], timeout=20,
             interval=0.05)
    timed("the reflector having both CIDRs after bird's restart", rr_has_both, timeout=20)
    report(figures, "bird restarted: the reflector has both CIDRs %.2fs after the restart was asked" % (
        time.monotonic() - t0))
    # New sessions on the reflector, not the old ones kept.
    assert len(sessions) == 2 and rr_sessions().isdisjoint(sessions), (sessions, rr_sessions())

    # piniond stopped with no pod: the aggregates go, the reflector loses them within 2 s of the
    # stop (measured from when systemctl returned: how long piniond takes to stop under TCG on a
    # loaded host is not what this is about, BIRD's withdrawal is).
    t0 = time.monotonic()
    systemctl("stop", "piniond.service")
    stopped = time.monotonic() - t0
    assert node_aggregates() == []
    took = timed("the reflector losing both CIDRs", rr_has_neither, timeout=10)
    report(figures, "piniond stopped (%.2fs): the reflector lost both CIDRs %.2fs after the stop returned, "
           "%.2fs after it was asked" % (stopped, took, stopped + took))
    assert took < 2.0, figures
    assert established() and sorted(established()) == ["rr1_v4", "rr1_v6"]

    with open(os.path.join(OUT, "bgp-figures.txt"), "w") as f:
        f.write("\n".join(figures) + "\n")
