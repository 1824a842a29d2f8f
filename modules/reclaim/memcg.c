/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include <libcgroup.h>

#include "fsutil.h"
#include "memcg.h"

/* libcgroup keeps its mount table in process-wide state filled by cgroup_init(); this flag only
 * mirrors that (the library offers no "is initialised" query). */
static bool libcgroup_ready;

static int parse_u64(const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end != 0 || *s == '-')
                return -EINVAL;
        *ret = v;
        return 0;
}

/* libcgroup's codes → negative errno. */
static int cg_error(int r) {
        switch (r) {
        case 0:
                return 0;
        case ECGROUPNOTEXIST:
        case ECGEOF:
                return -ENOENT;
        case ECGROUPNOTMOUNTED:
        case ECGROUPSUBSYSNOTMOUNTED:
                return -ENOMEDIUM;
        case ECGOTHER: {
                int e = cgroup_get_last_errno();
                return e > 0 ? -e : -EIO;
        }
        default:
                return -EIO;
        }
}

static int memcg_init_library(void) {
        if (libcgroup_ready)
                return 0;
        int r = cgroup_init();
        if (r != 0)
                return r == ECGROUPNOTMOUNTED ? -ENOENT : cg_error(r);
        libcgroup_ready = true;
        return 0;
}

int memcg_hierarchy(enum memcg_version *ret_version, char **ret_mount) {
        char *mount = NULL;
        int r = memcg_init_library();
        if (r < 0)
                return r;
        r = cgroup_get_subsys_mount_point("memory", &mount);
        if (r != 0)
                return r == ECGROUPNOTEXIST || r == ECGROUPSUBSYSNOTMOUNTED ? -ENOENT : cg_error(r);
        /* The unified hierarchy has cgroup.controllers in its root; v1 hierarchies do not. */
        _cleanup_free_ char *controllers = path_join(mount, "cgroup.controllers");
        if (!controllers) {
                free(mount);
                return -ENOMEM;
        }
        if (ret_version)
                *ret_version = access(controllers, F_OK) == 0 ? MEMCG_V2 : MEMCG_V1;
        if (ret_mount)
                *ret_mount = mount;
        else
                free(mount);
        return 0;
}

int memcg_path_normalize(const char *path, char **ret) {
        if (isempty(path) || strlen(path) > 4096)
                return -EINVAL;
        char *out = malloc(strlen(path) + 2), *o = out;
        if (!out)
                return -ENOMEM;
        const char *p = path;
        while (*p) {
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                size_t n = strcspn(p, "/");
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
                        free(out);
                        return -EINVAL;
                }
                *o++ = '/';
                memcpy(o, p, n);
                o += n;
                p += n;
        }
        if (o == out)
                *o++ = '/';
        *o = 0;
        *ret = out;
        return 0;
}

struct memcg *memcg_free(struct memcg *g) {
        if (!g)
                return NULL;
        free(g->path);
        free(g->dir);
        free(g);
        return NULL;
}

int memcg_open(const char *path, struct memcg **ret) {
        _cleanup_(memcg_freep) struct memcg *g = calloc(1, sizeof(*g));
        _cleanup_free_ char *mount = NULL;
        enum memcg_version v;
        int r;

        if (!g)
                return -ENOMEM;
        r = memcg_path_normalize(path, &g->path);
        if (r < 0)
                return r;
        r = memcg_hierarchy(&v, &mount);
        if (r < 0)
                return r;
        g->version = v;
        if (asprintf(&g->dir, "%s%s", mount, streq(g->path, "/") ? "" : g->path) < 0) {
                g->dir = NULL;
                return -ENOMEM;
        }
        if (!memcg_exists(g))
                return -ENOENT;
        *ret = TAKE_PTR(g);
        return 0;
}

bool memcg_exists(const struct memcg *g) {
        struct stat st;
        return stat(g->dir, &st) == 0 && S_ISDIR(st.st_mode);
}

int memcg_inode(const struct memcg *g, uint64_t *ret) {
        struct stat st;
        if (stat(g->dir, &st) < 0)
                return negative_errno();
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        *ret = (uint64_t) st.st_ino;
        return 0;
}

char *memcg_file(const struct memcg *g, const char *name) {
        return path_join(g->dir, name);
}

/* One value (the first line of a file) through libcgroup. */
static int read_value(const struct memcg *g, const char *name, char *buf, size_t size) {
        void *handle = NULL;
        buf[0] = 0;
        /* libcgroup takes the name as char * but does not change it. */
        int r = cgroup_read_value_begin("memory", g->path, (char *) name, &handle, buf, (int) size);
        if (handle)
                (void) cgroup_read_value_end(&handle);
        if (r != 0 && r != ECGEOF)
                return cg_error(r);
        buf[strcspn(buf, "\n")] = 0;
        return 0;
}

static int read_u64(const struct memcg *g, const char *name, uint64_t *ret) {
        char buf[64];
        int r = read_value(g, name, buf, sizeof(buf));
        if (r < 0)
                return r;
        if (streq(buf, "max")) { /* v2 memory.max */
                *ret = UINT64_MAX;
                return 0;
        }
        return parse_u64(buf, ret);
}

/* memory.stat through libcgroup's stats iterator; fills the values of the names asked for. */
static int read_stats(const struct memcg *g, const char *const *names, uint64_t *values, size_t n) {
        struct cgroup_stat st;
        void *handle = NULL;
        int r = cgroup_read_stats_begin("memory", g->path, &handle, &st);
        while (r == 0) {
                for (size_t i = 0; i < n; i++)
                        if (streq(st.name, names[i])) {
                                char *v = st.value;
                                v[strcspn(v, "\n")] = 0;
                                if (parse_u64(v, &values[i]) < 0)
                                        values[i] = 0;
                        }
                r = cgroup_read_stats_next(&handle, &st);
        }
        if (handle)
                (void) cgroup_read_stats_end(&handle);
        return r == ECGEOF ? 0 : cg_error(r);
}

/* The "max" line of v2 memory.events, read line by line through libcgroup. */
static int read_events_max(const struct memcg *g, uint64_t *ret) {
        void *handle = NULL;
        char line[256];
        uint64_t v = 0;
        int r = cgroup_read_value_begin("memory", g->path, "memory.events", &handle, line, sizeof(line));
        while (r == 0) {
                uint64_t x;
                char key[32];
                if (sscanf(line, "%31s %" SCNu64, key, &x) == 2 && streq(key, "max"))
                        v = x;
                r = cgroup_read_value_next(&handle, line, sizeof(line));
        }
        if (handle)
                (void) cgroup_read_value_end(&handle);
        if (r != ECGEOF)
                return cg_error(r);
        *ret = v;
        return 0;
}

int memcg_read_limit(const struct memcg *g, uint64_t *ret) {
        uint64_t v;
        int r = read_u64(g, g->version == MEMCG_V1 ? "memory.limit_in_bytes" : "memory.max", &v);
        if (r < 0)
                return r;
        /* v1 reports "no limit" as PAGE_COUNTER_MAX pages, rounded down to a page. */
        if (v >= (UINT64_C(1) << 62))
                v = UINT64_MAX;
        *ret = v;
        return 0;
}

int memcg_read_failcnt(const struct memcg *g, uint64_t *ret) {
        return g->version == MEMCG_V1 ? read_u64(g, "memory.failcnt", ret) : read_events_max(g, ret);
}

const char *memcg_cap_name(enum memcg_version v) {
        return v == MEMCG_V1 ? "memory.limit_in_bytes" : "memory.high";
}

int memcg_read_cap(const struct memcg *g, uint64_t *ret) {
        if (g->version == MEMCG_V1)
                return memcg_read_limit(g, ret);
        return read_u64(g, "memory.high", ret);
}

int memcg_write_cap(const struct memcg *g, uint64_t value) {
        if (g->version == MEMCG_V1)
                return memcg_set_limit(g, value);
        struct cgroup *cg = cgroup_new_cgroup(g->path);
        if (!cg)
                return -ENOMEM;
        int r = -ENOMEM;
        struct cgroup_controller *c = cgroup_add_controller(cg, "memory");
        if (c && (value == UINT64_MAX ? cgroup_add_value_string(c, "memory.high", "max")
                                      : cgroup_add_value_uint64(c, "memory.high", value)) == 0)
                r = cg_error(cgroup_modify_cgroup(cg));
        cgroup_free(&cg);
        return r;
}

int memcg_read(const struct memcg *g, struct memcg_sample *ret) {
        struct memcg_sample s = {};
        uint64_t stat[2] = {};
        int r;

        r = memcg_read_limit(g, &s.limit);
        if (r < 0)
                return r;
        if (g->version == MEMCG_V1) {
                static const char *const names[] = { "total_active_file", "total_inactive_file" };
                r = read_u64(g, "memory.usage_in_bytes", &s.usage);
                if (r >= 0)
                        r = read_u64(g, "memory.max_usage_in_bytes", &s.peak);
                if (r >= 0)
                        r = read_u64(g, "memory.failcnt", &s.failcnt);
                if (r >= 0)
                        r = read_stats(g, names, stat, 2);
                s.cap = s.limit;
        } else {
                static const char *const names[] = { "active_file", "inactive_file" };
                r = read_u64(g, "memory.current", &s.usage);
                if (r >= 0 && read_u64(g, "memory.peak", &s.peak) < 0)
                        s.peak = 0; /* memory.peak came with Linux 5.19 */
                if (r >= 0)
                        r = read_u64(g, "memory.high", &s.cap);
                if (r >= 0)
                        r = read_events_max(g, &s.failcnt);
                if (r >= 0)
                        r = read_stats(g, names, stat, 2);
        }
        if (r < 0)
                return r;
        s.file = stat[0] + stat[1];
        if (s.file > s.usage) /* counters are read one after the other */
                s.file = s.usage;
        s.anon = s.usage - s.file;
        *ret = s;
        return 0;
}

int memcg_set_limit(const struct memcg *g, uint64_t limit) {
        if (g->version != MEMCG_V1)
                return -EOPNOTSUPP;
        struct cgroup *cg = cgroup_new_cgroup(g->path);
        if (!cg)
                return -ENOMEM;
        int r = -ENOMEM;
        struct cgroup_controller *c = cgroup_add_controller(cg, "memory");
        if (c && cgroup_add_value_uint64(c, "memory.limit_in_bytes", limit) == 0)
                r = cg_error(cgroup_modify_cgroup(cg));
        cgroup_free(&cg);
        return r;
}

/* Kernels before the swappiness= argument of memory.reclaim (Linux 6.9) refuse it with
 * EINVAL: then plain "N" (reclaim by the cgroup's swappiness) from the first refusal on. A
 * process-wide fact of the running kernel, not per cgroup. */
static bool reclaim_swappiness_refused;

static int write_reclaim(int fd, uint64_t bytes, bool file_only) {
        char buf[48];
        int n = snprintf(buf, sizeof(buf), "%" PRIu64 "%s", bytes, file_only ? " swappiness=0" : "");
        return write(fd, buf, (size_t) n) < 0 ? negative_errno() : 0;
}

/* Direct write: memory.reclaim is an action, not a value, and its EAGAIN ("reclaimed less than
 * asked") must reach us as such; libcgroup's value writer reports through stdio buffering.
 * "N swappiness=0" asks for page cache, not anonymous memory (which would go to swap). */
int memcg_reclaim(const struct memcg *g, uint64_t bytes) {
        if (g->version != MEMCG_V2)
                return -EOPNOTSUPP;
        _cleanup_free_ char *p = memcg_file(g, "memory.reclaim");
        if (!p)
                return -ENOMEM;
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (!reclaim_swappiness_refused) {
                int r = write_reclaim(fd, bytes, true);
                if (r != -EINVAL)
                        return r;
                reclaim_swappiness_refused = true;
        }
        return write_reclaim(fd, bytes, false);
}

/* Direct file access: libcgroup has no call for cgroup.event_control. The kernel takes its own
 * references during the write, so only the eventfd stays open. */
static int v1_register_event(const struct memcg *g, const char *file, const char *args, int *ret_fd) {
        if (g->version != MEMCG_V1)
                return -EOPNOTSUPP;
        _cleanup_free_ char *fp = memcg_file(g, file), *cp = memcg_file(g, "cgroup.event_control");
        if (!fp || !cp)
                return -ENOMEM;
        _cleanup_close_ int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (efd < 0)
                return negative_errno();
        _cleanup_close_ int tfd = open(fp, O_RDONLY | O_CLOEXEC);
        if (tfd < 0)
                return negative_errno();
        _cleanup_close_ int cfd = open(cp, O_WRONLY | O_CLOEXEC);
        if (cfd < 0)
                return negative_errno();
        char line[128];
        int n = snprintf(line, sizeof(line), "%d %d %s", efd, tfd, args);
        if (n < 0 || (size_t) n >= sizeof(line))
                return -EINVAL;
        if (write(cfd, line, (size_t) n) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(efd);
        return 0;
}

int memcg_v1_threshold_fd(const struct memcg *g, uint64_t threshold, int *ret_fd) {
        char args[32];
        snprintf(args, sizeof(args), "%" PRIu64, threshold);
        return v1_register_event(g, "memory.usage_in_bytes", args, ret_fd);
}

int memcg_v1_pressure_fd(const struct memcg *g, const char *level, int *ret_fd) {
        return v1_register_event(g, "memory.pressure_level", level, ret_fd);
}

/* Direct file access: a PSI trigger is the open file description that wrote it (libcgroup has
 * no call for it); it fires POLLPRI and goes away when the fd is closed. */
int memcg_v2_psi_fd(const struct memcg *g, const char *trigger, int *ret_fd) {
        if (g->version != MEMCG_V2)
                return -EOPNOTSUPP;
        _cleanup_free_ char *p = memcg_file(g, "memory.pressure");
        if (!p)
                return -ENOMEM;
        _cleanup_close_ int fd = open(p, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (write(fd, trigger, strlen(trigger) + 1) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

bool memcg_is_pod_dir(const char *name, const char *uid) {
        size_t n = strlen(uid);
        if (n == 0 || n > 64)
                return false;
        if (startswith(name, "pod") && streq(name + 3, uid))
                return true; /* cgroupfs driver: .../pod<uid> */
        /* systemd driver: kubepods-burstable-pod<uid_>.slice */
        char want[80];
        snprintf(want, sizeof(want), "pod%s.slice", uid);
        for (char *c = want; *c; c++)
                if (*c == '-')
                        *c = '_';
        size_t ln = strlen(name), lw = strlen(want);
        return ln >= lw && streq(name + ln - lw, want) && (ln == lw || name[ln - lw - 1] == '-');
}

int memcg_find_pod(const char *uid, unsigned depth, char **ret_path) {
        _cleanup_free_ char *mount = NULL;
        struct cgroup_file_info info;
        void *handle = NULL;
        int base, r;

        r = memcg_hierarchy(NULL, &mount);
        if (r < 0)
                return r;
        size_t ml = strlen(mount);
        while (ml > 1 && mount[ml - 1] == '/')
                ml--;
        r = cgroup_walk_tree_begin("memory", "/", (int) depth, &handle, &info, &base);
        int found = -ENOENT;
        while (r == 0) {
                if (info.type == CGROUP_FILE_TYPE_DIR && info.path && memcg_is_pod_dir(info.path, uid) &&
                    info.full_path && strncmp(info.full_path, mount, ml) == 0) {
                        const char *rel = info.full_path + ml;
                        found = memcg_path_normalize(*rel ? rel : "/", ret_path);
                        break;
                }
                r = cgroup_walk_tree_next((int) depth, &handle, &info, base);
        }
        if (handle)
                (void) cgroup_walk_tree_end(&handle);
        return found;
}
