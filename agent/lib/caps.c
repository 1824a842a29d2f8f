/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps.h"
#include "macro.h"

/* Indexed by capability number (linux/capability.h). */
static const char *const cap_names[] = {
        [CAP_CHOWN] = "CAP_CHOWN",
        [CAP_DAC_OVERRIDE] = "CAP_DAC_OVERRIDE",
        [CAP_DAC_READ_SEARCH] = "CAP_DAC_READ_SEARCH",
        [CAP_FOWNER] = "CAP_FOWNER",
        [CAP_FSETID] = "CAP_FSETID",
        [CAP_KILL] = "CAP_KILL",
        [CAP_SETGID] = "CAP_SETGID",
        [CAP_SETUID] = "CAP_SETUID",
        [CAP_SETPCAP] = "CAP_SETPCAP",
        [CAP_LINUX_IMMUTABLE] = "CAP_LINUX_IMMUTABLE",
        [CAP_NET_BIND_SERVICE] = "CAP_NET_BIND_SERVICE",
        [CAP_NET_BROADCAST] = "CAP_NET_BROADCAST",
        [CAP_NET_ADMIN] = "CAP_NET_ADMIN",
        [CAP_NET_RAW] = "CAP_NET_RAW",
        [CAP_IPC_LOCK] = "CAP_IPC_LOCK",
        [CAP_IPC_OWNER] = "CAP_IPC_OWNER",
        [CAP_SYS_MODULE] = "CAP_SYS_MODULE",
        [CAP_SYS_RAWIO] = "CAP_SYS_RAWIO",
        [CAP_SYS_CHROOT] = "CAP_SYS_CHROOT",
        [CAP_SYS_PTRACE] = "CAP_SYS_PTRACE",
        [CAP_SYS_PACCT] = "CAP_SYS_PACCT",
        [CAP_SYS_ADMIN] = "CAP_SYS_ADMIN",
        [CAP_SYS_BOOT] = "CAP_SYS_BOOT",
        [CAP_SYS_NICE] = "CAP_SYS_NICE",
        [CAP_SYS_RESOURCE] = "CAP_SYS_RESOURCE",
        [CAP_SYS_TIME] = "CAP_SYS_TIME",
        [CAP_SYS_TTY_CONFIG] = "CAP_SYS_TTY_CONFIG",
        [CAP_MKNOD] = "CAP_MKNOD",
        [CAP_LEASE] = "CAP_LEASE",
        [CAP_AUDIT_WRITE] = "CAP_AUDIT_WRITE",
        [CAP_AUDIT_CONTROL] = "CAP_AUDIT_CONTROL",
        [CAP_SETFCAP] = "CAP_SETFCAP",
        [CAP_MAC_OVERRIDE] = "CAP_MAC_OVERRIDE",
        [CAP_MAC_ADMIN] = "CAP_MAC_ADMIN",
        [CAP_SYSLOG] = "CAP_SYSLOG",
        [CAP_WAKE_ALARM] = "CAP_WAKE_ALARM",
        [CAP_BLOCK_SUSPEND] = "CAP_BLOCK_SUSPEND",
        [CAP_AUDIT_READ] = "CAP_AUDIT_READ",
        [CAP_PERFMON] = "CAP_PERFMON",
        [CAP_BPF] = "CAP_BPF",
        [CAP_CHECKPOINT_RESTORE] = "CAP_CHECKPOINT_RESTORE",
};

const char *cap_to_name(unsigned cap) {
        return cap < ELEMENTSOF(cap_names) ? cap_names[cap] : NULL;
}

/* The highest capability the running kernel knows; it may know more than this build. */
static unsigned cap_last(void) {
        unsigned last = CAP_LAST_CAP;
        FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
        if (f) {
                if (fscanf(f, "%u", &last) != 1 || last > 63)
                        last = CAP_LAST_CAP;
                fclose(f);
        }
        return last;
}

static uint64_t join(__u32 low, __u32 high) {
        return (uint64_t) high << 32 | low;
}

int caps_get(struct caps_state *ret) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};

        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        *ret = (struct caps_state) {
                .effective = join(d[0].effective, d[1].effective),
                .permitted = join(d[0].permitted, d[1].permitted),
        };
        for (unsigned cap = 0; cap <= cap_last(); cap++) {
                int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
                if (r > 0)
                        ret->bounding |= CAP_TO_MASK64(cap);
        }
        return 0;
}

int caps_keep_only(uint64_t keep, bool *ret_bounding_dropped) {
        struct caps_state now;
        int r = caps_get(&now);
        if (r < 0)
                return r;

        /* The bounding set first: dropping from it needs CAP_SETPCAP, which goes next. */
        bool bounding = now.effective & CAP_TO_MASK64(CAP_SETPCAP);
        if (bounding)
                for (unsigned cap = 0; cap <= cap_last(); cap++)
                        if (!(keep & CAP_TO_MASK64(cap)) && (now.bounding & CAP_TO_MASK64(cap)) &&
                            prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
                                return -errno;
        /* Ambient capabilities would survive an exec of on-change commands; none are wanted. */
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;

        uint64_t permitted = now.permitted & keep;
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {
                { .effective = (__u32) permitted, .permitted = (__u32) permitted },
                { .effective = (__u32) (permitted >> 32), .permitted = (__u32) (permitted >> 32) },
        };
        if (syscall(SYS_capset, &h, d) < 0)
                return -errno;
        if (ret_bounding_dropped)
                *ret_bounding_dropped = bounding;
        return 0;
}

char *caps_to_string(uint64_t set) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f)
                return NULL;
        bool first = true;
        for (unsigned cap = 0; cap < 64; cap++) {
                if (!(set & CAP_TO_MASK64(cap)))
                        continue;
                const char *name = cap_to_name(cap);
                if (name)
                        fprintf(f, "%s%s", first ? "" : " ", name);
                else
                        fprintf(f, "%scap_%u", first ? "" : " ", cap);
                first = false;
        }
        if (first)
                fputs("none", f);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
