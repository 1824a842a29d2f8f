/* SPDX-License-Identifier: MIT */
/* Sizing the servers' connection caps to the open-file limit (fd-limit.h). */
#include <errno.h>
#include <sys/resource.h>

#include "fd-limit.h"
#include "macro.h"

/* Kept for the agent's own descriptors beside the servers' connections: an eighth of the limit,
 * at least 192 (idle, the agent holds 15 to 40 depending on its modules; metrics-listen's 32
 * connections, downloads, ZooKeeper and the apiserver, child processes and files come on top),
 * at most half of it so that a tiny limit still serves a few connections. */
#define FD_RESERVE_MIN 192U
#define FD_RESERVE_SHARE 8U
/* Below these a server would be useless: they are given even where they do not fit beside the
 * reserve (limits under about 80, which the start-up line reports as scaled like any other). */
#define CONNECTION_FLOOR_API 8U
#define CONNECTION_FLOOR_WORKLOAD 8U
#define CONNECTION_FLOOR_CSI 2U

int fd_limit_raise(uint64_t *ret_before, uint64_t *ret_after) {
        struct rlimit rl;

        if (prlimit(0, RLIMIT_NOFILE, NULL, &rl) < 0)
                return -errno;
        *ret_before = *ret_after = rl.rlim_cur;
        if (rl.rlim_cur >= rl.rlim_max)
                return 0;
        rl.rlim_cur = rl.rlim_max;
        /* prlimit64, not setrlimit: the unit's system call filter denies @resources (setrlimit). */
        if (prlimit(0, RLIMIT_NOFILE, &rl, NULL) < 0)
                return -errno;
        *ret_after = rl.rlim_cur;
        return 0;
}

static unsigned scale(unsigned cap, uint64_t available, uint64_t needed, unsigned floor) {
        uint64_t n = (uint64_t) cap * available / needed;

        return (unsigned) MAX(n, (uint64_t) floor);
}

void fd_limit_connection_caps(uint64_t open_files, struct connection_caps *ret) {
        uint64_t reserve = MIN(MAX(open_files / FD_RESERVE_SHARE, (uint64_t) FD_RESERVE_MIN), open_files / 2);
        uint64_t available = open_files - reserve;
        uint64_t needed = (uint64_t) FDS_PER_CONNECTION *
                          (CONNECTION_CAP_API + CONNECTION_CAP_WORKLOAD + 2 * CONNECTION_CAP_CSI);

        *ret = (struct connection_caps) {
                .open_files = open_files,
                .reserve = reserve,
                .api = CONNECTION_CAP_API,
                .workload = CONNECTION_CAP_WORKLOAD,
                .csi = CONNECTION_CAP_CSI,
        };
        if (available >= needed)
                return;
        ret->scaled = true;
        ret->api = scale(CONNECTION_CAP_API, available, needed, CONNECTION_FLOOR_API);
        ret->workload = scale(CONNECTION_CAP_WORKLOAD, available, needed, CONNECTION_FLOOR_WORKLOAD);
        ret->csi = scale(CONNECTION_CAP_CSI, available, needed, CONNECTION_FLOOR_CSI);
}
