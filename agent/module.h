/* SPDX-License-Identifier: MIT */
#pragma once

/* The module contract. Each job (apiserver, identity, configsync, zkreg, podnet, reclaim) is a
 * `struct module` in the static table below; the manager makes one `struct module_instance` per
 * entry, starts them in dependency order and stops them in reverse.
 *
 *   init    parse and validate the module's config sections into mi->data. No side effects:
 *           --check-config and reload validation call it on a throwaway instance.
 *   start   begin work. Call module_set_state() as things happen and module_set_synced() once the
 *           first sync is done (or has failed and said why); READY=1 waits for it.
 *   reload  apply a new config (already validated by init on a throwaway instance), or refuse
 *           with a reason; refusing keeps the old config running.
 *   stop    begin draining. Return 0 if stopped, or 1 if still draining: then call
 *           module_stopped() when done; the manager gives up after stop-timeout.
 *   status  fill a JSON object for /v1/status with the module's key figures.
 *   free    release mi->data (also after a failed init).
 *
 * A module whose backend is not configured is DISABLED with a reason; that never fails the
 * daemon, and its routes (struct module.routes) answer 503 with that reason. Modules include only agent/ headers and their own; they meet through the pod store
 * and through facts published on the manager (manager_publish/manager_lookup).
 *
 * The instance tells its owner (the manager) what happened through the callback the owner put
 * in it (module_owner_fn), so this contract knows nothing of the manager. */

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "macro.h"

struct manager;
struct module_instance;

enum module_state {
        MODULE_DISABLED, /* not configured; reason says what to set */
        MODULE_STARTING, /* started, first sync not done */
        MODULE_RUNNING,  /* working */
        MODULE_DEGRADED, /* working with a problem (backend down, retrying); reason says what */
        MODULE_FAILED,   /* gave up; reason says why */
        MODULE_STOPPING,
        MODULE_STOPPED,
        _MODULE_STATE_MAX,
        _MODULE_STATE_INVALID = -EINVAL,
};

/* Who a module's route is for. While the module does not serve the route, the core answers it
 * (manager-api.c): a caller the route would refuse gets the refusal it would get (403), never
 * the module's state; anyone else 503 with the state and its reason. */
enum module_route_audience {
        MODULE_ROUTE_HOST,       /* root in no pod only (a privileged route) */
        MODULE_ROUTE_PRIVILEGED, /* root and socket-group only (struct api_route.privileged) */
        MODULE_ROUTE_OWN,        /* and a pod, for its own entries (caller_may_read_own()) */
        MODULE_ROUTE_WORKLOAD,   /* and a pod or a configured service, for itself */
        MODULE_ROUTE_PUBLIC,     /* anyone */
};

/* One route a module owns, as it registers it with api_add_routes(). */
struct module_route {
        const char *method;
        const char *pattern;
        enum module_route_audience audience;
};

struct module {
        const char *name;
        /* Every route of the local API the module serves, whether it serves them now or not;
         * NULL-terminated (by a NULL method); NULL: none. The module registers them while it
         * runs; where it has not registered one (whatever its state), and while it is DISABLED
         * or STOPPED, the core answers them: 503 {"error": "<name> is <state>: <reason>",
         * "code": 503, "module", "state", "reason"} (docs/api.md). */
        const struct module_route *routes;
        const char *const *deps; /* names of modules that must start first; NULL-terminated */
        int (*init)(struct module_instance *mi, struct config *c, char **ret_error);
        int (*start)(struct module_instance *mi);
        int (*reload)(struct module_instance *mi, struct config *c, char **ret_error);
        int (*stop)(struct module_instance *mi);
        int (*status)(struct module_instance *mi, cJSON *obj);
        void (*free)(struct module_instance *mi);
        /* The Linux capabilities (CAP_TO_MASK64 bits, agent/lib/caps.h) the module needs with the
         * settings init() parsed from c; NULL: none. Asked once before any module starts: the
         * agent drops every capability no module needs ([agent] drop-capabilities). */
        uint64_t (*capabilities)(struct module_instance *mi, const struct config *c);
        /* Whether the settings init() parsed from c give the module work, i.e. it will not be
         * DISABLED for want of configuration (--check-config lists these as enabled). */
        bool (*configured)(const struct module_instance *mi, const struct config *c);
        /* Optional, for --check-config, on the instance init() made and only if configured:
         * what start() would refuse about this host and needs no server (a socket directory
         * others can write to...), judged by the very function start() uses. On a problem
         * -EINVAL with *ret_error = "FILE:LINE: key value: reason". */
        int (*check)(const struct module_instance *mi, const struct config *c, char **ret_error);
};

/* --check-config's judgement of the directory socket_path (the value of [section] key) goes in:
 * socket_trust_dir_check(), the rule start applies; a missing directory passes (start makes
 * it). */
int module_check_socket_dir(const struct config *c, const char *section, const char *key, const char *socket_path,
                            char **ret_error);

/* What an instance tells its owner. */
enum module_event {
        MODULE_EVENT_STATE,   /* the state or its reason changed (module_set_state()) */
        MODULE_EVENT_SYNCED,  /* the first sync is done (module_set_synced(), once) */
        MODULE_EVENT_STOPPED, /* a module that returned 1 from stop() has drained (module_stopped(),
                               * after the STATE event of its move to STOPPED) */
};

/* Called after the instance changed (its fields already say the new state); never for a call
 * that changed nothing. It may read the instance but not free it. */
typedef void (*module_owner_fn)(struct module_instance *mi, enum module_event event, void *userdata);

struct module_instance {
        const struct module *module;
        struct manager *manager; /* for the module's own use; this contract never touches it */
        void *data; /* the module's own state, owned by it */
        enum module_state state;
        char *reason; /* why DISABLED/DEGRADED/FAILED, else NULL */
        bool synced;  /* first sync done (or reported why not) */
        usec_t state_since; /* CLOCK_REALTIME of the last transition */
        bool started;       /* start() was called and succeeded */
        module_owner_fn owner_fn; /* set by the owner; NULL: nobody is told (a throwaway instance) */
        void *owner_userdata;
};

/* The static table: every module pinion has, in a fixed order. */
extern const struct module *const module_table[];
extern const unsigned module_table_size;

const char *module_state_to_string(enum module_state s);
enum module_state module_state_from_string(const char *s);

/* Orders table[0..n) so every module comes after its dependencies. ret_order gets indexes.
 * -ELOOP on a cycle and -ENOENT on an unknown dependency, with *ret_error saying which. */
int module_order(const struct module *const *table, unsigned n, unsigned *ret_order, char **ret_error);

/* Sets the state and reason (reason may be NULL), logs the transition at info (warning for
 * DEGRADED/FAILED) with MODULE=, and tells the owner (MODULE_EVENT_STATE): for the manager,
 * STATUS=, metrics, readiness. */
void module_set_state(struct module_instance *mi, enum module_state state, const char *reason_format, ...)
        _printf_(3, 4);
/* The first sync is done: counts toward READY=1 (MODULE_EVENT_SYNCED). Idempotent. */
void module_set_synced(struct module_instance *mi);
/* A module that returned 1 from stop() calls this when it has drained: the state becomes
 * STOPPED, then the owner hears MODULE_EVENT_STOPPED. */
void module_stopped(struct module_instance *mi);
/* True if the state is one that /v1/health treats as healthy. */
bool module_state_is_healthy(enum module_state s);
