/* SPDX-License-Identifier: MIT */
/* Whose socket is this: see socket-trust.h for the rule. */

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "socket-trust.h"

/* Symlinks among the directories (/var/run -> /run) resolve through realpath(); this bounds
 * how often a resolved target may itself need resolving (it never should: realpath() returns a
 * path without symlinks). */
#define MAX_LINK_DEPTH 4

_printf_(4, 5) static int refuse(int r, char *why, size_t why_size, const char *fmt, ...) {
        va_list ap;

        if (why && why_size > 0) {
                va_start(ap, fmt);
                (void) vsnprintf(why, why_size, fmt, ap);
                va_end(ap);
        }
        return r;
}

static bool uid_trusted(uid_t uid, uid_t owner) {
        return uid == 0 || uid == owner;
}

const char *socket_trust_default_path(void) {
        struct stat st;

        if (lstat(PINION_SOCKET_DEFAULT, &st) < 0 && errno == ENOENT && lstat(PINION_SOCKET_LEGACY, &st) == 0)
                return PINION_SOCKET_LEGACY;
        return PINION_SOCKET_DEFAULT;
}

int socket_trust_owner(uid_t *ret, char *why, size_t why_size) {
        const char *s = getenv(SOCKET_OWNER_ENV);
        char *end = NULL;
        unsigned long v;

        *ret = 0;
        if (isempty(s))
                return 0;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno != 0 || !end || *end != 0 || s[0] == '-' || v >= (unsigned long) (uid_t) -1)
                return refuse(-EINVAL, why, why_size, "$" SOCKET_OWNER_ENV "=%s is not a uid", s);
        *ret = (uid_t) v;
        return 0;
}

/* A directory on the way to the socket: nobody but root/owner may rename or replace what is in
 * it. Sticky directories (/tmp) are fine: there only an entry's owner can rename it. */
static int check_dir_stat(const char *dir, const struct stat *st, uid_t owner, char *why, size_t why_size) {
        if (!S_ISDIR(st->st_mode))
                return refuse(-EPERM, why, why_size, "%s is not a directory", dir);
        if (!uid_trusted(st->st_uid, owner))
                return refuse(-EPERM, why, why_size, "directory %s is owned by uid %u, not root", dir,
                              (unsigned) st->st_uid);
        if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
                return refuse(-EPERM, why, why_size,
                              "directory %s is writable by group or other (mode %04o): anyone could replace the socket",
                              dir, (unsigned) (st->st_mode & 07777));
        return 0;
}

static int check_dir_chain(const char *dir, uid_t owner, unsigned depth, char *why, size_t why_size);

/* One directory on the way down: a symlink counts as its resolved path, whose directories are
 * checked the same way (the symlink itself cannot change: its own directory passed already). */
static int check_component(const char *prefix, uid_t owner, unsigned depth, char *why, size_t why_size) {
        _cleanup_free_ char *target = NULL;
        struct stat st;

        if (lstat(prefix, &st) < 0)
                return refuse(-errno, why, why_size, "%s: %s", prefix, strerror(errno));
        if (!S_ISLNK(st.st_mode))
                return check_dir_stat(prefix, &st, owner, why, why_size);
        if (depth >= MAX_LINK_DEPTH)
                return refuse(-ELOOP, why, why_size, "%s: too many symlinks", prefix);
        target = realpath(prefix, NULL);
        if (!target)
                return refuse(-errno, why, why_size, "%s: %s", prefix, strerror(errno));
        return check_dir_chain(target, owner, depth + 1, why, why_size);
}

/* Every directory from / down to dir (absolute). */
static int check_dir_chain(const char *dir, uid_t owner, unsigned depth, char *why, size_t why_size) {
        _cleanup_free_ char *p = strdup(dir);
        struct stat st;
        int r;

        if (!p)
                return -ENOMEM;
        if (p[0] != '/')
                return refuse(-EINVAL, why, why_size, "%s is not an absolute path", dir);
        if (lstat("/", &st) < 0)
                return refuse(-errno, why, why_size, "/: %s", strerror(errno));
        r = check_dir_stat("/", &st, owner, why, why_size);
        for (size_t i = 1; r >= 0; i++) {
                char c = p[i];
                if (c != '/' && c != 0)
                        continue;
                if (p[i - 1] != '/') { /* skips the empty components of a//b and a/ */
                        p[i] = 0;
                        r = check_component(p, owner, depth, why, why_size);
                        p[i] = c;
                }
                if (c == 0)
                        break;
        }
        return r;
}

static char *dir_of(const char *path) {
        const char *slash = strrchr(path, '/');
        if (!slash)
                return strdup(".");
        if (slash == path)
                return strdup("/");
        return strndup(path, (size_t) (slash - path));
}

static char *absolute(const char *path) {
        char cwd[PATH_MAX];
        char *ret = NULL;

        if (path[0] == '/')
                return strdup(path);
        if (!getcwd(cwd, sizeof(cwd)))
                return NULL;
        if (asprintf(&ret, "%s/%s", cwd, path) < 0)
                return NULL;
        return ret;
}

static int check_socket(const char *path, uid_t owner, bool follow, char *why, size_t why_size) {
        _cleanup_free_ char *dir = dir_of(path);
        struct stat st;
        int r;

        if (!dir)
                return -ENOMEM;
        if (lstat(path, &st) < 0)
                return refuse(-errno, why, why_size, "%s: %s", path, strerror(errno));
        r = check_dir_chain(dir, owner, 0, why, why_size);
        if (r < 0)
                return r;
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                _cleanup_free_ char *resolved = NULL;
                ssize_t n;

                if (!follow)
                        return refuse(-EPERM, why, why_size, "%s is a symlink to a symlink", path);
                n = readlink(path, target, sizeof(target) - 1);
                if (n < 0)
                        return refuse(-errno, why, why_size, "%s: %s", path, strerror(errno));
                target[n] = 0;
                if (target[0] == '/')
                        resolved = strdup(target);
                else if (asprintf(&resolved, "%s/%s", dir, target) < 0)
                        resolved = NULL;
                if (!resolved)
                        return -ENOMEM;
                return check_socket(resolved, owner, false, why, why_size);
        }
        if (!S_ISSOCK(st.st_mode))
                return refuse(-EPERM, why, why_size, "%s is not a socket", path);
        if (!uid_trusted(st.st_uid, owner))
                return refuse(-EPERM, why, why_size, "socket %s is owned by uid %u, not root", path,
                              (unsigned) st.st_uid);
        return 0;
}

int socket_trust_check_path(const char *path, uid_t owner, char *why, size_t why_size) {
        _cleanup_free_ char *abs = NULL;

        if (isempty(path))
                return refuse(-EINVAL, why, why_size, "no socket path");
        abs = absolute(path);
        if (!abs)
                return -ENOMEM;
        return check_socket(abs, owner, true, why, why_size);
}

int socket_trust_check_peer(int fd, uid_t owner, char *why, size_t why_size) {
        struct ucred cred = {};
        socklen_t len = sizeof(cred);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return refuse(-errno, why, why_size, "SO_PEERCRED: %s", strerror(errno));
        if (!uid_trusted(cred.uid, owner))
                return refuse(-EPERM, why, why_size, "the process serving the socket (pid %d) runs as uid %u, not root",
                              (int) cred.pid, (unsigned) cred.uid);
        return 0;
}

/* ---- the agent's side ---- */

int socket_trust_dir_prepare(const char *socket_path, char *why, size_t why_size) {
        _cleanup_free_ char *dir = dir_of(socket_path);

        if (!dir)
                return -ENOMEM;
        /* Missing: made here with its final mode (the umask may be stricter). */
        if (mkdir(dir, 0755) == 0 && chmod(dir, 0755) < 0)
                return refuse(-errno, why, why_size, "%s: %s", dir, strerror(errno));
        return socket_trust_dir_check(socket_path, why, why_size);
}

int socket_trust_dir_check(const char *socket_path, char *why, size_t why_size) {
        _cleanup_free_ char *dir = dir_of(socket_path);
        struct stat st;

        if (!dir)
                return -ENOMEM;
        if (lstat(dir, &st) < 0)
                return refuse(-errno, why, why_size, "%s: %s", dir, strerror(errno));
        if (S_ISLNK(st.st_mode))
                return refuse(-EPERM, why, why_size, "socket directory %s is a symlink", dir);
        if (!S_ISDIR(st.st_mode))
                return refuse(-EPERM, why, why_size, "socket directory %s is not a directory", dir);
        if (st.st_uid != geteuid())
                return refuse(-EPERM, why, why_size, "socket directory %s is owned by uid %u, not %u", dir,
                              (unsigned) st.st_uid, (unsigned) geteuid());
        if (st.st_mode & (S_IWGRP | S_IWOTH))
                return refuse(-EPERM, why, why_size,
                              "socket directory %s is writable by group or other (mode %04o): anyone could replace the socket",
                              dir, (unsigned) (st.st_mode & 07777));
        return 0;
}

int socket_trust_legacy_link(const char *runtime_dir, const char *socket_path) {
        _cleanup_free_ char *dir = dir_of(socket_path), *sockets = NULL, *link = NULL, *target = NULL,
                            *tmp = NULL;
        const char *name = strrchr(socket_path, '/');
        struct stat st;

        if (!dir || asprintf(&sockets, "%s/" PINION_SOCKETS_SUBDIR, runtime_dir) < 0)
                return -ENOMEM;
        if (!name || !streq(dir, sockets))
                return 0;
        name++;
        if (asprintf(&link, "%s/%s", runtime_dir, name) < 0 ||
            asprintf(&target, PINION_SOCKETS_SUBDIR "/%s", name) < 0 ||
            asprintf(&tmp, "%s/.%s.link", runtime_dir, name) < 0)
                return -ENOMEM;
        if (lstat(link, &st) == 0 && !S_ISSOCK(st.st_mode) && !S_ISLNK(st.st_mode))
                return -EEXIST;
        /* Made aside and renamed over: clients never see the path missing. */
        (void) unlink(tmp);
        if (symlink(target, tmp) < 0)
                return -errno;
        if (rename(tmp, link) < 0) {
                int r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 1;
}
