/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "fsutil.h"
#include "podsdir.h"
#include "strv.h"

/* The name the directory's pods are replaced under; each pod's own source names its file
 * ("pods-dir:/etc/pinion/pods.d/web.json"), which pod_store_replace_source() counts as owned. */
#define PODSDIR_SOURCE "pods-dir"
#define PODSDIR_MAX_FILE_SIZE ((size_t) 1024 * 1024)

/* Editors and deploy tools touch a directory in bursts (write temp, rename, chmod): one rescan
 * for the burst, at most this long after its first event. */
#define PODSDIR_DEBOUNCE_USEC (100 * USEC_PER_MSEC)
/* When re-watching fails (out of watches, a permission problem being fixed), try again later. */
#define PODSDIR_RETRY_USEC (1 * USEC_PER_SEC)

#define PODSDIR_DIR_MASK                                                                               \
        (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF |       \
         IN_MOVE_SELF | IN_ONLYDIR)
#define PODSDIR_ANCESTOR_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct podsdir {
        sd_event *event;
        struct pod_store *store;
        char *path;      /* without trailing slashes */
        char *node_name; /* may be NULL */

        /* inotify on path itself or, while it does not exist, on its nearest existing ancestor;
         * then watch_child is the name in that ancestor whose appearance matters. */
        sd_event_source *watch;
        char *watch_child;
        bool rearm; /* the watch must be set up again before the next scan */

        sd_event_source *debounce;

        podsdir_scan_fn scan_fn;
        void *scan_userdata;

        char **errors;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);
DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

int podsdir_new(sd_event *e, struct pod_store *store, const char *dir, const char *node_name,
                struct podsdir **ret) {
        _cleanup_(podsdir_freep) struct podsdir *d = NULL;
        size_t n;

        if (!e || !store || isempty(dir) || !ret)
                return -EINVAL;

        d = calloc(1, sizeof(struct podsdir));
        if (!d)
                return -ENOMEM;
        d->event = sd_event_ref(e);
        d->store = store;

        d->path = strdup(dir);
        if (!d->path)
                return -ENOMEM;
        /* "/etc/pinion/pods.d/" names the same directory; keep the sources tidy. */
        for (n = strlen(d->path); n > 1 && d->path[n - 1] == '/'; n--)
                d->path[n - 1] = '\0';

        if (node_name) {
                d->node_name = strdup(node_name);
                if (!d->node_name)
                        return -ENOMEM;
        }

        d->errors = calloc(1, sizeof(char *));
        if (!d->errors)
                return -ENOMEM;

        *ret = TAKE_PTR(d);
        return 0;
}

/* The store keeps the pods: freeing the watcher (shutdown, a reload that moves pods-dir) is not
 * the operator saying the pods are gone. A new watcher's first scan replaces them. */
struct podsdir *podsdir_free(struct podsdir *d) {
        if (!d)
                return NULL;
        sd_event_source_disable_unref(d->watch);
        sd_event_source_disable_unref(d->debounce);
        sd_event_unref(d->event);
        free(d->watch_child);
        free(d->path);
        free(d->node_name);
        strv_free(d->errors);
        free(d);
        return NULL;
}

void podsdir_set_scan_callback(struct podsdir *d, podsdir_scan_fn fn, void *userdata) {
        if (!d)
                return;
        d->scan_fn = fn;
        d->scan_userdata = userdata;
}

char *const *podsdir_errors(const struct podsdir *d) {
        static char *const empty[] = { NULL };
        return d && d->errors ? d->errors : empty;
}

const char *podsdir_path(const struct podsdir *d) {
        return d ? d->path : NULL;
}

/* ---- static pods ---- */

/* The plain SHA-256 of "namespace/name", its first 16 bytes printed as 8-4-4-4-12 hex: stable
 * across restarts and hosts, so a pod keeps its identity and registrations when the agent
 * restarts. (No version bits are forced: anyone can recompute it with sha256sum.) */
int podsdir_static_uid(const char *namespace, const char *name, char **ret) {
        _cleanup_free_ char *key = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        char *uid;

        if (isempty(namespace) || isempty(name) || !ret)
                return -EINVAL;
        if (asprintf(&key, "%s/%s", namespace, name) < 0)
                return -ENOMEM;
        if (EVP_Digest(key, strlen(key), md, &md_len, EVP_sha256(), NULL) != 1 || md_len < 16)
                return -EIO;

        if (asprintf(&uid,
                     "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7], md[8], md[9], md[10],
                     md[11], md[12], md[13], md[14], md[15]) < 0)
                return -ENOMEM;
        *ret = uid;
        return 0;
}

/* metadata.namespace/name as far as they are well-typed; parsing proper reports the rest. */
static int static_uid_for(const cJSON *obj, char **ret) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");

        if (!cJSON_IsString(name) || isempty(name->valuestring)) {
                *ret = NULL;
                return 0;
        }
        return podsdir_static_uid(cJSON_IsString(ns) && !isempty(ns->valuestring) ? ns->valuestring : "default",
                                  name->valuestring, ret);
}

/* A file says what the operator wants on this node; fill in what only the agent knows. */
static int static_pod_defaults(struct podsdir *d, struct pod *p, const char *path) {
        if (!p->node_name && d->node_name) {
                p->node_name = strdup(d->node_name);
                if (!p->node_name)
                        return -ENOMEM;
        }

        if (p->n_conditions == 0) {
                free(p->conditions);
                p->conditions = calloc(1, sizeof(struct pod_condition));
                if (!p->conditions)
                        return -ENOMEM;
                p->conditions[0].type = strdup("Ready");
                if (!p->conditions[0].type)
                        return -ENOMEM;
                p->conditions[0].status = true;
                p->n_conditions = 1;
        }

        free(p->source);
        if (asprintf(&p->source, PODSDIR_SOURCE ":%s", path) < 0) {
                p->source = NULL;
                return -ENOMEM;
        }
        return 0;
}

static bool only_whitespace(const char *p, const char *end) {
        for (; p < end; p++)
                if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
                        return false;
        return true;
}

/* cJSON ends a string at a NUL, escaped or raw: {"name": "a\u0000b"} would be read as "a", a
 * file that names one pod and is served as another. No field of a pod holds a NUL. */
static bool holds_nul(const char *data, size_t size) {
        if (memchr(data, 0, size))
                return true;
        for (size_t i = 0; i + 1 < size; i++)
                if (data[i] == '\\') {
                        if (data[i + 1] == 'u' && size - i >= 6 && memcmp(data + i + 2, "0000", 4) == 0)
                                return true;
                        i++; /* the escaped character: in "\\u0000" the pair is a backslash */
                }
        return false;
}

static int parse_pod_file(struct podsdir *d, const char *path, const char *data, size_t size,
                          struct pod **ret, char **ret_reason) {
        _cleanup_(cJSON_Deletep) cJSON *obj = NULL;
        _cleanup_(pod_unrefp) struct pod *p = NULL;
        _cleanup_free_ char *fallback = NULL;
        const char *end = NULL;
        int r;

        obj = cJSON_ParseWithLengthOpts(data, size, &end, false);
        if (!obj || !end || !only_whitespace(end, data + size)) {
                /* Let the pod parser phrase it, so both sources say the same thing. */
                r = pod_from_json_text(data, size, NULL, &p, ret_reason);
                if (r >= 0) {
                        *ret_reason = strdup("invalid JSON");
                        return *ret_reason ? -EINVAL : -ENOMEM;
                }
                return r;
        }
        if (holds_nul(data, size)) {
                *ret_reason = strdup("a string holds a NUL character (\\u0000)");
                return *ret_reason ? -EINVAL : -ENOMEM;
        }

        r = static_uid_for(obj, &fallback);
        if (r < 0)
                return r;
        r = pod_from_json(obj, fallback, &p, ret_reason);
        if (r < 0)
                return r;
        r = static_pod_defaults(d, p, path);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(p);
        return 0;
}

/* Returns 0 and a pod, -EINVAL with a reason for a file to skip, another error for failure. */
static int load_file(struct podsdir *d, int dir_fd, const char *name, const char *path, struct pod **ret,
                     char **ret_reason) {
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -EBADF;
        char proc[64];
        struct stat st;
        size_t size;
        int r;

        /* Follow symlinks: a directory laid out by an atomic writer (..data) holds links. Refuse
         * anything but regular files: reading a FIFO would block the loop. The check and the read
         * are of one inode (O_PATH, then reopened through /proc): a name checked, then opened,
         * may have become a FIFO in between. */
        fd = openat(dir_fd, name, O_PATH | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                r = negative_errno();
        else if (!S_ISREG(st.st_mode))
                r = -EBADFD;
        else {
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                r = read_file_full(proc, PODSDIR_MAX_FILE_SIZE, &data, &size);
        }

        if (r == -ENOMEM)
                return r;
        if (r == -EBADFD)
                *ret_reason = strdup("not a regular file");
        else if (r == -EFBIG)
                *ret_reason = strdup("larger than 1 MiB, refused");
        else if (r < 0)
                *ret_reason = strdup(strerror(-r));
        if (r < 0)
                return *ret_reason ? -EINVAL : -ENOMEM;

        return parse_pod_file(d, path, data, size, ret, ret_reason);
}

static bool is_pod_file_name(const char *name) {
        size_t n = strlen(name);
        /* Dotfiles are editors' temp files and atomic writers' internals. */
        return name[0] != '.' && n > 5 && streq(name + n - 5, ".json");
}

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The candidate file names in name order (the order that decides which of two duplicates wins).
 * A missing directory has none. */
static int list_names(DIR *dir, char ***ret) {
        _cleanup_strv_free_ char **names = calloc(1, sizeof(char *));
        struct dirent *de;
        int r;

        if (!names)
                return -ENOMEM;
        if (dir)
                for (;;) {
                        errno = 0;
                        de = readdir(dir);
                        if (!de) {
                                if (errno != 0)
                                        return negative_errno();
                                break;
                        }
                        if (!is_pod_file_name(de->d_name))
                                continue;
                        r = strv_extend(&names, de->d_name);
                        if (r < 0)
                                return r;
                }
        qsort(names, strv_length(names), sizeof(char *), compare_names);
        *ret = TAKE_PTR(names);
        return 0;
}

struct scan {
        struct pod **pods;
        char **paths; /* paths[i] is where pods[i] came from */
        size_t n_pods;
        char **errors;
        unsigned n_failed;
};

static void scan_done(struct scan *s) {
        for (size_t i = 0; i < s->n_pods; i++)
                pod_unref(s->pods[i]);
        free(s->pods);
        strv_free(s->paths);
        strv_free(s->errors);
}

_printf_(2, 3) static int scan_fail(struct scan *s, const char *fmt, ...) {
        va_list ap;
        char *m;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        s->n_failed++;
        return strv_push(&s->errors, m);
}

/* Two files for one pod: the operator copied a file and forgot to rename the pod. Keep the first
 * (name order), so which one wins does not depend on readdir order or on timing. */
static int scan_check_duplicate(struct scan *s, const struct pod *p, const char *path) {
        int r;

        for (size_t i = 0; i < s->n_pods; i++) {
                const struct pod *q = s->pods[i];

                if (streq(q->namespace, p->namespace) && streq(q->name, p->name))
                        r = scan_fail(s, "%s: pod %s/%s is already declared by %s, skipped", path,
                                      p->namespace, p->name, s->paths[i]);
                else if (streq(q->uid, p->uid))
                        r = scan_fail(s, "%s: uid %s is already used by %s (pod %s/%s), skipped", path,
                                      p->uid, s->paths[i], q->namespace, q->name);
                else
                        continue;
                return r < 0 ? r : 1;
        }
        return 0;
}

static int scan_add(struct scan *s, struct pod *p, const char *path) {
        struct pod **grown = realloc(s->pods, (s->n_pods + 1) * sizeof(struct pod *));
        int r;

        if (!grown)
                return -ENOMEM;
        s->pods = grown;
        r = strv_extend(&s->paths, path);
        if (r < 0)
                return r;
        s->pods[s->n_pods++] = pod_ref(p);
        return 0;
}

static int scan_file(struct podsdir *d, struct scan *s, int dir_fd, const char *name) {
        _cleanup_(pod_unrefp) struct pod *p = NULL;
        _cleanup_free_ char *path = NULL, *reason = NULL;
        int r;

        if (asprintf(&path, "%s%s%s", d->path, streq(d->path, "/") ? "" : "/", name) < 0)
                return -ENOMEM;

        r = load_file(d, dir_fd, name, path, &p, &reason);
        if (r == -EINVAL)
                return scan_fail(s, "%s: %s", path, strempty(reason));
        if (r < 0)
                return r;

        r = scan_check_duplicate(s, p, path);
        if (r != 0)
                return r < 0 ? r : 0;
        return scan_add(s, p, path);
}

static void scan_report(struct podsdir *d, unsigned n_loaded, unsigned n_failed) {
        if (d->scan_fn)
                d->scan_fn(d, n_loaded, n_failed, d->scan_userdata);
}

int podsdir_rescan(struct podsdir *d) {
        _cleanup_(scan_done) struct scan s = {};
        _cleanup_(closedirp) DIR *dir = NULL;
        _cleanup_strv_free_ char **names = NULL;
        int r;

        if (!d)
                return -EINVAL;

        s.errors = calloc(1, sizeof(char *));
        if (!s.errors)
                return -ENOMEM;

        dir = opendir(d->path);
        if (!dir && errno != ENOENT) {
                /* Unreadable: keep the pods we have (this is not the operator removing them) and
                 * say why; the watch retries on the next change. */
                r = negative_errno();
                if (scan_fail(&s, "%s: cannot read directory: %s", d->path, strerror(-r)) < 0)
                        return -ENOMEM;
                strv_free(d->errors);
                d->errors = TAKE_PTR(s.errors);
                scan_report(d, 0, 1);
                return r;
        }

        r = list_names(dir, &names);
        if (r < 0)
                return r;
        STRV_FOREACH(name, names) {
                r = scan_file(d, &s, dirfd(dir), *name);
                if (r < 0)
                        return r;
        }

        r = pod_store_replace_source(d->store, PODSDIR_SOURCE, s.pods, s.n_pods);
        if (r < 0)
                return r;

        strv_free(d->errors);
        d->errors = TAKE_PTR(s.errors);
        scan_report(d, (unsigned) s.n_pods, s.n_failed);
        return 0;
}

/* ---- watching ---- */

static int podsdir_schedule(struct podsdir *d, usec_t delay);

static int on_dir_event(sd_event_source *source, const struct inotify_event *ev, void *userdata) {
        struct podsdir *d = userdata;

        /* Any change may matter, dotfiles included: an atomic writer publishes by renaming
         * "..data", and the *.json files are links through it. The debounce makes this cheap. */
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT))
                d->rearm = true;
        (void) podsdir_schedule(d, PODSDIR_DEBOUNCE_USEC);
        return 0; /* an error would disable the watch */
}

static int on_ancestor_event(sd_event_source *source, const struct inotify_event *ev, void *userdata) {
        struct podsdir *d = userdata;

        if (!(ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT | IN_Q_OVERFLOW)) &&
            !(ev->len > 0 && streq_ptr(ev->name, d->watch_child)))
                return 0; /* something else appeared next to it */
        d->rearm = true;
        (void) podsdir_schedule(d, PODSDIR_DEBOUNCE_USEC);
        return 0;
}

/* Splits "/a/b/c" into "/a/b" and "c"; "c" into "." and "c"; "/c" into "/" and "c". */
static int split_parent(const char *path, char **ret_parent, char **ret_child) {
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *parent = NULL, *child = NULL;

        if (!slash)
                parent = strdup(".");
        else if (slash == path)
                parent = strdup("/");
        else
                parent = strndup(path, (size_t) (slash - path));
        child = strdup(slash ? slash + 1 : path);
        if (!parent || !child)
                return -ENOMEM;
        *ret_parent = TAKE_PTR(parent);
        *ret_child = TAKE_PTR(child);
        return 0;
}

/* The directory does not exist (yet): watch the nearest ancestor that does, for the next path
 * component to appear. Each step down re-arms, until the directory itself is watched. */
static int podsdir_watch_ancestor(struct podsdir *d) {
        _cleanup_free_ char *current = strdup(d->path);
        int r;

        if (!current)
                return -ENOMEM;

        for (;;) {
                _cleanup_free_ char *parent = NULL, *child = NULL;
                struct stat st;

                r = split_parent(current, &parent, &child);
                if (r < 0)
                        return r;
                r = sd_event_add_inotify(d->event, &d->watch, parent, PODSDIR_ANCESTOR_MASK, on_ancestor_event, d);
                if (r >= 0) {
                        d->watch_child = TAKE_PTR(child);
                        /* It may have appeared between the failed watch and this one. */
                        if (stat(current, &st) >= 0) {
                                d->rearm = true;
                                return podsdir_schedule(d, 0);
                        }
                        return 0;
                }
                if (r != -ENOENT || streq(parent, "/") || streq(parent, "."))
                        return r;
                free(current);
                current = TAKE_PTR(parent);
        }
}

static int podsdir_watch(struct podsdir *d) {
        int r;

        d->watch = sd_event_source_disable_unref(d->watch);
        free(d->watch_child);
        d->watch_child = NULL;
        d->rearm = false;

        r = sd_event_add_inotify(d->event, &d->watch, d->path, PODSDIR_DIR_MASK, on_dir_event, d);
        if (r == -ENOENT)
                r = podsdir_watch_ancestor(d);
        if (r < 0) {
                d->watch = sd_event_source_disable_unref(d->watch);
                d->rearm = true;
        }
        return r;
}

static int on_debounce(sd_event_source *source, uint64_t usec, void *userdata) {
        struct podsdir *d = userdata;

        /* Watch first, then scan: whatever changes after the scan's readdir is then seen. */
        if (d->rearm && podsdir_watch(d) < 0)
                (void) podsdir_schedule(d, PODSDIR_RETRY_USEC);
        (void) podsdir_rescan(d);
        return 0;
}

/* Coalesces: an armed timer stays as it is, so a steady stream of events cannot postpone the
 * rescan forever. */
static int podsdir_schedule(struct podsdir *d, usec_t delay) {
        int r;

        if (!d->debounce)
                return sd_event_add_time_relative(d->event, &d->debounce, CLOCK_MONOTONIC, delay,
                                                  10 * USEC_PER_MSEC, on_debounce, d);

        r = sd_event_source_get_enabled(d->debounce, NULL);
        if (r != 0)
                return r < 0 ? r : 0;
        r = sd_event_source_set_time_relative(d->debounce, delay);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(d->debounce, SD_EVENT_ONESHOT);
}

int podsdir_start(struct podsdir *d) {
        int r;

        if (!d)
                return -EINVAL;
        /* A watch that cannot be set up now (inotify limits are easy to hit on a busy node)
         * is retried from the debounce timer; the pods are loaded either way. */
        r = podsdir_watch(d);
        if (r < 0)
                (void) podsdir_schedule(d, PODSDIR_RETRY_USEC);
        int k = podsdir_rescan(d);
        return r < 0 ? r : k;
}
