/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "memcg.h"

/* The cgroup files are read and written directly, not through libcgroup: its cgroup_init()
 * zeroes an 800 KiB table in every process that calls it (measured: +812 KiB of the agent's
 * anonymous memory, more than everything else the idle agent keeps), for what is a mount
 * lookup and a few one-line files. */

static int parse_u64(const char *s, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end != 0 || *s == '-')
                return -EINVAL;
        *ret = v;
        return 0;
}

/* A cgroup file's whole content (they are small: memory.stat is the largest, a few KiB). A
 * directory that vanished is -ENOENT, as the callers expect of a removed cgroup. */
static int read_cgroup_file(const struct memcg *g, const char *name, char **ret) {
        _cleanup_free_ char *p = memcg_file(g, name);
        if (!p)
                return -ENOMEM;
        return fs_read_file_full(p, 1u << 20, ret, NULL);
}

static int write_cgroup_file(const struct memcg *g, const char *name, const char *value) {
        _cleanup_free_ char *p = memcg_file(g, name);
        if (!p)
                return -ENOMEM;
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        /* One write: the kernel applies the value (and may refuse it) in that call. */
        ssize_t n = write(fd, value, strlen(value));
        if (n < 0)
                return negative_errno();
        return (size_t) n == strlen(value) ? 0 : -EIO;
}

/* One mountinfo line: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE
 * SUPEROPTS". Returns true for a cgroup mount that holds the memory controller: v1 with "memory"
 * among its super options, v2 whose root lists it in cgroup.controllers. */
static bool mountinfo_memory_line(char *line, char **ret_mount, enum memcg_version *ret_version) {
        char *sep = strstr(line, " - ");
        if (!sep)
                return false;
        *sep = 0;
        char fstype[32], superopts[512];
        if (sscanf(sep + 3, "%31s %*s %511s", fstype, superopts) != 2)
                return false;
        char root[8], mount[4096];
        if (sscanf(line, "%*s %*s %*s %7s %4095s", root, mount) != 2 || !streq(root, "/"))
                return false; /* a bind of a subtree (a container's view) is not the hierarchy */
        if (strchr(mount, '\\'))
                return false; /* escaped characters: not where a cgroup hierarchy is mounted */
        if (streq(fstype, "cgroup")) {
                bool has = false;
                for (char *save = NULL, *t = strtok_r(superopts, ",", &save); t; t = strtok_r(NULL, ",", &save))
                        has = has || streq(t, "memory");
                if (!has)
                        return false;
                *ret_version = MEMCG_V1;
        } else if (streq(fstype, "cgroup2")) {
                _cleanup_free_ char *cp = fs_path_join(mount, "cgroup.controllers"), *controllers = NULL;
                if (!cp || fs_read_file_full(cp, 4096, &controllers, NULL) < 0)
                        return false;
                bool has = false;
                for (char *save = NULL, *t = strtok_r(controllers, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
                        has = has || streq(t, "memory");
                if (!has)
                        return false;
                *ret_version = MEMCG_V2;
        } else
                return false;
        *ret_mount = strdup(mount);
        return true;
}

int memcg_hierarchy(enum memcg_version *ret_version, char **ret_mount) {
        _cleanup_free_ char *info = NULL;
        int r = fs_read_file_full("/proc/self/mountinfo", 16u << 20, &info, NULL);
        if (r < 0)
                return r;
        /* The kernel binds the memory controller to one hierarchy: at most one line matches. */
        for (char *save = NULL, *line = strtok_r(info, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *mount = NULL;
                enum memcg_version v;
                if (!mountinfo_memory_line(line, &mount, &v))
                        continue;
                if (!mount)
                        return -ENOMEM;
                if (ret_version)
                        *ret_version = v;
                if (ret_mount)
                        *ret_mount = mount;
                else
                        free(mount);
                return 0;
        }
        return -ENOENT;
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
        return fs_path_join(g->dir, name);
}

/* One value: the first line of a file. */
static int read_value(const struct memcg *g, const char *name, char *buf, size_t size) {
        _cleanup_free_ char *data = NULL;
        int r = read_cgroup_file(g, name, &data);
        if (r < 0)
                return r;
        data[strcspn(data, "\n")] = 0;
        if (strlen(data) >= size)
                return -EINVAL;
        strcpy(buf, data);
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

/* A "key value" file (memory.stat, memory.events): fills the values of the keys asked for;
 * keys not present stay as they were. */
static int read_keyed(const struct memcg *g, const char *file, const char *const *names, uint64_t *values, size_t n) {
        _cleanup_free_ char *data = NULL;
        int r = read_cgroup_file(g, file, &data);
        if (r < 0)
                return r;
        for (char *save = NULL, *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *value = strchr(line, ' ');
                if (!value)
                        continue;
                *value++ = 0;
                for (size_t i = 0; i < n; i++)
                        if (streq(line, names[i]) && parse_u64(value, &values[i]) < 0)
                                values[i] = 0;
        }
        return 0;
}

static int read_stats(const struct memcg *g, const char *const *names, uint64_t *values, size_t n) {
        return read_keyed(g, "memory.stat", names, values, n);
}

/* The "max" line of v2 memory.events: how often the cgroup hit memory.max. */
static int read_events_max(const struct memcg *g, uint64_t *ret) {
        static const char *const names[] = { "max" };
        uint64_t v = 0;
        int r = read_keyed(g, "memory.events", names, &v, 1);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

static int write_u64_or_max(const struct memcg *g, const char *name, uint64_t value) {
        char buf[32];
        if (value == UINT64_MAX)
                strcpy(buf, "max");
        else
                snprintf(buf, sizeof(buf), "%" PRIu64, value);
        return write_cgroup_file(g, name, buf);
}

uint64_t memcg_page_size(void) {
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? (uint64_t) p : 4096;
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
        return write_u64_or_max(g, "memory.high", value);
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
        /* v1 has no "max" spelling: -1 is "no limit". */
        if (limit == UINT64_MAX)
                return write_cgroup_file(g, "memory.limit_in_bytes", "-1");
        return write_u64_or_max(g, "memory.limit_in_bytes", limit);
}

/* Kernels before the swappiness= argument of memory.reclaim (Linux 6.9) refuse it with
 * EINVAL: then plain "N" (reclaim by the cgroup's swappiness) from the first refusal on. A
 * process-wide fact of the running kernel, not per cgroup. */
static atomic_bool reclaim_swappiness_refused; /* steps of several targets run on threads at once */

static int write_reclaim(int fd, uint64_t bytes, bool file_only) {
        char buf[48];
        int n = snprintf(buf, sizeof(buf), "%" PRIu64 "%s", bytes, file_only ? " swappiness=0" : "");
        return write(fd, buf, (size_t) n) < 0 ? negative_errno() : 0;
}

/* memory.reclaim is an action, not a value: its EAGAIN ("reclaimed less than asked") is the
 * answer, not a failure. "N swappiness=0" asks for page cache, not anonymous memory (which would go to swap). */
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

/* cgroup.event_control: the kernel takes its own references during the write, so only the
 * eventfd stays open. */
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

/* A PSI trigger is the open file description that wrote it; it fires POLLPRI and goes away
 * when the fd is closed. */
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

/* Depth-first below dir_fd (a directory at `rel` in the hierarchy), at most depth levels. */
static int find_pod_below(int dir_fd, const char *rel, const char *uid, unsigned depth, char **ret_path) {
        if (depth == 0)
                return -ENOENT;
        DIR *d = fs_opendir_at(dir_fd, ".");
        if (!d)
                return negative_errno();
        struct dirent *de;
        int found = -ENOENT, r;
        while (found == -ENOENT && (r = fs_read_entry(d, &de)) > 0) {
                if (de->d_type != DT_DIR)
                        continue; /* cgroupfs reports every type; a cgroup is a directory */
                _cleanup_free_ char *child = NULL;
                if (asprintf(&child, "%s/%s", streq(rel, "/") ? "" : rel, de->d_name) < 0)
                        found = -ENOMEM;
                else if (memcg_is_pod_dir(de->d_name, uid))
                        found = memcg_path_normalize(child, ret_path);
                else {
                        _cleanup_close_ int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0)
                                found = find_pod_below(fd, child, uid, depth - 1, ret_path);
                        if (found != -ENOENT && found < 0 && found != -ENOMEM)
                                found = -ENOENT; /* a cgroup removed meanwhile: look on */
                }
        }
        closedir(d);
        return found;
}

int memcg_find_pod(const char *uid, unsigned depth, char **ret_path) {
        _cleanup_free_ char *mount = NULL;
        int r = memcg_hierarchy(NULL, &mount);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = fs_open_directory(mount);
        if (fd < 0)
                return fd;
        return find_pod_below(fd, "/", uid, depth, ret_path);
}
