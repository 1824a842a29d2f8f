/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by ipam.c (the pool, in memory) and ipam-state.c (its files): not for other files.
 *
 * Every change is made in three steps so that memory never runs ahead of the disk: prepare
 * (allocate everything the change needs; nothing visible yet), persist (one journal record,
 * written, and fdatasync'd at once or, deferred, on the syncer thread before the change is
 * acknowledged), apply (link it in; cannot fail). Loading replays the same records through the
 * same apply functions, so a restart rebuilds exactly what was acknowledged. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "ipam.h"

/* One allocation and its places in the lookup tables. */
struct ipam_node {
        struct ipam_allocation a;
        size_t index; /* in ipam.nodes */
        struct ipam_node *next_id, *next_addr, *next_addr6, *next_host; /* hash chains */
};

struct quarantined {
        uint32_t addr;          /* 0: none */
        uint32_t off6;          /* offset in the IPv6 pool; 0: none */
        usec_t released;
};

struct ipam {
        char *cidr, *cidr4, *cidr6;
        uint32_t network, broadcast; /* host byte order; both 0 without an IPv4 pool */
        unsigned prefix;
        usec_t quarantine;

        /* The IPv6 pool: offsets 1..size6 from network6 (size6 0: no IPv6 pool). */
        struct in6_addr network6;
        unsigned prefix6;
        uint32_t size6, cursor6;
        uint64_t *taken6;
        size_t n_in_pool6;

        /* Allocations: a dense array (iteration, O(1) removal by swapping in the last) and three
         * hash tables of chains (attachment, address, host interface name). */
        struct ipam_node **nodes;
        size_t n_nodes, n_nodes_allocated;
        struct ipam_node **by_id, **by_addr, **by_addr6, **by_host;
        size_t n_buckets; /* a power of two, >= n_nodes */
        size_t n_foreign;  /* allocations outside the pool (after a pod-cidr change) */

        /* One bit per address of the CIDR: allocated or quarantined, i.e. not free. */
        uint64_t *taken;
        uint32_t cursor; /* the last address handed out (next-fit) */

        /* Released addresses in release order (a ring): expiry pops from the head. */
        struct quarantined *q;
        size_t q_head, q_len, q_allocated;

        char **deleting; /* host interface names released, deletion not confirmed */
        size_t n_deleting, n_deleting_allocated;

        /* Persistence (ipam-state.c). No state_file: nothing persisted (tests). */
        char *state_file, *journal_file;
        int journal_fd;
        uint64_t seq;            /* the last record applied (in the snapshot or the journal) */
        size_t journal_records;  /* records in the journal file */
        off_t journal_size;
        bool journal_dirty;      /* a failed append may have left bytes behind: compact first */
        long journal_limit;      /* compact past this many records; < 0: scale with the state */
        int not_durable;
        struct syncer *syncer;   /* flushes the journal off the loop (deferred changes) */
        uint64_t sync_ticket;    /* the flush a deferred change waits for; 0: none */
        bool defer_sync;         /* ipam_defer_sync() until ipam_sync() */
        bool lazy_sync;          /* ipam_lazy_sync() until ipam_sync() */

        /* Space reserved for releases (ipam-reserve.c). */
        size_t release_reserve;   /* bytes the releases (and linkDeleted records) to come may append */
        off_t journal_reserved;   /* the journal's file has blocks allocated up to here */
        bool reserve_unsupported; /* the filesystem cannot preallocate: nothing reserved */
};

/* ---- ipam-index.c ---- */
void ipam_index_insert(struct ipam *p, struct ipam_node *n);
void ipam_index_remove(struct ipam *p, struct ipam_node *n);
void ipam_index_insert_host(struct ipam *p, struct ipam_node *n);
void ipam_index_remove_host(struct ipam *p, struct ipam_node *n);
/* Room for that many more nodes, quarantined addresses and deletions, so that the apply step
 * cannot fail. */
int ipam_index_reserve(struct ipam *p, size_t nodes, size_t quarantined, size_t deleting);
struct ipam_node *ipam_index_find(const struct ipam *p, const char *container_id, const char *ifname);
struct ipam_node *ipam_index_find_addr(const struct ipam *p, uint32_t addr);
struct ipam_node *ipam_index_find_addr6(const struct ipam *p, const struct in6_addr *addr);
bool ipam_index_host_taken(const struct ipam *p, const char *name);
/* The index's hash of a pair of names, stable across restarts and builds (host interface names
 * are made of it). */
uint32_t ipam_index_hash(const char *a, const char *b, unsigned salt);

/* ---- ipam-addr.c ---- */
int ipam_addr_parse(const char *s, uint32_t *ret);
bool ipam_addr_in_pool(const struct ipam *p, uint32_t addr);
/* The address's offset in the IPv6 pool, 0 if outside it; and back. */
uint32_t ipam_addr_offset6(const struct ipam *p, const struct in6_addr *addr);
void ipam_addr_at_offset6(const struct ipam *p, uint32_t offset, struct in6_addr *ret);

/* ---- ipam-reserve.c ---- */
enum ipam_reserve_change {
        IPAM_RESERVE_ALLOCATED,    /* its release is to come */
        IPAM_RESERVE_RELEASED,     /* written */
        IPAM_RESERVE_DELETING,     /* its linkDeleted record is to come */
        IPAM_RESERVE_LINK_DELETED, /* written */
};
/* The bytes an allocation's release and linkDeleted records take at most. */
size_t ipam_reserve_bound(const struct ipam_allocation *a);
/* Keeps release_reserve up to date (the apply steps call it, so the load accounts too). */
void ipam_reserve_account(struct ipam *p, const struct ipam_allocation *a, enum ipam_reserve_change change);
/* Blocks allocated in fd (of that size) up to end, *reserved saying how far they go already;
 * the filesystem's error (-ENOSPC) if it cannot. 0 without doing anything where fallocate is not
 * supported. */
int ipam_reserve_file(struct ipam *p, int fd, off_t size, off_t end, off_t *reserved);
/* Room in the journal for a line of that many bytes with keep bytes still reserved after it. */
int ipam_reserve_journal(struct ipam *p, size_t line, size_t keep);

/* ---- ipam.c, for ipam-state.c ---- */
struct ipam_node *ipam_node_new(const char *container_id, const char *ifname, uint32_t addr, usec_t since);
struct ipam_node *ipam_node_free(struct ipam_node *n);
int ipam_node_set_owner(struct ipam_node *n, const struct ipam_owner *o);
/* The apply step of each change (capacity reserved first: they cannot fail). */
void ipam_apply_allocate(struct ipam *p, struct ipam_node *n, uint32_t cursor, uint32_t cursor6);
void ipam_apply_release(struct ipam *p, struct ipam_node *n, usec_t released, bool quarantine, char *deleting);
void ipam_apply_link_deleted(struct ipam *p, size_t i);
void ipam_apply_update(struct ipam *p, struct ipam_node *n, struct ipam_node *updated);
void ipam_mark(struct ipam *p, uint32_t addr, uint32_t off6, bool taken);

/* ---- ipam-state.c ---- */
cJSON *ipam_state_allocation_to_json(const struct ipam_allocation *a);
/* Loads the snapshot and replays the journal; opens the journal for appending. */
int ipam_state_open(struct ipam *p, char **ret_error);
void ipam_state_close(struct ipam *p);
/* Appends one record (seq is added) and makes it durable; while deferring, asks the syncer to;
 * with later (or while lazy), leaves it to the next flush. keep > 0: the bytes that must stay
 * reserved for releases after this record (an allocation's or an update's: -ENOSPC and nothing
 * written if the disk has not that much); 0: the record spends the reserve (a release). On
 * failure nothing was recorded. */
int ipam_state_append(struct ipam *p, cJSON *record, bool later, size_t keep);
/* Waits for the background flushes asked for so far; if one failed, writes the whole state as a
 * new snapshot. 0 once every change made so far is durable. */
int ipam_state_sync(struct ipam *p);
/* After an apply: folds the journal into the snapshot once it holds enough records. */
void ipam_state_compact_if_due(struct ipam *p);
