/* SPDX-License-Identifier: MIT */
#pragma once

/* Linux capabilities of the agent. piniond starts with what systemd (CapabilityBoundingSet=)
 * or the container runtime (securityContext.capabilities) gave it, which is the union of what
 * every module could need; once the configuration is known, it keeps only what the enabled
 * modules need and drops the rest from its permitted, effective, inheritable and ambient sets
 * and, when it may (CAP_SETPCAP), from its bounding set, so on-change commands cannot regain
 * them either. The capability calls are the kernel's own (capget/capset/prctl); capabilities
 * are per thread, so this runs before the agent starts any thread.
 *
 * Sets are bit masks: bit N is capability N (CAP_TO_MASK64(CAP_CHOWN), ...). */

#include <linux/capability.h> /* CAP_* numbers */
#include <stdbool.h>
#include <stdint.h>

#define CAP_TO_MASK64(cap) (UINT64_C(1) << (cap))

struct caps_state {
        uint64_t effective;
        uint64_t permitted;
        uint64_t bounding;
};

/* The calling thread's sets. */
int caps_get(struct caps_state *ret);

/* Keeps only the capabilities in keep (those the thread has); drops every other one from the
 * permitted/effective/inheritable/ambient sets and, with CAP_SETPCAP, from the bounding set
 * (*ret_bounding_dropped says whether it could). */
int caps_keep_only(uint64_t keep, bool *ret_bounding_dropped);

/* "CAP_CHOWN CAP_KILL" for a set ("none" when empty); NULL on out of memory. Owned by the
 * caller. */
char *caps_to_string(uint64_t set);

/* The name of one capability ("CAP_NET_ADMIN"), NULL if unknown to this build. */
const char *cap_to_name(unsigned cap);
