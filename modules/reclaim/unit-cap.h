/* SPDX-License-Identifier: MIT */
#pragma once

/* unit-cap: who writes a target's cap. A cgroup that is a systemd unit's own (systemd PID 1,
 * cgroup v2, the last component of its path a .service, .scope or .slice whose ControlGroup
 * systemd confirms) belongs to systemd: its memory.high is set and restored through the
 * manager's SetUnitProperties(runtime, MemoryHigh=), so `systemctl show` tells the truth and a
 * daemon-reload keeps it. Every other cgroup (v1, the kubelet's cgroupfs driver, a cgroup below
 * a unit) has its file written directly (memcg_write_cap()).
 *
 * The calls are asynchronous: a daemon-reload can keep PID 1 busy for seconds, and the loop
 * never waits for it. While a call (or the check of who owns the cgroup) is in flight the
 * target is busy: its checks are put off and replayed when the call is done, so nothing
 * compares the cap read with a value systemd has not written yet. systemd answers before it
 * writes the cgroup, so "done" is the answer and then memory.high showing the value. */

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "target.h"

struct unit_bus;
struct unit_call;

enum cap_owner {
        CAP_OWNER_CGROUPFS, /* written directly */
        CAP_OWNER_CHECKING, /* asking systemd whether the cgroup is its unit's */
        CAP_OWNER_SYSTEMD,  /* through systemd's D-Bus API */
};

/* One target's route (in struct reclaim_target). */
struct target_cap {
        enum cap_owner owner;
        char *unit;            /* the unit whose own cgroup it is (CHECKING, SYSTEMD) */
        char *error;           /* the last failed call: "D-Bus error name: message" */
        struct unit_call *call; /* the call in flight whose answer decides (NULL: none) */
        sd_event_source *verify; /* polls memory.high after systemd's answer */
        unsigned verify_left;
        uint64_t verify_value;   /* what memory.high must show */
        int replay;            /* a wake_source put off while busy (-1: none) */
        bool step_put_off;     /* an episode's step put off while busy */
        bool remove_record;    /* target_record_remove() put off until the restore is done */
};

/* The unit whose own cgroup path is, by systemd's naming: the last component a unit name
 * ending in .service, .scope or .slice, every one before it a slice whose name is the prefix
 * of the next slice's ("a.slice/a-b.slice/a-b-c.slice"). 1 and *ret_unit, or 0 if path cannot
 * be a unit's own cgroup (a cgroup below a unit, a plain directory). */
int unit_name_from_cgroup(const char *path, char **ret_unit);

/* The connection to systemd shared by the module's targets (made at first need). Freeing it
 * waits a bounded time for restores still in flight (stop: the next start restores whatever
 * did not make it, from the record). */
struct unit_bus *unit_cap_bus_free(struct unit_bus *b);

struct reclaim_target;
struct memcg;

/* After the target opened its cgroup: decides the route (asking systemd, asynchronously). */
void unit_cap_attach(struct reclaim_target *t);
/* The cgroup goes (detach, free): a restore in flight finishes on its own and removes the
 * record then (if it is still the one of that restore). */
void unit_cap_detach(struct reclaim_target *t);
/* At target_free(): detach, and what is left. */
void unit_cap_free(struct reclaim_target *t);
/* Writes value to the target's cap on cg by its route (restore: the original going back).
 * Through systemd it returns once the call is sent; a failure answer is logged and handled
 * as the direct path handles a failed write (a lowering restores, a restore is retried). */
int unit_cap_write(struct reclaim_target *t, const struct memcg *cg, uint64_t value, bool restore);
/* A call or check is in flight: the caller puts off its work (source: replayed when done;
 * -1: an episode step, rescheduled). */
bool unit_cap_busy(struct reclaim_target *t, int source);
/* target_record_remove() must wait for the restore in flight (then done by it). */
bool unit_cap_hold_record(struct reclaim_target *t);
/* "owner", "unit", "owner_error" for /v1/reclaim. */
int unit_cap_to_json(const struct reclaim_target *t, cJSON *o);

/* A target took over the record at record_path (target_record_load()): a leftover restore of
 * it still in flight leaves the record files to the target (which restores and removes them
 * itself; removed under it, its next record would be missing). */
void unit_cap_adopt_leftover(struct reclaim_ctx *ctx, const char *record_path);
/* At start, for a record left by a crash whose cgroup is a unit's own: asks systemd whether it
 * is, then restores the original through it (or directly, if not) and removes the record
 * files when that worked. 1: taken (asynchronous), 0: not a unit's cgroup (the caller writes
 * directly), <0: could not be sent. */
int unit_cap_restore_leftover(struct reclaim_ctx *ctx, const char *cgroup, uint64_t want, uint64_t was,
                              const char *record_path, const char *lowered_path);
