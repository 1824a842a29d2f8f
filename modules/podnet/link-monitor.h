/* SPDX-License-Identifier: MIT */
#pragma once

/* The host namespace's link removals, as the kernel announces them (RTNLGRP_LINK, libmnl).
 *
 * Why: a held DEL may answer as soon as its veth is gone from both namespaces, and the kernel
 * says so long before the deletion's own reply. Deleting a veth unlists both ends (it takes
 * its peer along, in one batch, under rtnl) and then announces each with RTM_DELLINK; the
 * RTM_DELLINK request is acknowledged only after the kernel's post-unregister wait
 * (netdev_run_todo: references, RCU), measured here at 17-24 ms of a 22-29 ms deletion. Once
 * the host end's announcement is out, the pod end's name is free in its namespace (an ADD
 * there with that name works, tested).
 *
 * Announcements can be lost (the socket's buffer overflows: ENOBUFS); the deletion's own
 * completion remains the fallback, so this only ever makes a DEL answer earlier. Callers match
 * the interface index as well as the name, so a stale announcement about an earlier interface
 * by that name does not count. */

#include <systemd/sd-event.h>

#include "macro.h"

struct link_monitor;

/* Runs on the loop for every link removed from the host namespace. */
typedef void (*link_monitor_fn)(int ifindex, const char *name, void *userdata);

int link_monitor_new(sd_event *e, link_monitor_fn removed, void *userdata, struct link_monitor **ret);
struct link_monitor *link_monitor_free(struct link_monitor *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct link_monitor *, link_monitor_free);
