/* SPDX-License-Identifier: MIT */
/* zkreg's registration plan over any facts: whatever a registration wants and knows, the plan
 * never deletes without a member, creates over a member or a lost create, rewrites a member
 * under another path, writes without a session or with an operation in flight, shows a
 * registered member it does not have, or forgets a registration with anything left in
 * ZooKeeper; a check adopts at most one member (ours: our session, our endpoint, nobody
 * else's); flap damping holds back at most a minute; parents are created below the allowed
 * prefix only. Input, one item per line ("-" for none):
 *   goal inflight state flags now not_before error_until drain_until
 *   parent / znode / written / alive / stopping / floor
 *   session host port
 *   flaps last_down damping was want
 *   read owner claimed host port         (any number of lines: the members a check read)
 * flags: 1 pod gone, 2 lost create, 4 connected, 8 shutting down, 16 an error shown. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "reg-plan.h"
#include "strv.h"

#define MAX_MEMBERS 64

static char *next_line(char **save) {
        char *l = strsep(save, "\n");
        return l && !streq(l, "-") ? l : NULL;
}

static bool under(const char *znode, const char *parent) {
        size_t n = parent ? strlen(parent) : 0;
        return znode && parent && strncmp(znode, parent, n) == 0 && znode[n] == '/';
}

static void check_plan(const struct reg_facts *f) {
        struct reg_next n;
        enum reg_waiting w;
        enum reg_state s;

        reg_plan_next(f, &n);
        reg_plan_state(f, &s, &w);
        if (!reg_plan_action_to_string(n.action) || !reg_plan_state_to_string(s) || w < 0 || w >= _REG_WAITING_MAX)
                abort();
        enum reg_goal goal = n.drain_over ? REG_GOAL_NONE : f->goal;
        const char *desired = reg_plan_desired(f, goal);
        if (n.drain_over && f->goal != REG_GOAL_STOPPING)
                abort();
        if (f->inflight != REG_OP_NONE && n.action != REG_ACTION_NONE)
                abort();
        if (!f->connected && n.action != REG_ACTION_NONE && n.action != REG_ACTION_FREE &&
            n.action != REG_ACTION_WAIT_SESSION)
                abort();
        if (n.write && (f->shutting_down || n.action == REG_ACTION_CHECK || n.action == REG_ACTION_WAIT))
                abort();
        switch (n.action) {
        case REG_ACTION_FREE:
                if (!f->pod_gone || f->znode || f->lost_create)
                        abort();
                break;
        case REG_ACTION_CHECK:
                if (!f->lost_create)
                        abort();
                break;
        case REG_ACTION_DELETE:
                if (!f->znode || f->lost_create || (desired && under(f->znode, f->parent)))
                        abort();
                break;
        case REG_ACTION_CREATE:
                if (!desired || f->znode || f->lost_create)
                        abort();
                break;
        case REG_ACTION_SET:
                if (!desired || !under(f->znode, f->parent) || streq_ptr(f->written, desired))
                        abort();
                break;
        case REG_ACTION_WAIT:
                if (n.wake <= f->now)
                        abort();
                break;
        default:
                break;
        }
        /* registered or stopping without an operation in flight: our member, under the path */
        if ((s == REG_REGISTERED || s == REG_STOPPING) && f->inflight == REG_OP_NONE && !under(f->znode, f->parent))
                abort();
        if (s == REG_UNREADY && (f->goal != REG_GOAL_NONE || f->znode || f->lost_create || f->inflight != REG_OP_NONE))
                abort();
        if (s == REG_DEREGISTERING && f->inflight != REG_OP_DELETE)
                abort();
        if (w == REG_WAITING_SUSPENDED && (f->has_error || f->connected))
                abort();
        if (reg_plan_urgent(f) && !f->znode)
                abort();
}

static void check_check(const struct reg_check_member *m, size_t n, int64_t session, const char *host,
                        unsigned port) {
        enum reg_verdict v[MAX_MEMBERS];
        bool failed = false;
        size_t adopted = 0;

        bool complete = reg_plan_check(m, n, session, host, port, v);
        for (size_t i = 0; i < n; i++) {
                if (!reg_plan_verdict_to_string(v[i]))
                        abort();
                failed = failed || m[i].read == REG_READ_FAILED;
                if (v[i] == REG_VERDICT_ADOPT || v[i] == REG_VERDICT_DELETE) {
                        if (m[i].read != REG_READ_OK || m[i].claimed || m[i].owner != session || !host ||
                            !m[i].host || !streq(m[i].host, host) || m[i].port != port)
                                abort();
                        /* the first one of ours is adopted, only later ones deleted */
                        if ((v[i] == REG_VERDICT_ADOPT) != (adopted == 0))
                                abort();
                        adopted++;
                }
                if (v[i] == REG_VERDICT_CLAIMED && !m[i].claimed)
                        abort();
        }
        if (complete == failed)
                abort();
}

static void check_parents(const char *parent, const char *floor) {
        char **l = NULL;
        size_t prev = 0;

        if (reg_plan_parents(parent, floor, &l) < 0)
                return;
        STRV_FOREACH(p, l) {
                size_t len = strlen(*p);
                /* ancestors of parent (or parent), whole segments, below floor, in order */
                if (len <= prev || len <= (floor ? strlen(floor) : 0) || strncmp(*p, parent, len) != 0 ||
                    (parent[len] != 0 && parent[len] != '/'))
                        abort();
                prev = len;
        }
        if (l && !streq(l[strv_length(l) - 1], parent))
                abort();
        strv_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* A text format: an embedded NUL ends the input. */
        char *text = strndup((const char *) data, size);
        if (!text)
                return 0;

        char *save = text;
        char *head = next_line(&save);
        unsigned goal = 0, inflight = 0, state = 0, flags = 0;
        uint64_t now = 0, not_before = 0, error_until = 0, drain_until = 0;
        if (head)
                (void) sscanf(head, "%u %u %u %u %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &goal, &inflight, &state,
                              &flags, &now, &not_before, &error_until, &drain_until);
        struct reg_facts f = {
                .goal = goal % _REG_GOAL_MAX,
                .inflight = inflight % _REG_OP_MAX,
                .state = state % _REG_STATE_MAX,
                .pod_gone = flags & 1,
                .lost_create = flags & 2,
                .connected = flags & 4,
                .shutting_down = flags & 8,
                .has_error = flags & 16,
                .now = now,
                .not_before = not_before,
                .error_until = error_until,
                .drain_until = drain_until,
        };
        f.parent = next_line(&save);
        f.znode = next_line(&save);
        f.written = next_line(&save);
        f.alive = next_line(&save);
        f.stopping = next_line(&save);
        /* A wanted goal comes with its data (the registration builds it before it wants it). */
        if ((f.goal == REG_GOAL_ALIVE && !f.alive) || (f.goal == REG_GOAL_STOPPING && !f.stopping))
                f.goal = REG_GOAL_NONE;
        check_plan(&f);

        const char *floor = next_line(&save);
        if (f.parent)
                check_parents(f.parent, floor);

        char *lost = next_line(&save), host[64] = "";
        int64_t session = 0;
        unsigned port = 0;
        if (lost)
                (void) sscanf(lost, "%" SCNd64 " %63s %u", &session, host, &port);

        char *flap = next_line(&save);
        if (flap) {
                struct reg_flaps fl = {};
                uint64_t damping = 0;
                unsigned was = 0, want = 0;
                (void) sscanf(flap, "%u %" SCNu64 " %" SCNu64 " %u %u", &fl.count, &fl.last_down, &damping, &was, &want);
                usec_t hold = reg_plan_flap(&fl, was, want, now, damping);
                if (hold != 0 && (hold <= now || hold - fl.last_down > REG_FLAP_PENALTY_MAX))
                        abort();
        }

        struct reg_check_member members[MAX_MEMBERS];
        char hosts[MAX_MEMBERS][64];
        size_t n = 0;
        for (char *l; n < MAX_MEMBERS && (l = strsep(&save, "\n"));) {
                unsigned read = 0, claimed = 0, mport = 0;
                int64_t owner = 0;
                hosts[n][0] = 0;
                if (sscanf(l, "%u %" SCNd64 " %u %63s %u", &read, &owner, &claimed, hosts[n], &mport) < 3)
                        continue;
                members[n] = (struct reg_check_member) {
                        .read = read % 3,
                        .owner = owner,
                        .claimed = claimed,
                        .host = hosts[n][0] && !streq(hosts[n], "-") ? hosts[n] : NULL,
                        .port = mport,
                };
                n++;
        }
        check_check(members, n, session, host[0] && !streq(host, "-") ? host : NULL, port);
        free(text);
        return 0;
}
