/* SPDX-License-Identifier: MIT */
/* Space for the releases, reserved in advance: a DEL must be recordable on a full disk (the
 * runtime cannot take the pod back, and an address whose release is lost stays held after a
 * restart).
 *
 * Every allocation accounts for the bytes its release record and its linkDeleted record will
 * take (release_reserve). The journal's file keeps at least that much allocated past its end,
 * like a write-ahead log's preallocated segment: fallocate(FALLOC_FL_KEEP_SIZE) gives it blocks
 * without changing its size, so readers see nothing and the file format is unchanged. A change
 * that adds a release to come (an allocation) or must not eat into the reserve (an owner update)
 * first extends the reservation, and fails with the filesystem's error (ENOSPC) if it cannot:
 * nothing was written. Releases and linkDeleted records write into blocks already allocated, so
 * they need no new space. Compaction gives the next journal its reservation before it replaces
 * the old one (ipam-state.c), so the reserve is never given back to the filesystem meanwhile.
 *
 * A filesystem without fallocate (EOPNOTSUPP) gets no reservation: a release there is written
 * like any change and can fail on a full disk. */

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "ipam-internal.h"

/* A release line without its two names: crc, op, releasedAt, quarantine, deleting, seq, with the
 * numbers at their widest (cJSON prints up to 17 digits; seq up to 20). */
#define RELEASE_LINE_FIXED 256u
/* A linkDeleted line: crc, op, a 15-byte interface name, seq. */
#define LINK_DELETED_LINE 128u
/* Reservations grow by this much at a time: a syscall per 16 KiB of changes, not per change. */
#define RESERVE_CHUNK ((off_t) 16 << 10)

/* The bytes a string takes in a JSON record (cJSON's escapes). */
static size_t json_len(const char *s) {
        size_t n = 0;
        for (; s && *s; s++)
                n += *s == '"' || *s == '\\' || *s == '\b' || *s == '\f' || *s == '\n' || *s == '\r' || *s == '\t' ? 2
                     : (unsigned char) *s < 0x20                                                                  ? 6
                                                                                                                   : 1;
        return n;
}

size_t ipam_reserve_bound(const struct ipam_allocation *a) {
        return RELEASE_LINE_FIXED + json_len(a->container_id) + json_len(a->ifname) + LINK_DELETED_LINE;
}

void ipam_reserve_account(struct ipam *p, const struct ipam_allocation *a, enum ipam_reserve_change change) {
        switch (change) {
        case IPAM_RESERVE_ALLOCATED:
                p->release_reserve += ipam_reserve_bound(a);
                break;
        case IPAM_RESERVE_RELEASED:
                p->release_reserve -= MIN(p->release_reserve, ipam_reserve_bound(a));
                break;
        case IPAM_RESERVE_DELETING:
                p->release_reserve += LINK_DELETED_LINE;
                break;
        case IPAM_RESERVE_LINK_DELETED:
                p->release_reserve -= MIN(p->release_reserve, (size_t) LINK_DELETED_LINE);
                break;
        }
}

static off_t round_up(off_t v) {
        return (v + RESERVE_CHUNK - 1) / RESERVE_CHUNK * RESERVE_CHUNK;
}

int ipam_reserve_file(struct ipam *p, int fd, off_t size, off_t end, off_t *reserved) {
        if (p->reserve_unsupported || end <= *reserved)
                return 0;
        /* A chunk ahead, or (the disk nearly full) just what is needed. */
        off_t want[2] = { round_up(end), end };
        int r = 0;
        for (size_t i = 0; i < 2; i++) {
                if (fallocate(fd, FALLOC_FL_KEEP_SIZE, size, want[i] - size) == 0) {
                        *reserved = want[i];
                        return 0;
                }
                r = -errno;
                if (r == -EOPNOTSUPP || r == -ENOSYS) {
                        p->reserve_unsupported = true;
                        return 0;
                }
        }
        return r;
}

int ipam_reserve_journal(struct ipam *p, size_t line, size_t keep) {
        if (p->journal_fd < 0)
                return 0; /* the compaction that reopens it reserves */
        return ipam_reserve_file(p, p->journal_fd, p->journal_size, p->journal_size + (off_t) line + (off_t) keep,
                                 &p->journal_reserved);
}
