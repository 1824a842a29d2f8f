/* SPDX-License-Identifier: MIT */
/* pinion-cni: the CNI plugin (spec 1.1.0). A thin client: it checks its environment and the
 * network config on stdin, forwards the operation to piniond (POST /v1/cni on the agent's Unix
 * socket) and prints the agent's result or a CNI error on stdout. The agent owns the addresses
 * and the kernel state; VERSION is answered here, STATUS reports 50 when the agent is away.
 *
 * It is exec'd for every operation and copied onto nodes as it is (units/kubernetes/install-cni),
 * so it is one static binary where the build has musl (configure: --with-static-plugin), and links
 * no library but libc in any case: no libcjson on the node, and none of glibc's start-up, which on
 * a VM costs more than the rest of the plugin (it asks the CPU its features and caches with
 * dozens of CPUID instructions, each a VM exit). It reads the config's top-level strings it
 * checks itself (json-text.h) and forwards the config as it came; the agent parses and checks
 * all of it with cJSON. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>

#include "cni.h"
#include "json-text.h"
#include "socket-trust.h"

#define MAX_STDIN (1u << 20)
#define MAX_RESPONSE (4u << 20)
/* Long enough for an ADD queued behind many others on a busy node; the runtime has its own. */
#define REQUEST_TIMEOUT_MS 120000L

struct buffer {
        char *data;
        size_t size;
        bool too_large;
};

static const char *env_getenv(const char *name, void *userdata) {
        return getenv(name);
}

/* Prints a CNI error on stdout (the spec's channel) and a line on stderr for humans. */
static int fail(const struct cni_error *e, const char *cni_version) {
        _cleanup_free_ char *text = NULL;

        if (cni_error_text(e, cni_version, &text) >= 0)
                printf("%s\n", text);
        else
                printf("{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":\"out of memory\"}\n", CNI_SPEC_VERSION, e->code);
        fprintf(stderr, "pinion-cni: %s%s%s (code %d)\n", e->msg ? e->msg : "error", e->details ? ": " : "",
                e->details ? e->details : "", e->code);
        fflush(stdout);
        return EXIT_FAILURE;
}

static int fail_oom(void) {
        struct cni_error e = { .code = CNI_ERR_INTERNAL, .msg = (char *) "out of memory" };
        return fail(&e, NULL);
}

static int read_stdin(struct buffer *b) {
        size_t cap = 0;

        for (;;) {
                if (b->size + 1 >= cap) {
                        if (cap >= MAX_STDIN + 2)
                                return -EFBIG;
                        cap = cap ? cap * 2 : 8192;
                        char *grown = realloc(b->data, cap);
                        if (!grown)
                                return -ENOMEM;
                        b->data = grown;
                }
                ssize_t n = read(STDIN_FILENO, b->data + b->size, cap - b->size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                b->size += (size_t) n;
        }
        if (b->size > MAX_STDIN)
                return -EFBIG;
        if (b->data)
                b->data[b->size] = '\0';
        return 0;
}

/* ---- the request to the agent ----
 *
 * One HTTP/1.1 POST on the agent's Unix socket, "Connection: close", read until the answer is
 * complete (Content-Length) or the connection ends. Written out
 * here rather than through libcurl on purpose: the plugin is exec'd for every operation, and
 * merely linking libcurl (and the TLS, LDAP, Kerberos, SSH libraries it pulls in) costs ~6ms of
 * library constructors per exec on Debian 12 — more than the whole rest of a DEL. The reply is
 * always from our own agent (libmicrohttpd, Content-Length framing). */

static int set_timeouts(int fd) {
        struct timeval tv = { .tv_sec = REQUEST_TIMEOUT_MS / 1000 };
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        return 0;
}

/* Head and body in one sendmsg(): the agent then reads the whole request at once rather than
 * waking for the head and again for the body. */
static int write_all(int fd, const char *head, size_t head_size, const char *body, size_t body_size) {
        struct iovec iov[2] = { { (void *) head, head_size }, { (void *) body, body_size } };
        size_t i = 0;

        while (i < ELEMENTSOF(iov)) {
                struct msghdr mh = { .msg_iov = iov + i, .msg_iovlen = ELEMENTSOF(iov) - i };
                ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                }
                size_t left = (size_t) n;
                while (i < ELEMENTSOF(iov) && left >= iov[i].iov_len)
                        left -= iov[i++].iov_len;
                if (i < ELEMENTSOF(iov)) {
                        iov[i].iov_base = (char *) iov[i].iov_base + left;
                        iov[i].iov_len -= left;
                }
        }
        return 0;
}

/* Whether b (NUL-terminated) holds a whole answer: its head and the Content-Length bytes of body
 * that follow. The agent closes the connection after the answer, but that comes later (its loop
 * tidies up first): the plugin stops reading here, not at the close. No Content-Length: the
 * body ends with the connection. */
static bool response_complete(const struct buffer *b) {
        const char *end = b->data ? strstr(b->data, "\r\n\r\n") : NULL;

        if (!end)
                return false;
        for (const char *line = strstr(b->data, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n"))
                if (strncasecmp(line + 2, "Content-Length:", 15) == 0) {
                        char *num_end;
                        unsigned long long n = strtoull(line + 17, &num_end, 10);
                        if (num_end == line + 17)
                                return false;
                        return (unsigned long long) (b->size - (size_t) (end + 4 - b->data)) >= n;
                }
        return false;
}

static int read_all(int fd, struct buffer *b) {
        for (;;) {
                if (b->size + 4096 + 1 > MAX_RESPONSE) {
                        b->too_large = true;
                        return -EFBIG;
                }
                char *grown = realloc(b->data, b->size + 4096 + 1);
                if (!grown)
                        return -ENOMEM;
                b->data = grown;
                ssize_t n = recv(fd, b->data + b->size, 4096, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -ETIMEDOUT : -errno;
                }
                if (n == 0)
                        break;
                b->size += (size_t) n;
                b->data[b->size] = '\0';
                if (response_complete(b))
                        break;
        }
        if (b->data)
                b->data[b->size] = '\0';
        return 0;
}

/* Splits "HTTP/1.1 200 OK\r\n...\r\n\r\nBODY" into status and body (in place). */
static int parse_response(struct buffer *b, long *ret_status, char **ret_body, size_t *ret_size) {
        char *end, *cl;
        long status;

        if (!b->data || b->size < 12 || strncmp(b->data, "HTTP/1.", 7) != 0)
                return -EBADMSG;
        status = strtol(b->data + 9, &end, 10);
        if (end != b->data + 12 || status < 100 || status > 599)
                return -EBADMSG;
        end = strstr(b->data, "\r\n\r\n");
        if (!end)
                return -EBADMSG;
        *end = '\0';
        if (strcasestr(b->data, "\r\nTransfer-Encoding:"))
                return -EBADMSG; /* the agent frames with Content-Length */
        *ret_body = end + 4;
        *ret_size = b->size - (size_t) (end + 4 - b->data);
        cl = strcasestr(b->data, "\r\nContent-Length:");
        if (cl) {
                unsigned long long n = strtoull(cl + 17, NULL, 10);
                if (n > *ret_size)
                        return -EBADMSG; /* cut short */
                *ret_size = (size_t) n;
        }
        (*ret_body)[*ret_size] = '\0';
        *ret_status = status;
        return 0;
}

/* Connects to the agent: the socket (before connect) and its peer (before a byte of the body,
 * which names the pod, is sent) must be the agent's. Returns the fd, -EPERM with why set if they
 * are not, other -errno if the agent is not there. */
static int agent_connect(const char *socket_path, char *why, size_t why_size) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        uid_t owner;
        int r;

        r = socket_trust_owner(&owner, why, why_size);
        if (r < 0)
                return -EPERM;
        r = socket_trust_check_path(socket_path, owner, why, why_size);
        if (r == -ELOOP)
                r = -EPERM;
        if (r < 0 && r != -EPERM)
                why[0] = 0; /* not there: reported as unreachable, as connect() would */
        if (r < 0)
                return r;
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, socket_path, strlen(socket_path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        r = set_timeouts(fd);
        if (r < 0)
                return r;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return errno == EAGAIN ? -ETIMEDOUT : -errno;
        r = socket_trust_check_peer(fd, owner, why, why_size);
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

/* Returns 0 with the HTTP status and body, -ECONNREFUSED/-ENOENT/... if the agent is not
 * there, -ETIMEDOUT, -EBADMSG for a garbled answer, -EPERM (why set) if the socket is not the
 * agent's. */
static int agent_post(const char *socket_path, const char *body, struct buffer *resp, long *ret_status,
                      char **ret_body, size_t *ret_size, char *why, size_t why_size) {
        _cleanup_close_ int fd = agent_connect(socket_path, why, why_size);
        _cleanup_free_ char *head = NULL;
        size_t len = strlen(body);
        int r;

        if (fd < 0)
                return fd;
        if (asprintf(&head,
                     "POST /v1/cni HTTP/1.1\r\nHost: pinion\r\nUser-Agent: pinion-cni/" PACKAGE_VERSION "\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     len) < 0)
                return -ENOMEM;
        r = write_all(fd, head, strlen(head), body, len);
        if (r >= 0)
                r = read_all(fd, resp);
        if (r < 0)
                return r;
        if (resp->size == 0)
                return -ECONNRESET; /* the agent went away before answering */
        return parse_response(resp, ret_status, ret_body, ret_size);
}

/* The agent's answer for a module that is not running: {"error": "podnet is disabled: <reason>",
 * "code": 503, "module", "state", "reason"} (docs/api.md). Its error in *ret_error. */
static bool module_down_error(const char *body, size_t size, char **ret_error) {
        _cleanup_free_ char *module = NULL;

        return json_text_member_string(body, size, "module", &module) > 0 &&
               json_text_member_string(body, size, "error", ret_error) > 0;
}

/* The agent answered with an error: {"error", "code": HTTP, "cni": {"code", "msg", "details"}}. */
static int report_agent_error(const struct cni_request *req, long status, const char *body, size_t size) {
        struct json_text_value cni, code;
        _cleanup_free_ char *msg = NULL, *details = NULL, *error = NULL;
        struct cni_error e = {};
        int n = 0, ret;

        if (json_text_object_member(body, size, "cni", &cni) > 0 && cni.type == JSON_TEXT_OBJECT &&
            json_text_object_member(cni.start, cni.size, "code", &code) > 0 && json_text_int(&code, &n) >= 0 &&
            json_text_member_string(cni.start, cni.size, "msg", &msg) > 0) {
                (void) json_text_member_string(cni.start, cni.size, "details", &details);
                (void) cni_error_set(&e, n, msg, "%s", strempty(details));
        } else if (status == 503 && module_down_error(body, size, &error)) {
                /* Podnet is not running: no network now, as when the module itself says so. */
                (void) cni_error_set(&e, req->command == CNI_STATUS ? CNI_ERR_NOT_AVAILABLE : CNI_ERR_TRY_AGAIN_LATER,
                                     error, NULL);
        } else {
                /* Not from the podnet module (an old agent, a proxy): the HTTP status says it all. */
                (void) json_text_member_string(body, size, "error", &error);
                (void) cni_error_set(&e, status == 403 ? CNI_ERR_INVALID_ENV : CNI_ERR_TRY_AGAIN_LATER,
                                     "the agent refused the request", "HTTP %ld: %s", status,
                                     error ? error : "no explanation");
        }
        if (e.details && !e.details[0])
                e.details = mfree(e.details);
        ret = fail(&e, req->cni_version);
        cni_error_done(&e);
        return ret;
}

static int call_agent(const struct cni_request *req, const struct buffer *config) {
        _cleanup_free_ char *text = NULL;
        const char *socket_path = req->socket ? req->socket : socket_trust_default_path();
        char why[SOCKET_TRUST_WHY_MAX] = "";
        struct buffer resp = {};
        struct cni_error e = {};
        char *rbody = NULL;
        size_t rsize = 0;
        long status = 0;
        int r, ret;

        if (cni_request_body(req, config->data, config->size, &text) < 0)
                return fail_oom(); /* the config was checked: only memory can fail */
        r = agent_post(socket_path, text, &resp, &status, &rbody, &rsize, why, sizeof(why));
        if (r == -EPERM && why[0]) {
                (void) cni_error_set(&e, req->command == CNI_STATUS ? CNI_ERR_NOT_AVAILABLE : CNI_ERR_TRY_AGAIN_LATER,
                                     "refusing a socket that is not the pinion agent's", "%s", why);
                free(resp.data);
                ret = fail(&e, req->cni_version);
                cni_error_done(&e);
                return ret;
        }
        if (r < 0) {
                bool unreachable = r == -ENOENT || r == -ECONNREFUSED || r == -ETIMEDOUT || r == -ECONNRESET ||
                                   r == -EPIPE || r == -ENOTSOCK;
                /* STATUS: the plugin cannot serve ADDs while the agent is away (50). Everything else
                 * is worth retrying once the agent is back (11). */
                (void) cni_error_set(&e,
                                     req->command == CNI_STATUS ? CNI_ERR_NOT_AVAILABLE
                                     : unreachable              ? CNI_ERR_TRY_AGAIN_LATER
                                                                : CNI_ERR_IO,
                                     unreachable ? "the pinion agent is not reachable" : "request to the pinion agent failed",
                                     "%s: %s", socket_path, r == -EBADMSG ? "garbled answer" : strerror(-r));
                free(resp.data);
                ret = fail(&e, req->cni_version);
                cni_error_done(&e);
                return ret;
        }
        if (status < 200 || status >= 300) {
                ret = report_agent_error(req, status, rbody, rsize);
                free(resp.data);
                return ret;
        }

        /* Success: ADD prints its result; DEL, CHECK, GC and STATUS print nothing. */
        if (req->command == CNI_ADD) {
                struct json_text_value result;
                if (json_text_object_member(rbody, rsize, "result", &result) <= 0 || result.type != JSON_TEXT_OBJECT) {
                        free(resp.data);
                        (void) cni_error_set(&e, CNI_ERR_IO, "the agent sent no result", NULL);
                        ret = fail(&e, req->cni_version);
                        cni_error_done(&e);
                        return ret;
                }
                printf("%.*s\n", (int) result.size, result.start);
                fflush(stdout);
        }
        free(resp.data);
        return EXIT_SUCCESS;
}

static int print_version(const char *cni_version) {
        _cleanup_free_ char *text = NULL;

        if (cni_version_text(cni_version, &text) < 0)
                return fail_oom();
        printf("%s\n", text);
        return EXIT_SUCCESS;
}

/* The network config's top-level strings, checked here as the agent checks them (cni.c), so
 * that a bad config gets its code also while the agent is away; the rest (prevResult,
 * runtimeConfig, GC's attachments) the agent checks. */
static int read_config(struct cni_request *req, const struct buffer *in, struct cni_error *e) {
        _cleanup_free_ char *version = NULL, *name = NULL, *type = NULL, *socket = NULL;
        int r;

        if (in->size == 0)
                return cni_error_set(e, CNI_ERR_DECODE, "failed to decode the network config", "stdin is empty");
        if (memchr(in->data, '\0', in->size))
                return cni_error_set(e, CNI_ERR_DECODE, "failed to decode the network config", "stdin holds a NUL byte");
        r = json_text_member_string(in->data, in->size, "cniVersion", &version);
        if (r == -EBADMSG && json_text_object_member(in->data, in->size, NULL, NULL) < 0)
                return cni_error_set(e, CNI_ERR_DECODE, "failed to decode the network config", "not a valid JSON object");
        if (r == -ENOMEM)
                return r;
        r = cni_request_set_version(req, version, e);
        if (r < 0 || req->command == CNI_VERSION)
                return r;
        if ((r = json_text_member_string(in->data, in->size, "name", &name)) == -ENOMEM ||
            (r = json_text_member_string(in->data, in->size, "type", &type)) == -ENOMEM)
                return r;
        r = cni_request_set_name(req, name, type, e);
        if (r < 0)
                return r;
        r = json_text_member_string(in->data, in->size, "socket", &socket);
        if (r == -ENOMEM)
                return r;
        return r != 0 ? cni_request_set_socket(req, socket, e) : 0;
}

int main(int argc, char *argv[]) {
        struct cni_request req = { .command = _CNI_COMMAND_INVALID };
        struct cni_error e = {};
        struct buffer in = {};
        int r, ret;

        if (argc > 1 && (streq(argv[1], "--version") || streq(argv[1], "--help"))) {
                printf("pinion-cni %s: the CNI plugin of pinion (CNI %s). Run by a container runtime with\n"
                       "CNI_COMMAND=ADD|DEL|CHECK|STATUS|GC|VERSION and the network config on stdin; it\n"
                       "forwards to piniond on the socket named by the config's \"socket\" (default %s).\n",
                       PACKAGE_VERSION, CNI_SPEC_VERSION, PINION_SOCKET_DEFAULT);
                return EXIT_SUCCESS;
        }

        r = cni_request_from_env(&req, env_getenv, NULL, &e);
        if (r < 0) {
                if (r == -ENOMEM)
                        return fail_oom();
                ret = fail(&e, NULL);
                goto out;
        }

        r = read_stdin(&in);
        if (r < 0) {
                (void) cni_error_set(&e, r == -EFBIG ? CNI_ERR_DECODE : CNI_ERR_IO, "cannot read the network config",
                                     "stdin: %s", strerror(-r));
                ret = fail(&e, NULL);
                goto out;
        }
        if (req.command == CNI_VERSION && in.size == 0) {
                /* Some callers ask without a config; answer in the newest version. */
                ret = print_version(NULL);
                goto out;
        }
        r = read_config(&req, &in, &e);
        if (r < 0) {
                if (r == -ENOMEM)
                        return fail_oom();
                ret = fail(&e, req.cni_version);
                goto out;
        }
        if (req.command == CNI_VERSION) {
                ret = print_version(req.cni_version);
                goto out;
        }
        ret = call_agent(&req, &in);
out:
        cni_error_done(&e);
        cni_request_free_fields(&req);
        free(in.data);
        return ret;
}
