/* SPDX-License-Identifier: MIT */
/* The pool's files: a snapshot (allocations.json) and a journal of the changes made since
 * (allocations.journal), so that a change costs one appended line, not a rewrite of the pool.
 *
 * Journal line: "<crc32, 8 hex digits> <JSON record>\n", the record carrying "seq" (one more
 * than the record before; the snapshot's "journalSeq" is the last one it contains). A change is
 * acknowledged once its line is written and fdatasync'd: at once, or (deferred: ipam_defer_sync())
 * by the syncer thread while the caller wires the pod, the caller waiting for that flush
 * (ipam_sync()) before it answers. Releases and linkDeleted records may be left to the next
 * flush (ipam_lazy_sync()): one a power loss takes back leaves an allocation that reconciliation
 * releases again, and the next allocation's flush carries every release before it, so an address
 * is never handed out twice. A written line survives a kill -9 (it is in the page cache); the
 * flush is for a power loss, which also takes the veths the lines describe. Lines a power loss
 * cuts are the last ones: the filesystem makes a file's appended bytes part of it only once they
 * are on disk. A kill -9 or power loss mid-write leaves
 * a last line without its newline or with a wrong checksum: that change was never acknowledged,
 * and the load drops it. A damaged line anywhere else is corruption: the load refuses the state
 * (nothing is overwritten; the operator decides).
 *
 * Once the journal holds more records than the state has entries (at least 1,024), the whole
 * state is written as a new snapshot (fs_write_file_atomic) and the journal is emptied: an amortised
 * O(1) per change. A crash between the two leaves records the snapshot already holds: their seq
 * says so and the load skips them. A version 1 snapshot (before the journal) loads as it is. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs.h"
#include "ipam-internal.h"
#include "json.h"
#include "state-version.h"
#include "syncer.h"

/* allocations.json: {"version": 2, ...}; 1 is the snapshot from before the journal. */
#define IPAM_STATE_VERSION 2u
#define IPAM_MAX_STATE (64u << 20)
#define IPAM_MAX_JOURNAL (256u << 20)
#define IPAM_JOURNAL_MIN_LIMIT 1024

static uint32_t crc32_ieee(const char *data, size_t size) {
        static uint32_t table[256];
        static bool ready;
        uint32_t c = UINT32_MAX;

        if (!ready) {
                for (uint32_t i = 0; i < 256; i++) {
                        uint32_t k = i;
                        for (int j = 0; j < 8; j++)
                                k = k & 1 ? 0xEDB88320u ^ (k >> 1) : k >> 1;
                        table[i] = k;
                }
                ready = true;
        }
        for (size_t i = 0; i < size; i++)
                c = table[(c ^ (uint8_t) data[i]) & 0xff] ^ (c >> 8);
        return c ^ UINT32_MAX;
}

static int state_error(char **ret_error, const char *format, ...) _printf_(2, 3);
static int state_error(char **ret_error, const char *format, ...) {
        if (ret_error) {
                va_list ap;
                free(*ret_error);
                va_start(ap, format);
                if (vasprintf(ret_error, format, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return -EBADMSG;
}

static const char *opt_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool add_opt(cJSON *o, const char *key, const char *v) {
        return !v || cJSON_AddStringToObject(o, key, v);
}

cJSON *ipam_state_allocation_to_json(const struct ipam_allocation *a) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        char ip[16], ip6[INET6_ADDRSTRLEN];

        ipam_addr_format(a->addr, ip);
        ipam_addr_format6(&a->addr6, ip6);
        if (!o || (a->addr != 0 && !cJSON_AddStringToObject(o, "ip", ip)) ||
            (a->has_addr6 && !cJSON_AddStringToObject(o, "ip6", ip6)) ||
            !cJSON_AddStringToObject(o, "containerID", a->container_id) ||
            !cJSON_AddStringToObject(o, "ifname", a->ifname) || !add_opt(o, "netns", a->netns) ||
            !cJSON_AddStringToObject(o, "hostIfname", a->host_ifname) || !add_opt(o, "namespace", a->pod_namespace) ||
            !add_opt(o, "name", a->pod_name) || !add_opt(o, "uid", a->pod_uid) || !add_opt(o, "network", a->network) ||
            (a->mtu > 0 && !cJSON_AddNumberToObject(o, "mtu", a->mtu)) ||
            (a->netns_ino > 0 && !cJSON_AddNumberToObject(o, "netnsInode", (double) a->netns_ino)) ||
            !cJSON_AddNumberToObject(o, "since", (double) a->since / USEC_PER_SEC))
                return NULL;
        return TAKE_PTR(o);
}

/* One allocation of the snapshot or of an "allocate"/"update" record. */
static int node_from_json(const cJSON *item, struct ipam_node **ret, char **ret_error) {
        const cJSON *since = cJSON_GetObjectItemCaseSensitive(item, "since"),
                    *mtu = cJSON_GetObjectItemCaseSensitive(item, "mtu"),
                    *ino = cJSON_GetObjectItemCaseSensitive(item, "netnsInode");
        const char *ip = opt_string(item, "ip"), *ip6 = opt_string(item, "ip6");
        struct in6_addr addr6 = {};
        struct ipam_node *n;
        uint32_t addr = 0;

        if ((!ip && !ip6) || (ip && ipam_addr_parse(ip, &addr) < 0) || (ip6 && inet_pton(AF_INET6, ip6, &addr6) != 1) ||
            isempty(opt_string(item, "containerID")) || isempty(opt_string(item, "ifname")) ||
            isempty(opt_string(item, "hostIfname")))
                return state_error(ret_error, "an allocation lacks ip (or ip6), containerID, ifname or hostIfname");
        if (mtu && (!cJSON_IsNumber(mtu) || mtu->valuedouble < 0 || mtu->valuedouble > 65535))
                return state_error(ret_error, "an allocation's mtu is not a number from 0 to 65535");
        n = ipam_node_new(opt_string(item, "containerID"), opt_string(item, "ifname"), addr,
                          cJSON_IsNumber(since) && since->valuedouble > 0 ? (usec_t) (since->valuedouble * USEC_PER_SEC) : 0);
        struct ipam_owner o = {
                .netns = opt_string(item, "netns"),
                .host_ifname = opt_string(item, "hostIfname"),
                .pod_namespace = opt_string(item, "namespace"),
                .pod_name = opt_string(item, "name"),
                .pod_uid = opt_string(item, "uid"),
                .network = opt_string(item, "network"),
                .mtu = mtu ? (unsigned) mtu->valuedouble : 0,
                .netns_ino = cJSON_IsNumber(ino) && ino->valuedouble > 0 ? (uint64_t) ino->valuedouble : 0,
        };
        if (!n || ipam_node_set_owner(n, &o) < 0) {
                ipam_node_free(n);
                return -ENOMEM;
        }
        n->a.has_addr6 = ip6 != NULL;
        n->a.addr6 = addr6;
        *ret = n;
        return 0;
}

static int load_allocation(struct ipam *p, const cJSON *item, uint32_t cursor, uint32_t cursor6, char **ret_error) {
        struct ipam_node *n = NULL;
        int r = node_from_json(item, &n, ret_error);
        if (r < 0)
                return r;
        if (ipam_index_find(p, n->a.container_id, n->a.ifname) || (n->a.addr && ipam_index_find_addr(p, n->a.addr)) ||
            (n->a.has_addr6 && ipam_index_find_addr6(p, &n->a.addr6))) {
                ipam_node_free(n);
                return state_error(ret_error, "two allocations for one attachment or one address");
        }
        if (ipam_index_reserve(p, 1, 0, 0) < 0) {
                ipam_node_free(n);
                return -ENOMEM;
        }
        ipam_apply_allocate(p, n, cursor, cursor6);
        return 0;
}

static int load_quarantined(struct ipam *p, uint32_t addr, uint32_t off6, usec_t released) {
        if (!ipam_addr_in_pool(p, addr) && off6 == 0)
                return 0; /* (outside the pools now: nothing to hold back) */
        if (ipam_index_reserve(p, 0, 1, 0) < 0)
                return -ENOMEM;
        /* The same as a release's, without an allocation to drop. */
        addr = ipam_addr_in_pool(p, addr) ? addr : 0;
        p->q[(p->q_head + p->q_len++) % p->q_allocated] =
                (struct quarantined) { .addr = addr, .off6 = off6, .released = released };
        ipam_mark(p, addr, off6, true);
        return 0;
}

static int load_deleting(struct ipam *p, const char *name) {
        if (ipam_index_reserve(p, 0, 0, 1) < 0)
                return -ENOMEM;
        if (!(p->deleting[p->n_deleting] = strdup(name)))
                return -ENOMEM;
        p->n_deleting++;
        ipam_reserve_account(p, NULL, IPAM_RESERVE_DELETING);
        return 0;
}

static int snapshot_load(struct ipam *p, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *list, *item, *seq;
        size_t size = 0;
        int r;

        r = fs_read_file_full(p->state_file, IPAM_MAX_STATE, &text, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        root = cJSON_ParseWithLength(text, size);
        if (!cJSON_IsObject(root))
                return state_error(ret_error, "not a JSON object");
        /* The journal beside the snapshot is in the snapshot's version (a journal with no snapshot
         * yet is version 2's: the version that brought the journal). */
        unsigned version = 0;
        r = state_version_json(root, IPAM_STATE_VERSION, &version);
        if (r == STATE_VERSION_ERR_NEWER) {
                if (ret_error) {
                        free(*ret_error);
                        *ret_error = state_version_describe(p->state_file, version, IPAM_STATE_VERSION);
                }
                return r;
        }
        if (r < 0)
                return state_error(ret_error, "version is not a whole number");
        seq = cJSON_GetObjectItemCaseSensitive(root, "journalSeq");
        if (seq && (!cJSON_IsNumber(seq) || seq->valuedouble < 0))
                return state_error(ret_error, "journalSeq is not a number");
        p->seq = seq ? (uint64_t) seq->valuedouble : 0;

        list = cJSON_GetObjectItemCaseSensitive(root, "allocations");
        if (!cJSON_IsArray(list))
                return state_error(ret_error, "allocations is not an array");
        cJSON_ArrayForEach(item, list) {
                r = load_allocation(p, item, p->cursor, p->cursor6, ret_error);
                if (r < 0)
                        return r;
        }
        list = cJSON_GetObjectItemCaseSensitive(root, "quarantine");
        if (list && !cJSON_IsArray(list))
                return state_error(ret_error, "quarantine is not an array");
        cJSON_ArrayForEach(item, list) {
                const cJSON *rel = cJSON_GetObjectItemCaseSensitive(item, "releasedAt");
                const char *ip = opt_string(item, "ip"), *ip6 = opt_string(item, "ip6");
                struct in6_addr a6;
                uint32_t a = 0;
                if ((!ip && !ip6) || (ip && ipam_addr_parse(ip, &a) < 0) || (ip6 && inet_pton(AF_INET6, ip6, &a6) != 1) ||
                    !cJSON_IsNumber(rel))
                        return state_error(ret_error, "a quarantine entry lacks ip (or ip6) or releasedAt");
                if (load_quarantined(p, a, ip6 ? ipam_addr_offset6(p, &a6) : 0,
                                     rel->valuedouble > 0 ? (usec_t) (rel->valuedouble * USEC_PER_SEC) : 0) < 0)
                        return -ENOMEM;
        }
        list = cJSON_GetObjectItemCaseSensitive(root, "deleting");
        if (list && !cJSON_IsArray(list))
                return state_error(ret_error, "deleting is not an array");
        cJSON_ArrayForEach(item, list) {
                if (!cJSON_IsString(item) || isempty(item->valuestring) || strlen(item->valuestring) > 15)
                        return state_error(ret_error, "a deleting entry is not an interface name");
                if (load_deleting(p, item->valuestring) < 0)
                        return -ENOMEM;
        }
        uint32_t cursor;
        if (ipam_addr_parse(opt_string(root, "cursor"), &cursor) >= 0 && ipam_addr_in_pool(p, cursor))
                p->cursor = cursor;
        const cJSON *c6 = cJSON_GetObjectItemCaseSensitive(root, "cursor6");
        if (cJSON_IsNumber(c6) && c6->valuedouble >= 1 && c6->valuedouble <= p->size6)
                p->cursor6 = (uint32_t) c6->valuedouble;
        return 0;
}

static char *snapshot_format(const struct ipam *p) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        cJSON *list, *q, *d;
        char ip[16];

        ipam_addr_format(p->cursor, ip);
        if (!root || state_version_json_add(root, IPAM_STATE_VERSION) < 0 || !cJSON_AddStringToObject(root, "cidr", p->cidr) ||
            !cJSON_AddNumberToObject(root, "journalSeq", (double) p->seq) || !cJSON_AddStringToObject(root, "cursor", ip) ||
            !cJSON_AddNumberToObject(root, "cursor6", p->cursor6) ||
            !(list = cJSON_AddArrayToObject(root, "allocations")) || !(q = cJSON_AddArrayToObject(root, "quarantine")) ||
            !(d = cJSON_AddArrayToObject(root, "deleting")))
                return NULL;
        for (size_t i = 0; i < p->n_deleting; i++)
                if (!cJSON_AddItemToArray(d, cJSON_CreateString(p->deleting[i])))
                        return NULL;
        for (size_t i = 0; i < p->n_nodes; i++)
                if (!cJSON_AddItemToArray(list, ipam_state_allocation_to_json(&p->nodes[i]->a)))
                        return NULL;
        for (size_t i = 0; i < p->q_len; i++) {
                const struct quarantined *e = &p->q[(p->q_head + i) % p->q_allocated];
                cJSON *o = cJSON_CreateObject();
                char ip6[INET6_ADDRSTRLEN];
                struct in6_addr a6;
                ipam_addr_format(e->addr, ip);
                ipam_addr_at_offset6(p, e->off6, &a6);
                ipam_addr_format6(&a6, ip6);
                if (!o || !cJSON_AddItemToArray(q, o) || (e->addr && !cJSON_AddStringToObject(o, "ip", ip)) ||
                    (e->off6 && !cJSON_AddStringToObject(o, "ip6", ip6)) ||
                    !cJSON_AddNumberToObject(o, "releasedAt", (double) e->released / USEC_PER_SEC))
                        return cJSON_Delete(o), NULL;
        }
        return cJSON_PrintUnformatted(root);
}

/* ---- the journal ---- */

static int replay_release(struct ipam *p, const cJSON *record, char **ret_error) {
        const cJSON *rel = cJSON_GetObjectItemCaseSensitive(record, "releasedAt");
        const char *deleting = opt_string(record, "deleting");
        struct ipam_node *n = ipam_index_find(p, opt_string(record, "containerID"), opt_string(record, "ifname"));
        char *name = NULL;

        if (!n || !cJSON_IsNumber(rel) || (deleting && (isempty(deleting) || strlen(deleting) > 15)))
                return state_error(ret_error, "a release record names no allocation or lacks releasedAt");
        if (ipam_index_reserve(p, 0, 1, 1) < 0 || (deleting && !(name = strdup(deleting))))
                return -ENOMEM;
        ipam_apply_release(p, n, rel->valuedouble > 0 ? (usec_t) (rel->valuedouble * USEC_PER_SEC) : 0,
                           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(record, "quarantine")), name);
        return 0;
}

static int replay_update(struct ipam *p, const cJSON *record, char **ret_error) {
        struct ipam_node *updated = NULL, *n;
        int r = node_from_json(cJSON_GetObjectItemCaseSensitive(record, "allocation"), &updated, ret_error);
        if (r < 0)
                return r;
        n = ipam_index_find(p, updated->a.container_id, updated->a.ifname);
        if (!n) {
                ipam_node_free(updated);
                return state_error(ret_error, "an update record names no allocation");
        }
        ipam_apply_update(p, n, updated);
        return 0;
}

static int replay_record(struct ipam *p, const cJSON *record, char **ret_error) {
        const char *op = opt_string(record, "op");
        uint32_t cursor;

        if (streq_ptr(op, "allocate")) {
                const cJSON *c6 = cJSON_GetObjectItemCaseSensitive(record, "cursor6");
                if (ipam_addr_parse(opt_string(record, "cursor"), &cursor) < 0)
                        cursor = p->cursor;
                return load_allocation(p, cJSON_GetObjectItemCaseSensitive(record, "allocation"), cursor,
                                       cJSON_IsNumber(c6) && c6->valuedouble >= 0 ? (uint32_t) c6->valuedouble : 0,
                                       ret_error);
        }
        if (streq_ptr(op, "update"))
                return replay_update(p, record, ret_error);
        if (streq_ptr(op, "release"))
                return replay_release(p, record, ret_error);
        if (streq_ptr(op, "linkDeleted")) {
                const char *name = opt_string(record, "hostIfname");
                for (size_t i = 0; name && i < p->n_deleting; i++)
                        if (streq(p->deleting[i], name)) {
                                ipam_apply_link_deleted(p, i);
                                return 0;
                        }
                return state_error(ret_error, "a linkDeleted record names no interface being deleted");
        }
        return state_error(ret_error, "a record has an unknown op");
}

/* One line: 0 applied or skipped, 1 torn (the unacknowledged last write), negative errno. */
static int replay_line(struct ipam *p, char *line, size_t len, bool last, unsigned lineno, char **ret_error) {
        _cleanup_(cJSON_Deletep) cJSON *record = NULL;
        unsigned crc;
        char sep;

        if (len < 10 || sscanf(line, "%8x%c", &crc, &sep) != 2 || sep != ' ' || crc32_ieee(line + 9, len - 9) != crc)
                return last ? 1 : state_error(ret_error, "line %u is damaged (checksum)", lineno);
        record = cJSON_ParseWithLength(line + 9, len - 9);
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(record, "seq");
        if (!cJSON_IsObject(record) || !cJSON_IsNumber(seq))
                return state_error(ret_error, "line %u is not a record", lineno);
        uint64_t s = (uint64_t) seq->valuedouble;
        if (s <= p->seq)
                return 0; /* in the snapshot already (a compaction's truncation did not happen) */
        if (s != p->seq + 1)
                return state_error(ret_error, "line %u: seq %llu follows %llu", lineno, (unsigned long long) s,
                                   (unsigned long long) p->seq);
        int r = replay_record(p, record, ret_error);
        if (r == -EBADMSG && ret_error && *ret_error) {
                char *with_line = NULL;
                if (asprintf(&with_line, "line %u: %s", lineno, *ret_error) >= 0) {
                        free(*ret_error);
                        *ret_error = with_line;
                }
        }
        if (r < 0)
                return r;
        p->seq = s;
        return 0;
}

static int journal_replay(struct ipam *p, off_t *ret_good, size_t *ret_records, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0, pos = 0, records = 0;
        unsigned lineno = 0;
        int r;

        r = fs_read_file_full(p->journal_file, IPAM_MAX_JOURNAL, &text, &size);
        if (r == -ENOENT)
                r = 0, size = 0;
        if (r < 0)
                return r;
        while (pos < size) {
                char *nl = memchr(text + pos, '\n', size - pos);
                if (!nl)
                        break; /* a torn last write */
                size_t len = (size_t) (nl - (text + pos));
                *nl = '\0';
                r = replay_line(p, text + pos, len, (size_t) (nl - text) + 1 == size, ++lineno, ret_error);
                if (r < 0)
                        return r;
                if (r > 0)
                        break;
                pos += len + 1;
                records++;
        }
        *ret_good = (off_t) pos;
        *ret_records = records;
        return (size_t) pos < size; /* 1: a torn tail to cut */
}

static int journal_open(struct ipam *p, bool truncate) {
        bool existed = access(p->journal_file, F_OK) == 0;
        int fd = open(p->journal_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | (truncate ? O_TRUNC : 0), 0600);
        if (fd < 0)
                return negative_errno();
        p->journal_fd = fd;
        if (!existed) {
                int r = fs_fsync_directory_of(p->journal_file);
                if (r < 0)
                        p->not_durable = r; /* the file is there for every reader */
        }
        return 0;
}

static int unlink_next_journal(const struct ipam *p);

/* Names the file in a load error: "<path><sep><reason>". */
static int error_in(const char *path, const char *sep, int r, char **ret_error) {
        char *with_path = NULL;
        if (r == -EBADMSG && ret_error && *ret_error && asprintf(&with_path, "%s%s%s", path, sep, *ret_error) >= 0) {
                free(*ret_error);
                *ret_error = with_path;
        }
        return r;
}

int ipam_state_open(struct ipam *p, char **ret_error) {
        size_t n = strlen(p->state_file);
        off_t good = 0;
        int r;

        if (n > 5 && streq(p->state_file + n - 5, ".json"))
                r = asprintf(&p->journal_file, "%.*s.journal", (int) (n - 5), p->state_file);
        else
                r = asprintf(&p->journal_file, "%s.journal", p->state_file);
        if (r < 0)
                return -ENOMEM;
        r = snapshot_load(p, ret_error);
        if (r < 0)
                return error_in(p->state_file, ": ", r, ret_error);
        r = journal_replay(p, &good, &p->journal_records, ret_error);
        if (r < 0)
                return error_in(p->journal_file, " ", r, ret_error);
        if (r > 0 && truncate(p->journal_file, good) < 0)
                return negative_errno();
        p->journal_size = good;
        r = journal_open(p, false);
        if (r < 0)
                return r;
        /* A compaction a crash interrupted may have left its next journal: never in use. */
        (void) unlink_next_journal(p);
        /* Blocks reserved before the restart are still there (fallocate is free then); on a disk
         * that filled up meanwhile the first allocation finds out and is refused. */
        p->journal_reserved = p->journal_size;
        (void) ipam_reserve_journal(p, 0, p->release_reserve);
        return syncer_new(&p->syncer);
}

void ipam_state_close(struct ipam *p) {
        /* Stopping: what is written becomes durable (a linkDeleted record nobody waited for). */
        if (p->syncer)
                syncer_quiesce(p->syncer);
        p->syncer = syncer_free(p->syncer);
        if (p->journal_fd >= 0) {
                (void) fdatasync(p->journal_fd);
                (void) close(p->journal_fd);
        }
        p->journal_fd = -EBADF;
}

static char *next_journal_path(const struct ipam *p) {
        char *path = NULL;
        return asprintf(&path, "%s.next", p->journal_file) < 0 ? NULL : path;
}

static int unlink_next_journal(const struct ipam *p) {
        _cleanup_free_ char *next = next_journal_path(p);
        if (!next)
                return -ENOMEM;
        return unlink(next) < 0 && errno != ENOENT ? negative_errno() : 0;
}

/* The empty journal that replaces the current one after a compaction, with the releases' space
 * reserved in it first: the old journal's reservation is given back only once the new one holds
 * its own (ipam-reserve.c). */
static int next_journal_create(struct ipam *p, int *ret_fd, off_t *ret_reserved) {
        _cleanup_free_ char *next = next_journal_path(p);
        _cleanup_close_ int fd = -EBADF;
        off_t reserved = 0;
        int r;

        if (!next)
                return -ENOMEM;
        fd = open(next, O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return negative_errno();
        r = ipam_reserve_file(p, fd, 0, (off_t) p->release_reserve, &reserved);
        if (r < 0) {
                (void) unlink(next);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        *ret_reserved = reserved;
        return 0;
}

/* The next journal in place of the current one (the snapshot holds every record of both). */
static int next_journal_install(struct ipam *p, int fd, off_t reserved) {
        _cleanup_free_ char *next = next_journal_path(p);

        if (!next || rename(next, p->journal_file) < 0) {
                int r = next ? negative_errno() : -ENOMEM;
                safe_close(fd);
                (void) unlink_next_journal(p);
                return r;
        }
        /* Before any record goes into it: a power loss must not bring the old one back over
         * records acknowledged in the new one. */
        int r = fs_fsync_directory_of(p->journal_file);
        if (r < 0)
                p->not_durable = r;
        safe_close(p->journal_fd);
        p->journal_fd = fd;
        p->journal_reserved = reserved;
        return 0;
}

/* The whole state as a new snapshot, then an empty journal. */
static int compact(struct ipam *p) {
        _cleanup_free_ char *text = snapshot_format(p);
        bool renamed = false;
        off_t reserved = 0;
        int r, fd = -EBADF;

        if (!text)
                return -ENOMEM;
        /* Not while a flush holds the journal's fd (replaced below); and a failed flush is seen
         * before the snapshot makes it moot. */
        if (p->syncer)
                syncer_quiesce(p->syncer);
        r = next_journal_create(p, &fd, &reserved);
        if (r < 0)
                return r; /* (the disk is full: the journal goes on, in its reservation) */
        r = fs_write_file_atomic_full(p->state_file, text, strlen(text), 0600, (uid_t) -1, (gid_t) -1, &renamed);
        if (r < 0) {
                safe_close(fd);
                (void) unlink_next_journal(p);
        }
        if (r < 0 && !renamed)
                return r;
        if (r < 0) {
                /* The new snapshot may not survive a power loss: the journal stays (its records
                 * are skipped while the snapshot holds them); only what a failed append left goes. */
                p->not_durable = r;
                if (p->journal_fd >= 0 && ftruncate(p->journal_fd, p->journal_size) < 0)
                        return negative_errno();
                p->journal_reserved = p->journal_size; /* (a truncation frees the blocks past the end) */
                p->journal_dirty = false;
                p->sync_ticket = 0; /* the snapshot holds every change, flushed */
                return 0;
        }
        r = next_journal_install(p, fd, reserved);
        if (r < 0 && p->journal_fd >= 0 && ftruncate(p->journal_fd, 0) >= 0) {
                r = 0; /* emptied in place instead: the reservation is made again by the next change */
                p->journal_reserved = 0;
        }
        if (r < 0)
                return r;
        p->journal_records = 0;
        p->journal_size = 0;
        p->journal_dirty = false;
        p->sync_ticket = 0;
        return 0;
}

static int write_all(int fd, const char *data, size_t size) {
        while (size > 0) {
                ssize_t k = write(fd, data, size);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? negative_errno() : -EIO;
                data += k;
                size -= (size_t) k;
        }
        return 0;
}

int ipam_state_append(struct ipam *p, cJSON *record, bool later, size_t keep) {
        _cleanup_free_ char *text = NULL, *line = NULL;
        int r, n;

        if (!p->state_file) {
                p->seq++;
                return 0;
        }
        if (p->journal_dirty || p->journal_fd < 0) {
                r = compact(p);
                if (r < 0)
                        return r;
        }
        if (!cJSON_AddNumberToObject(record, "seq", (double) (p->seq + 1)) || !(text = cJSON_PrintUnformatted(record)))
                return -ENOMEM;
        n = asprintf(&line, "%08x %s\n", crc32_ieee(text, strlen(text)), text);
        if (n < 0)
                return -ENOMEM;
        /* A change that will need a release reserves its bytes first (ipam-reserve.c); a
         * release writes into what was reserved for it. */
        if (keep > 0) {
                r = ipam_reserve_journal(p, (size_t) n, keep);
                if (r < 0)
                        return r;
        }
        r = write_all(p->journal_fd, line, (size_t) n);
        if (r < 0 || later || p->lazy_sync)
                ; /* written; the next flush takes it along */
        else if (p->defer_sync && p->syncer)
                p->sync_ticket = syncer_request(p->syncer, p->journal_fd);
        else if (fdatasync(p->journal_fd) < 0)
                r = negative_errno();
        if (r < 0) {
                /* Not acknowledged: what reached the file goes, or the next change compacts. */
                if (ftruncate(p->journal_fd, p->journal_size) < 0)
                        p->journal_dirty = true;
                p->journal_reserved = p->journal_size; /* (a truncation frees the blocks past the end) */
                return r;
        }
        p->seq++;
        p->journal_records++;
        p->journal_size += n;
        return 0;
}

int ipam_state_sync(struct ipam *p) {
        uint64_t ticket = p->sync_ticket;
        int r;

        if (ticket == 0)
                return 0;
        r = syncer_wait(p->syncer, ticket);
        if (r >= 0) {
                if (p->sync_ticket == ticket)
                        p->sync_ticket = 0;
                return 0;
        }
        /* The journal's pages may be lost (a failed flush marks them clean): the whole state
         * again, as a snapshot written and fsync'd on its own. */
        p->journal_dirty = true;
        return compact(p);
}

void ipam_state_compact_if_due(struct ipam *p) {
        size_t entries = p->n_nodes + p->q_len + p->n_deleting;
        size_t limit = p->journal_limit >= 0 ? (size_t) p->journal_limit : MAX((size_t) IPAM_JOURNAL_MIN_LIMIT, 2 * entries);

        if (!p->state_file || p->journal_records <= limit)
                return;
        /* A failure here loses nothing (the journal holds every change): the next one retries. */
        (void) compact(p);
}
