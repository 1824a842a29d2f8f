/* SPDX-License-Identifier: MIT */
/* The pod address pool and its state file. See ipam.h. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "ipam.h"
#include "json.h"

#define IPAM_MAX_STATE (64u << 20)

struct quarantined {
        uint32_t addr;
        usec_t released;
};

struct ipam {
        char *cidr;
        uint32_t network, broadcast; /* host byte order */
        unsigned prefix;
        usec_t quarantine;
        char *state_file;

        struct ipam_allocation *allocs;
        size_t n_allocs;
        struct quarantined *quarantined;
        size_t n_quarantined;
        char **deleting; /* host interface names released, deletion not confirmed */
        size_t n_deleting;
        uint32_t cursor; /* the last address handed out */
        int not_durable; /* the last write was renamed into place but its directory fsync failed */
};

void ipam_format_addr(uint32_t addr, char buf[16]) {
        struct in_addr in = { .s_addr = htonl(addr) };
        if (!inet_ntop(AF_INET, &in, buf, 16))
                buf[0] = '\0';
}

static int parse_addr(const char *s, uint32_t *ret) {
        struct in_addr in;
        if (!s || inet_pton(AF_INET, s, &in) != 1)
                return -EINVAL;
        *ret = ntohl(in.s_addr);
        return 0;
}

int ipam_parse_cidr(const char *cidr, uint32_t *ret_network, unsigned *ret_prefix) {
        char addr[INET_ADDRSTRLEN + 1], extra;
        unsigned prefix;
        uint32_t a;

        if (!cidr || sscanf(cidr, "%16[0-9.]/%u%c", addr, &prefix, &extra) != 2 || prefix < 8 || prefix > 30 ||
            parse_addr(addr, &a) < 0)
                return -EINVAL;
        *ret_network = a & (UINT32_MAX << (32 - prefix));
        *ret_prefix = prefix;
        return 0;
}

static void allocation_done(struct ipam_allocation *a) {
        free(a->container_id);
        free(a->ifname);
        free(a->netns);
        free(a->host_ifname);
        free(a->pod_namespace);
        free(a->pod_name);
        free(a->pod_uid);
        free(a->network);
}

struct ipam *ipam_free(struct ipam *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_allocs; i++)
                allocation_done(&p->allocs[i]);
        free(p->allocs);
        free(p->quarantined);
        for (size_t i = 0; i < p->n_deleting; i++)
                free(p->deleting[i]);
        free(p->deleting);
        free(p->cidr);
        free(p->state_file);
        free(p);
        return NULL;
}

static bool in_pool(const struct ipam *p, uint32_t a) {
        return a > p->network && a < p->broadcast;
}

static int set_string(char **dst, const char *v) {
        char *c = NULL;
        if (v && !(c = strdup(v)))
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

/* ---- the state file ---- */

static const char *opt_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int load_error(char **ret_error, const char *what) {
        if (ret_error) {
                free(*ret_error);
                *ret_error = strdup(what);
        }
        return -EBADMSG;
}

static int ipam_load(struct ipam *p, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *list, *item, *v;
        size_t size = 0;
        int r;

        r = read_file_full(p->state_file, IPAM_MAX_STATE, &text, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        root = cJSON_ParseWithLength(text, size);
        if (!cJSON_IsObject(root))
                return load_error(ret_error, "not a JSON object");
        v = cJSON_GetObjectItemCaseSensitive(root, "version");
        if (!cJSON_IsNumber(v) || v->valueint != 1)
                return load_error(ret_error, "unknown version (expected 1)");

        list = cJSON_GetObjectItemCaseSensitive(root, "allocations");
        if (!cJSON_IsArray(list))
                return load_error(ret_error, "allocations is not an array");
        size_t n = (size_t) cJSON_GetArraySize(list);
        p->allocs = calloc(MAX(n, 1u), sizeof(struct ipam_allocation));
        if (!p->allocs)
                return -ENOMEM;
        cJSON_ArrayForEach(item, list) {
                struct ipam_allocation a = {};
                const cJSON *since = cJSON_GetObjectItemCaseSensitive(item, "since");
                if (parse_addr(opt_string(item, "ip"), &a.addr) < 0 || isempty(opt_string(item, "containerID")) ||
                    isempty(opt_string(item, "ifname")) || isempty(opt_string(item, "hostIfname")))
                        return load_error(ret_error, "an allocation lacks ip, containerID, ifname or hostIfname");
                if (ipam_find(p, opt_string(item, "containerID"), opt_string(item, "ifname")) || ipam_find_addr(p, a.addr))
                        return load_error(ret_error, "two allocations for one attachment or one address");
                if (set_string(&a.container_id, opt_string(item, "containerID")) < 0 ||
                    set_string(&a.ifname, opt_string(item, "ifname")) < 0 ||
                    set_string(&a.netns, opt_string(item, "netns")) < 0 ||
                    set_string(&a.host_ifname, opt_string(item, "hostIfname")) < 0 ||
                    set_string(&a.pod_namespace, opt_string(item, "namespace")) < 0 ||
                    set_string(&a.pod_name, opt_string(item, "name")) < 0 ||
                    set_string(&a.pod_uid, opt_string(item, "uid")) < 0 ||
                    set_string(&a.network, opt_string(item, "network")) < 0) {
                        allocation_done(&a);
                        return -ENOMEM;
                }
                const cJSON *mtu = cJSON_GetObjectItemCaseSensitive(item, "mtu");
                if (mtu && (!cJSON_IsNumber(mtu) || mtu->valuedouble < 0 || mtu->valuedouble > 65535)) {
                        allocation_done(&a);
                        return load_error(ret_error, "an allocation's mtu is not a number from 0 to 65535");
                }
                a.mtu = mtu ? (unsigned) mtu->valuedouble : 0;
                const cJSON *ino = cJSON_GetObjectItemCaseSensitive(item, "netnsInode");
                a.netns_ino = cJSON_IsNumber(ino) && ino->valuedouble > 0 ? (uint64_t) ino->valuedouble : 0;
                a.since = cJSON_IsNumber(since) && since->valuedouble > 0 ? (usec_t) (since->valuedouble * USEC_PER_SEC) : 0;
                p->allocs[p->n_allocs++] = a;
        }

        list = cJSON_GetObjectItemCaseSensitive(root, "quarantine");
        if (list && !cJSON_IsArray(list))
                return load_error(ret_error, "quarantine is not an array");
        n = list ? (size_t) cJSON_GetArraySize(list) : 0;
        p->quarantined = calloc(MAX(n, 1u), sizeof(struct quarantined));
        if (!p->quarantined)
                return -ENOMEM;
        cJSON_ArrayForEach(item, list) {
                const cJSON *rel = cJSON_GetObjectItemCaseSensitive(item, "releasedAt");
                uint32_t a;
                if (parse_addr(opt_string(item, "ip"), &a) < 0 || !cJSON_IsNumber(rel))
                        return load_error(ret_error, "a quarantine entry lacks ip or releasedAt");
                p->quarantined[p->n_quarantined++] = (struct quarantined) {
                        .addr = a,
                        .released = rel->valuedouble > 0 ? (usec_t) (rel->valuedouble * USEC_PER_SEC) : 0,
                };
        }
        list = cJSON_GetObjectItemCaseSensitive(root, "deleting");
        if (list && !cJSON_IsArray(list))
                return load_error(ret_error, "deleting is not an array");
        n = list ? (size_t) cJSON_GetArraySize(list) : 0;
        p->deleting = calloc(MAX(n, 1u), sizeof(char *));
        if (!p->deleting)
                return -ENOMEM;
        cJSON_ArrayForEach(item, list) {
                if (!cJSON_IsString(item) || isempty(item->valuestring) || strlen(item->valuestring) > 15)
                        return load_error(ret_error, "a deleting entry is not an interface name");
                if (!(p->deleting[p->n_deleting] = strdup(item->valuestring)))
                        return -ENOMEM;
                p->n_deleting++;
        }
        uint32_t cursor;
        if (parse_addr(opt_string(root, "cursor"), &cursor) >= 0 && in_pool(p, cursor))
                p->cursor = cursor;
        return 0;
}

static bool add_opt(cJSON *o, const char *key, const char *v) {
        return !v || cJSON_AddStringToObject(o, key, v);
}

static cJSON *allocation_to_json(const struct ipam_allocation *a) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        char ip[16];

        ipam_format_addr(a->addr, ip);
        if (!o || !cJSON_AddStringToObject(o, "ip", ip) || !cJSON_AddStringToObject(o, "containerID", a->container_id) ||
            !cJSON_AddStringToObject(o, "ifname", a->ifname) || !add_opt(o, "netns", a->netns) ||
            !cJSON_AddStringToObject(o, "hostIfname", a->host_ifname) || !add_opt(o, "namespace", a->pod_namespace) ||
            !add_opt(o, "name", a->pod_name) || !add_opt(o, "uid", a->pod_uid) || !add_opt(o, "network", a->network) ||
            (a->mtu > 0 && !cJSON_AddNumberToObject(o, "mtu", a->mtu)) ||
            (a->netns_ino > 0 && !cJSON_AddNumberToObject(o, "netnsInode", (double) a->netns_ino)) ||
            !cJSON_AddNumberToObject(o, "since", (double) a->since / USEC_PER_SEC))
                return NULL;
        return TAKE_PTR(o);
}

static int ipam_save(struct ipam *p) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        _cleanup_free_ char *text = NULL;
        cJSON *list, *q, *d;
        char ip[16];

        if (!p->state_file)
                return 0;
        ipam_format_addr(p->cursor, ip);
        if (!root || !cJSON_AddNumberToObject(root, "version", 1) || !cJSON_AddStringToObject(root, "cidr", p->cidr) ||
            !cJSON_AddStringToObject(root, "cursor", ip) || !(list = cJSON_AddArrayToObject(root, "allocations")) ||
            !(q = cJSON_AddArrayToObject(root, "quarantine")) || !(d = cJSON_AddArrayToObject(root, "deleting")))
                return -ENOMEM;
        for (size_t i = 0; i < p->n_deleting; i++)
                if (!cJSON_AddItemToArray(d, cJSON_CreateString(p->deleting[i])))
                        return -ENOMEM;
        for (size_t i = 0; i < p->n_allocs; i++)
                if (!cJSON_AddItemToArray(list, allocation_to_json(&p->allocs[i])))
                        return -ENOMEM;
        for (size_t i = 0; i < p->n_quarantined; i++) {
                cJSON *e = cJSON_CreateObject();
                ipam_format_addr(p->quarantined[i].addr, ip);
                if (!e || !cJSON_AddItemToArray(q, e) || !cJSON_AddStringToObject(e, "ip", ip) ||
                    !cJSON_AddNumberToObject(e, "releasedAt", (double) p->quarantined[i].released / USEC_PER_SEC))
                        return cJSON_Delete(e), -ENOMEM;
        }
        text = cJSON_Print(root);
        if (!text)
                return -ENOMEM;
        bool renamed = false;
        int r = write_file_atomic_full(p->state_file, text, strlen(text), 0600, (uid_t) -1, (gid_t) -1, &renamed);
        if (r < 0 && renamed) {
                /* Every reader (a restart included) sees the new state already: rolling back in
                 * memory would make memory and disk disagree. Only a power loss could lose it. */
                p->not_durable = r;
                return 0;
        }
        return r;
}

int ipam_take_not_durable(struct ipam *p) {
        int r = p ? p->not_durable : 0;
        if (p)
                p->not_durable = 0;
        return r;
}

int ipam_new(const char *cidr, usec_t quarantine, const char *state_file, struct ipam **ret, char **ret_error) {
        _cleanup_(ipam_freep) struct ipam *p = NULL;
        int r;

        p = calloc(1, sizeof(struct ipam));
        if (!p)
                return -ENOMEM;
        r = ipam_parse_cidr(cidr, &p->network, &p->prefix);
        if (r < 0)
                return load_error(ret_error, "invalid pod CIDR"), -EINVAL;
        p->broadcast = p->network | ~(UINT32_MAX << (32 - p->prefix));
        p->quarantine = quarantine;
        p->cursor = p->network;
        if (asprintf(&p->cidr, "%s", cidr) < 0)
                return -ENOMEM;
        if (state_file) {
                p->state_file = strdup(state_file);
                if (!p->state_file)
                        return -ENOMEM;
                r = ipam_load(p, ret_error);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

void ipam_set_quarantine(struct ipam *p, usec_t quarantine) {
        p->quarantine = quarantine;
}

const char *ipam_cidr(const struct ipam *p) {
        return p->cidr;
}

const struct ipam_allocation *ipam_find(const struct ipam *p, const char *container_id, const char *ifname) {
        for (size_t i = 0; p && container_id && ifname && i < p->n_allocs; i++)
                if (streq(p->allocs[i].container_id, container_id) && streq(p->allocs[i].ifname, ifname))
                        return &p->allocs[i];
        return NULL;
}

const struct ipam_allocation *ipam_find_addr(const struct ipam *p, uint32_t addr) {
        for (size_t i = 0; p && i < p->n_allocs; i++)
                if (p->allocs[i].addr == addr)
                        return &p->allocs[i];
        return NULL;
}

static bool quarantined(const struct ipam *p, uint32_t addr, usec_t now) {
        for (size_t i = 0; i < p->n_quarantined; i++)
                if (p->quarantined[i].addr == addr && p->quarantined[i].released + p->quarantine > now)
                        return true;
        return false;
}

/* Drops quarantine entries that have expired (or that the clock jumped far behind). */
static void quarantine_expire(struct ipam *p, usec_t now) {
        size_t j = 0;
        for (size_t i = 0; i < p->n_quarantined; i++)
                if (p->quarantined[i].released + p->quarantine > now &&
                    p->quarantined[i].released <= now + p->quarantine)
                        p->quarantined[j++] = p->quarantined[i];
        p->n_quarantined = j;
}

/* FNV-1a: stable across restarts and builds, so a host interface name can be found again. */
static uint32_t fnv1a(const char *a, const char *b, unsigned salt) {
        uint32_t h = 2166136261u;
        for (const char *s = a; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        h = (h ^ '/') * 16777619u;
        for (const char *s = b; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        return (h ^ salt) * 16777619u;
}

int ipam_host_ifname(const struct ipam *p, const char *container_id, const char *ifname, char ret[16]) {
        const struct ipam_allocation *a = ipam_find(p, container_id, ifname);

        if (a) {
                snprintf(ret, 16, "%s", a->host_ifname);
                return 0;
        }
        for (unsigned salt = 0; salt < 64; salt++) {
                bool taken = false;
                snprintf(ret, 16, "pin%08x", fnv1a(container_id, ifname, salt));
                for (size_t i = 0; !taken && p && i < p->n_allocs; i++)
                        taken = streq(p->allocs[i].host_ifname, ret);
                for (size_t i = 0; !taken && p && i < p->n_deleting; i++)
                        taken = streq(p->deleting[i], ret);
                if (!taken)
                        return 0;
        }
        return -EADDRINUSE;
}

static int owner_apply(struct ipam_allocation *a, const struct ipam_owner *o) {
        if (!o)
                return 0;
        if (set_string(&a->netns, o->netns) < 0 || set_string(&a->host_ifname, o->host_ifname) < 0 ||
            set_string(&a->pod_namespace, o->pod_namespace) < 0 || set_string(&a->pod_name, o->pod_name) < 0 ||
            set_string(&a->pod_uid, o->pod_uid) < 0 || set_string(&a->network, o->network) < 0)
                return -ENOMEM;
        a->mtu = o->mtu;
        a->netns_ino = o->netns_ino;
        return 0;
}

int ipam_allocate(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                  usec_t now, const struct ipam_allocation **ret) {
        struct ipam_allocation *existing = (struct ipam_allocation *) ipam_find(p, container_id, ifname);
        struct ipam_allocation a = {};
        uint64_t size = (uint64_t) p->broadcast - p->network - 1;
        uint32_t candidate = p->cursor, old_cursor = p->cursor;
        bool found = false;
        int r;

        if (!owner || isempty(owner->host_ifname))
                return -EINVAL;
        if (existing) {
                /* A repeated ADD (the runtime retrying after a failure): same address, nothing
                 * changed yet (ipam_update_owner() once the repeated ADD worked). */
                *ret = existing;
                return 0;
        }

        quarantine_expire(p, now);
        for (uint64_t tries = 0; tries < size; tries++) {
                candidate = candidate + 1 >= p->broadcast ? p->network + 1 : candidate + 1;
                if (!ipam_find_addr(p, candidate) && !quarantined(p, candidate, now)) {
                        found = true;
                        break;
                }
        }
        if (!found)
                return -ENOSPC;

        struct ipam_allocation *grown = realloc(p->allocs, (p->n_allocs + 1) * sizeof(struct ipam_allocation));
        if (!grown)
                return -ENOMEM;
        p->allocs = grown;
        a.addr = candidate;
        a.since = now;
        if (set_string(&a.container_id, container_id) < 0 || set_string(&a.ifname, ifname) < 0 ||
            owner_apply(&a, owner) < 0) {
                allocation_done(&a);
                return -ENOMEM;
        }
        p->allocs[p->n_allocs++] = a;
        p->cursor = candidate;
        r = ipam_save(p);
        if (r < 0) {
                /* Not on disk: not handed out. */
                allocation_done(&p->allocs[--p->n_allocs]);
                p->cursor = old_cursor;
                return r;
        }
        *ret = &p->allocs[p->n_allocs - 1];
        return 1;
}

int ipam_update_owner(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner) {
        struct ipam_allocation *existing = (struct ipam_allocation *) ipam_find(p, container_id, ifname);
        struct ipam_allocation updated = {}, old;
        int r;

        if (!existing)
                return -ENOENT;
        if (!owner || isempty(owner->host_ifname))
                return -EINVAL;
        /* A copy first: a failure half-way leaves the allocation as it was. */
        updated.addr = existing->addr;
        updated.since = existing->since;
        if (set_string(&updated.container_id, existing->container_id) < 0 ||
            set_string(&updated.ifname, existing->ifname) < 0 || owner_apply(&updated, owner) < 0) {
                allocation_done(&updated);
                return -ENOMEM;
        }
        old = *existing;
        *existing = updated;
        r = ipam_save(p);
        if (r < 0) {
                allocation_done(existing);
                *existing = old;
                return r;
        }
        allocation_done(&old);
        return 0;
}

int ipam_release(struct ipam *p, const char *container_id, const char *ifname, usec_t now, bool link_pending) {
        const struct ipam_allocation *found = ipam_find(p, container_id, ifname);
        struct ipam_allocation gone;
        size_t i;
        int r;

        if (!found)
                return 0;
        i = (size_t) (found - p->allocs);
        struct quarantined *grown = realloc(p->quarantined, (p->n_quarantined + 1) * sizeof(struct quarantined));
        if (!grown)
                return -ENOMEM;
        p->quarantined = grown;
        char **grown_d = realloc(p->deleting, (p->n_deleting + 1) * sizeof(char *));
        if (!grown_d)
                return -ENOMEM;
        p->deleting = grown_d;
        if (link_pending) {
                p->deleting[p->n_deleting] = strdup(found->host_ifname);
                if (!p->deleting[p->n_deleting])
                        return -ENOMEM;
                p->n_deleting++;
        }

        gone = p->allocs[i];
        memmove(&p->allocs[i], &p->allocs[i + 1], (p->n_allocs - i - 1) * sizeof(struct ipam_allocation));
        p->n_allocs--;
        quarantine_expire(p, now);
        if (p->quarantine > 0)
                p->quarantined[p->n_quarantined++] = (struct quarantined) { .addr = gone.addr, .released = now };

        r = ipam_save(p);
        if (r < 0) {
                /* Put it back where it was: the file still says it is allocated. */
                if (p->quarantine > 0)
                        p->n_quarantined--;
                if (link_pending)
                        free(p->deleting[--p->n_deleting]);
                memmove(&p->allocs[i + 1], &p->allocs[i], (p->n_allocs - i) * sizeof(struct ipam_allocation));
                p->allocs[i] = gone;
                p->n_allocs++;
                return r;
        }
        allocation_done(&gone);
        return 1;
}

int ipam_link_deleted(struct ipam *p, const char *host_ifname) {
        for (size_t i = 0; i < p->n_deleting; i++) {
                if (!streq(p->deleting[i], host_ifname))
                        continue;
                char *name = p->deleting[i];
                memmove(&p->deleting[i], &p->deleting[i + 1], (p->n_deleting - i - 1) * sizeof(char *));
                p->n_deleting--;
                int r = ipam_save(p);
                if (r < 0) {
                        memmove(&p->deleting[i + 1], &p->deleting[i], (p->n_deleting - i) * sizeof(char *));
                        p->deleting[i] = name;
                        p->n_deleting++;
                        return r;
                }
                free(name);
                return 1;
        }
        return 0;
}

size_t ipam_n_deleting(const struct ipam *p) {
        return p ? p->n_deleting : 0;
}

const char *ipam_deleting(const struct ipam *p, size_t i) {
        return p && i < p->n_deleting ? p->deleting[i] : NULL;
}

size_t ipam_count(const struct ipam *p) {
        return p ? p->n_allocs : 0;
}

const struct ipam_allocation *ipam_get(const struct ipam *p, size_t i) {
        return p && i < p->n_allocs ? &p->allocs[i] : NULL;
}

void ipam_usage(const struct ipam *p, usec_t now, struct ipam_usage *ret) {
        struct ipam_usage u = { .size = (uint64_t) p->broadcast - p->network - 1 };

        for (size_t i = 0; i < p->n_allocs; i++) {
                if (in_pool(p, p->allocs[i].addr))
                        u.allocated++;
                else
                        u.foreign++;
        }
        for (size_t i = 0; i < p->n_quarantined; i++)
                if (in_pool(p, p->quarantined[i].addr) && !ipam_find_addr(p, p->quarantined[i].addr) &&
                    quarantined(p, p->quarantined[i].addr, now))
                        u.quarantined++;
        u.free = u.size - MIN(u.size, u.allocated + u.quarantined);
        *ret = u;
}

cJSON *ipam_to_json(const struct ipam *p, usec_t now) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        struct ipam_usage u;
        cJSON *list;

        ipam_usage(p, now, &u);
        if (!o || !cJSON_AddStringToObject(o, "podCIDR", p->cidr) || !cJSON_AddNumberToObject(o, "size", (double) u.size) ||
            !cJSON_AddNumberToObject(o, "allocated", (double) u.allocated) ||
            !cJSON_AddNumberToObject(o, "quarantined", (double) u.quarantined) ||
            !cJSON_AddNumberToObject(o, "free", (double) u.free) ||
            !cJSON_AddNumberToObject(o, "outsidePool", (double) u.foreign) ||
            !cJSON_AddNumberToObject(o, "interfacesBeingDeleted", (double) p->n_deleting) ||
            !(list = cJSON_AddArrayToObject(o, "allocations")))
                return NULL;
        for (size_t i = 0; i < p->n_allocs; i++) {
                cJSON *a = allocation_to_json(&p->allocs[i]);
                if (!a || !cJSON_AddItemToArray(list, a))
                        return cJSON_Delete(a), NULL;
                cJSON_DeleteItemFromObjectCaseSensitive(a, "since");
                if (!json_add_time(a, "since", p->allocs[i].since))
                        return NULL;
        }
        return TAKE_PTR(o);
}
