/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <search.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "fs.h"
#include "podsdir-internal.h"
#include "podsdir.h"
#include "strv.h"

/* A full rescan is for what per-file events cannot say: an atomic writer's "..data" swap changes
 * what every link points at, and a replaced directory or an overflowed queue leaves nothing to go
 * by. Such changes come in bursts (write the version, link it, rename it): one rescan for the
 * burst, at most this long after its first event. */
#define PODSDIR_DEBOUNCE_USEC (100 * USEC_PER_MSEC)
/* When re-watching fails (out of watches, a permission problem being fixed), try again later. */
#define PODSDIR_RETRY_USEC (1 * USEC_PER_SEC)

#define PODSDIR_DIR_MASK                                                                               \
        (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF |       \
         IN_MOVE_SELF | IN_ONLYDIR)
#define PODSDIR_ANCESTOR_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

/* One *.json name in the directory and what it says. */
struct pod_file {
        char *name;
        char *path;
        struct pod *pod;  /* the last version that parsed; NULL if none has */
        uint64_t uid_hash, name_hash; /* pod_hashes() of pod */
        char *problem;    /* "PATH: reason" when what is there now is not a pod */
        char *clash;      /* "PATH: ... already declared by ..." when an earlier file has its pod */
        bool published;   /* pod is in the store on this file's behalf */
};

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

        sd_event_source *debounce; /* the pending full rescan */

        podsdir_scan_fn scan_fn;
        void *scan_userdata;

        struct pod_file *files; /* sorted by name: the order that decides between duplicates */
        size_t n_files;
        char *dir_problem;      /* the directory could not be read at the last rescan */
        char **errors;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

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

static void pod_file_done(struct pod_file *f) {
        free(f->name);
        free(f->path);
        pod_unref(f->pod);
        free(f->problem);
        free(f->clash);
}

static void files_free(struct pod_file *files, size_t n) {
        for (size_t i = 0; i < n; i++)
                pod_file_done(&files[i]);
        free(files);
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
        files_free(d->files, d->n_files);
        free(d->dir_problem);
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

/* ---- the files and what they put in the store ---- */

/* Hashes of the two keys no two published pods may share: the uid and namespace/name. */
static void pod_hashes(const struct pod *p, uint64_t *ret_uid, uint64_t *ret_name) {
        *ret_uid = string_hash(STRING_HASH_INIT, p->uid);
        *ret_name = string_hash(string_hash(string_hash(STRING_HASH_INIT, p->namespace), "/"), p->name);
}

static void file_set_pod(struct pod_file *f, struct pod *p) {
        pod_unref(f->pod);
        f->pod = p;
        if (p)
                pod_hashes(p, &f->uid_hash, &f->name_hash);
}

static bool pods_clash(const struct pod *a, const struct pod *b) {
        return streq(a->uid, b->uid) || (streq(a->namespace, b->namespace) && streq(a->name, b->name));
}

/* Why file f's pod is not published because of the earlier file g's; NULL if it may be. */
static int clash_reason(const struct pod_file *f, const struct pod_file *g, char **ret) {
        const struct pod *p = f->pod, *q = g->pod;
        int r;

        *ret = NULL;
        if (streq(q->namespace, p->namespace) && streq(q->name, p->name))
                r = asprintf(ret, "%s: pod %s/%s is already declared by %s, skipped", f->path, p->namespace,
                             p->name, g->path);
        else if (streq(q->uid, p->uid))
                r = asprintf(ret, "%s: uid %s is already used by %s (pod %s/%s), skipped", f->path, p->uid,
                             g->path, q->namespace, q->name);
        else
                return 0;
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 1;
}

/* Two files for one pod: the operator copied a file and forgot to rename the pod. Keep the first
 * (name order), so which one wins depends neither on readdir order nor on which changed last. */
static int compare_uids(const void *a, const void *b) {
        return strcmp(((const struct pod_file *) a)->pod->uid, ((const struct pod_file *) b)->pod->uid);
}

static int compare_pod_names(const void *a, const void *b) {
        const struct pod *p = ((const struct pod_file *) a)->pod, *q = ((const struct pod_file *) b)->pod;
        int c = strcmp(p->namespace, q->namespace);
        return c ? c : strcmp(p->name, q->name);
}

static void keep_node(void *node) {
        (void) node; /* the trees point into d->files */
}

/* The earlier published file f's pod clashes with (by uid or by name, the first in file order),
 * through two search trees of what is published so far: a pods-dir of thousands is n log n at
 * start, not n² pairs. NULL: none. */
static const struct pod_file *first_clash(void *by_uid, void *by_name, const struct pod_file *f) {
        void *u = tfind(f, &by_uid, compare_uids), *n = tfind(f, &by_name, compare_pod_names);
        const struct pod_file *gu = u ? *(const struct pod_file **) u : NULL;
        const struct pod_file *gn = n ? *(const struct pod_file **) n : NULL;

        if (gu && gn)
                return gu < gn ? gu : gn;
        return gu ? gu : gn;
}

static int publish_all(struct podsdir *d) {
        _cleanup_free_ struct pod **pods = malloc(MAX(d->n_files, 1u) * sizeof(struct pod *));
        void *by_uid = NULL, *by_name = NULL;
        size_t n = 0;
        int r = 0;

        if (!pods)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_files; i++) {
                struct pod_file *f = &d->files[i];

                f->clash = mfree(f->clash);
                f->published = false;
                if (!f->pod)
                        continue;
                const struct pod_file *g = first_clash(by_uid, by_name, f);
                if (g && clash_reason(f, g, &f->clash) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (f->clash)
                        continue;
                /* Published: in both trees (a new key in each, or it would have clashed). */
                if (!tsearch(f, &by_uid, compare_uids) || !tsearch(f, &by_name, compare_pod_names)) {
                        r = -ENOMEM;
                        break;
                }
                f->published = true;
                pods[n++] = f->pod;
        }
        tdestroy(by_uid, keep_node);
        tdestroy(by_name, keep_node);
        if (r < 0)
                return r;
        r = pod_store_replace_source(d->store, PODSDIR_SOURCE, pods, n);
        return r < 0 ? r : 0;
}

static bool clashes_with_another(const struct podsdir *d, const struct pod_file *f, const struct pod *p) {
        uint64_t uid_hash, name_hash;

        if (!p)
                return false;
        /* Every file is looked at on every change: compare hashes first, strings on a match. */
        pod_hashes(p, &uid_hash, &name_hash);
        for (size_t i = 0; i < d->n_files; i++) {
                const struct pod_file *g = &d->files[i];
                if (g != f && g->pod && (g->uid_hash == uid_hash || g->name_hash == name_hash) && pods_clash(g->pod, p))
                        return true;
        }
        return false;
}

/* Only if the store's pod with this uid is still one of ours (another source may have put one). */
static int unpublish(struct podsdir *d, const char *uid) {
        struct pod *p = pod_store_get(d->store, uid);

        if (!p || !p->source || !startswith(p->source, PODSDIR_SOURCE ":"))
                return 0;
        return pod_store_remove(d->store, uid);
}

/* One file changed from old (published or not) to f->pod (f NULL: the file is gone). When
 * neither version shares a uid or a name with another file's pod, which file wins cannot have
 * changed anywhere else: only this pod is put or removed. Otherwise the winners are worked out
 * again from what is in memory (no file is read). */
static int publish_change(struct podsdir *d, struct pod_file *f, struct pod *old, bool old_published) {
        struct pod *new = f ? f->pod : NULL;
        int r;

        if ((old && !old_published) || clashes_with_another(d, f, old) || clashes_with_another(d, f, new))
                return publish_all(d);

        if (old && (!new || !streq(old->uid, new->uid))) {
                r = unpublish(d, old->uid);
                if (r < 0)
                        return r;
        }
        if (f) {
                f->clash = mfree(f->clash);
                f->published = !!new;
        }
        if (new) {
                r = pod_store_put(d->store, new);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int push_error(char ***errors, const char *e) {
        return e ? strv_extend(errors, e) : 0;
}

/* The problems in name order (the directory's own first), and the scan callback. */
static int report(struct podsdir *d) {
        _cleanup_strv_free_ char **errors = calloc(1, sizeof(char *));
        unsigned n_loaded = 0;

        if (!errors || push_error(&errors, d->dir_problem) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_files; i++) {
                if (push_error(&errors, d->files[i].problem) < 0 || push_error(&errors, d->files[i].clash) < 0)
                        return -ENOMEM;
                n_loaded += d->files[i].published;
        }
        strv_free(d->errors);
        d->errors = TAKE_PTR(errors);
        if (d->scan_fn)
                d->scan_fn(d, n_loaded, (unsigned) strv_length(d->errors), d->scan_userdata);
        return 0;
}

static int file_path(const struct podsdir *d, const char *name, char **ret) {
        return asprintf(ret, "%s%s%s", d->path, streq(d->path, "/") ? "" : "/", name) < 0 ? -ENOMEM : 0;
}

/* Reads f again (through dir_fd, or by its path with AT_FDCWD). A file that no longer parses keeps the version read before (a half-saved or
 * mistyped edit does not take a running pod away) and says why. Returns -ENOENT if it is gone. */
static int file_read(struct podsdir *d, int dir_fd, struct pod_file *f) {
        _cleanup_free_ char *reason = NULL;
        struct pod *p = NULL;
        int r;

        r = podsdir_file_load(dir_fd, dir_fd == AT_FDCWD ? f->path : f->name, f->path, d->node_name, &p, &reason);
        if (r == -EINVAL) {
                free(f->problem);
                if (asprintf(&f->problem, "%s: %s%s", f->path, strempty(reason),
                             f->pod ? "; its last good version stays" : "") < 0) {
                        f->problem = NULL;
                        return -ENOMEM;
                }
                return 0;
        }
        if (r < 0)
                return r;
        file_set_pod(f, p);
        f->problem = mfree(f->problem);
        return 0;
}

/* Lower bound of name in the files. */
static size_t files_index(const struct pod_file *files, size_t n, const char *name, bool *ret_found) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(files[mid].name, name) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = lo < n && streq(files[lo].name, name);
        return lo;
}

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The candidate file names in name order. A missing directory has none. */
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
                        if (!podsdir_file_is_pod_name(de->d_name))
                                continue;
                        r = strv_extend(&names, de->d_name);
                        if (r < 0)
                                return r;
                }
        qsort(names, strv_length(names), sizeof(char *), compare_names);
        *ret = TAKE_PTR(names);
        return 0;
}

/* A new table of the files now in the directory, each read; a file read before starts from its
 * last good version. */
static int read_all(struct podsdir *d, DIR *dir, struct pod_file **ret, size_t *ret_n) {
        _cleanup_strv_free_ char **names = NULL;
        struct pod_file *files;
        size_t n = 0;
        int r;

        r = list_names(dir, &names);
        if (r < 0)
                return r;
        files = calloc(MAX(strv_length(names), 1u), sizeof(struct pod_file));
        if (!files)
                return -ENOMEM;
        STRV_FOREACH(name, names) {
                struct pod_file *f = &files[n];
                bool found;
                size_t i = files_index(d->files, d->n_files, *name, &found);

                f->name = strdup(*name);
                if (!f->name || file_path(d, *name, &f->path) < 0) {
                        r = -ENOMEM;
                        break;
                }
                file_set_pod(f, found ? pod_ref(d->files[i].pod) : NULL);
                r = file_read(d, dirfd(dir), f);
                if (r == -ENOENT) { /* gone since readdir */
                        pod_file_done(f);
                        *f = (struct pod_file) {};
                        continue;
                }
                if (r < 0)
                        break;
                n++;
        }
        if (r < 0 && r != -ENOENT) {
                files_free(files, n + 1);
                return r;
        }
        *ret = files;
        *ret_n = n;
        return 0;
}

int podsdir_rescan(struct podsdir *d) {
        _cleanup_(closedirp) DIR *dir = NULL;
        struct pod_file *files = NULL;
        size_t n = 0;
        int r;

        if (!d)
                return -EINVAL;

        d->dir_problem = mfree(d->dir_problem);
        dir = opendir(d->path);
        if (!dir && errno != ENOENT) {
                /* Unreadable: keep the pods we have (this is not the operator removing them) and
                 * say why; the watch retries on the next change. */
                r = negative_errno();
                if (asprintf(&d->dir_problem, "%s: cannot read directory: %s", d->path, strerror(-r)) < 0)
                        d->dir_problem = NULL;
                (void) report(d);
                return r;
        }

        if (dir) {
                r = read_all(d, dir, &files, &n);
                if (r < 0)
                        return r;
        }
        files_free(d->files, d->n_files);
        d->files = files;
        d->n_files = n;

        r = publish_all(d);
        if (r < 0)
                return r;
        return report(d);
}

/* ---- one file at a time ---- */

static int file_gone(struct podsdir *d, const char *name) {
        _cleanup_(pod_unrefp) struct pod *old = NULL;
        bool found, published;
        size_t i = files_index(d->files, d->n_files, name, &found);
        int r;

        if (!found)
                return 0;
        old = TAKE_PTR(d->files[i].pod);
        published = d->files[i].published;
        pod_file_done(&d->files[i]);
        memmove(d->files + i, d->files + i + 1, (d->n_files - i - 1) * sizeof(struct pod_file));
        d->n_files--;

        r = publish_change(d, NULL, old, published);
        if (r < 0)
                return r;
        return report(d);
}

static int file_insert(struct podsdir *d, size_t at, const char *name) {
        _cleanup_free_ char *copy = strdup(name), *path = NULL;
        struct pod_file *grown;

        if (!copy || file_path(d, name, &path) < 0)
                return -ENOMEM;
        grown = realloc(d->files, (d->n_files + 1) * sizeof(struct pod_file));
        if (!grown)
                return -ENOMEM;
        d->files = grown;
        memmove(d->files + at + 1, d->files + at, (d->n_files - at) * sizeof(struct pod_file));
        d->files[at] = (struct pod_file) { .name = TAKE_PTR(copy), .path = TAKE_PTR(path) };
        d->n_files++;
        return 0;
}

/* The file's content is complete (closed after writing, renamed in, linked): read it, and only
 * it. */
static int file_changed(struct podsdir *d, const char *name) {
        _cleanup_(pod_unrefp) struct pod *old = NULL;
        bool found, published = false;
        size_t i = files_index(d->files, d->n_files, name, &found);
        int r;

        if (!found) {
                r = file_insert(d, i, name);
                if (r < 0)
                        return r;
        }
        struct pod_file *f = &d->files[i];
        old = pod_ref(f->pod);
        published = f->published;

        r = file_read(d, AT_FDCWD, f);
        if (r == -ENOENT)
                return file_gone(d, name);
        if (r < 0)
                return r;
        if (f->pod != old) {
                r = publish_change(d, f, old, published);
                if (r < 0)
                        return r;
        }
        return report(d);
}

/* IN_CREATE alone means complete only for what is made in one step: a symlink, a link to an
 * existing file, something that is not a file at all (reported). A regular file just created is
 * being written: it is read on IN_CLOSE_WRITE. */
static bool created_complete(const struct podsdir *d, const char *name, uint32_t mask) {
        _cleanup_free_ char *path = NULL;
        struct stat st;

        if (mask & IN_ISDIR)
                return true;
        if (file_path(d, name, &path) < 0 || lstat(path, &st) < 0)
                return false;
        return !S_ISREG(st.st_mode) || st.st_nlink > 1;
}

/* ---- watching ---- */

static int podsdir_schedule(struct podsdir *d, usec_t delay);

/* Names starting with ".." are an atomic writer's: "..data" is the link every *.json goes
 * through, renamed to publish a new version. Its version directories ("..2024_...") come and go
 * without changing what "..data" points at. */
static bool is_atomic_writer_link(const struct inotify_event *ev) {
        return ev->len > 0 && startswith(ev->name, "..") && !(ev->mask & IN_ISDIR);
}

static int dir_event(struct podsdir *d, const struct inotify_event *ev) {
        if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
                return file_gone(d, ev->name);
        if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO) ||
            (ev->mask & IN_CREATE && created_complete(d, ev->name, ev->mask)))
                return file_changed(d, ev->name);
        return 0;
}

static int on_dir_event(sd_event_source *source, const struct inotify_event *ev, void *userdata) {
        struct podsdir *d = userdata;

        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
                /* The directory itself went or was replaced: watch what is there now, then read it. */
                d->rearm = true;
                (void) podsdir_schedule(d, PODSDIR_DEBOUNCE_USEC);
        } else if (ev->mask & IN_Q_OVERFLOW)
                /* More changes at once than the kernel queues: some were not seen. */
                (void) podsdir_schedule(d, 0);
        else if (is_atomic_writer_link(ev))
                (void) podsdir_schedule(d, PODSDIR_DEBOUNCE_USEC);
        else if (!d->rearm && ev->len > 0 && podsdir_file_is_pod_name(ev->name) && dir_event(d, ev) < 0)
                /* Out of memory half-way: the next full read puts things right. */
                (void) podsdir_schedule(d, PODSDIR_RETRY_USEC);
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
