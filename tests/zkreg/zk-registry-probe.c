/* SPDX-License-Identifier: MIT */
/* A test driver for zkreg's registrations (modules/zkreg/registry.c) with the core's real pod
 * store and pod gates, against a real ZooKeeper: the pod gates that configsync and identity
 * will add are exercised here through the gate API directly. argv[1] = servers.
 * Commands on stdin, one per line:
 *     pod NAME IP READY(0|1) PATH     put a pod (uid "uid-NAME") in the store
 *     rm NAME                         remove it
 *     gate-add                        add the gate "configs" (closed for names in the closed set)
 *     gate-remove                     remove it
 *     close NAME / open NAME          change the gate's answer for NAME and tell the listeners
 *     dump                            print {"registrations": [...]} as one line
 * Every command is answered with a line ("ok ..." or the dump). EOF: shutdown (deregister, close),
 * then exit 0. tests/integration/test_zkreg_gates.py drives it. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "log.h"
#include "manager.h"
#include "pod-gates.h"
#include "pod-store.h"
#include "registry.h"
#include "zk-session.h"

/* manager.c (linked for manager_http()) wants the module table; the probe runs no module. */
const struct module *const module_table[] = { NULL };
const unsigned module_table_size = 0;

struct probe {
        struct manager m;
        struct zk_session *session;
        struct registry *registry;
        char closed[64][64];
        size_t n_closed;
        bool stopping;
};

static int gate_configs(const struct pod *p, void *userdata, char **ret_reason) {
        struct probe *pr = userdata;
        for (size_t i = 0; i < pr->n_closed; i++)
                if (streq(pr->closed[i], p->name)) {
                        *ret_reason = strdup("config app not present yet");
                        return 0;
                }
        return 1;
}

static void on_state(struct zk_session *s, enum zk_session_state old, enum zk_session_state new, void *userdata) {
        struct probe *pr = userdata;
        (void) s;
        registry_session_changed(pr->registry, old, new);
}

static void on_done(struct registry *r, void *userdata) {
        struct probe *pr = userdata;
        (void) r;
        zk_session_close(pr->session);
        sd_event_exit(pr->m.event, 0);
}

static void reply(const char *s) {
        printf("%s\n", s);
        fflush(stdout);
}

static void command(struct probe *pr, char *line) {
        char name[64], ip[64], path[256];
        int ready;

        if (sscanf(line, "pod %63s %63s %d %255s", name, ip, &ready, path) == 4) {
                char text[2048];
                struct pod *p = NULL;
                snprintf(text, sizeof(text),
                         "{\"metadata\":{\"name\":\"%s\",\"uid\":\"uid-%s\",\"annotations\":{\"pinion.io/serverset\":\"%s\"}},"
                         "\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"name\":\"http\",\"containerPort\":8080}]}]},"
                         "\"status\":{\"podIP\":\"%s\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                         name, name, path, ip, ready ? "True" : "False");
                if (pod_parse_json_text(text, strlen(text), NULL, &p, NULL) < 0)
                        return reply("error pod");
                p->source = strdup("probe");
                (void) pod_store_put(pr->m.pods, p);
                pod_unref(p);
                return reply("ok pod");
        }
        if (sscanf(line, "rm %63s", name) == 1) {
                char uid[80];
                snprintf(uid, sizeof(uid), "uid-%s", name);
                (void) pod_store_remove(pr->m.pods, uid);
                return reply("ok rm");
        }
        if (streq(line, "gate-add")) {
                int r = pod_gates_add(pr->m.pod_gates, "configs", gate_configs, pr);
                return reply(r < 0 ? "error gate-add" : "ok gate-add");
        }
        if (streq(line, "gate-remove")) {
                pod_gates_remove(pr->m.pod_gates, "configs");
                return reply("ok gate-remove");
        }
        if (sscanf(line, "close %63s", name) == 1 && pr->n_closed < 64) {
                char uid[80];
                snprintf(pr->closed[pr->n_closed++], 64, "%s", name);
                snprintf(uid, sizeof(uid), "uid-%s", name);
                pod_gates_changed(pr->m.pod_gates, uid);
                return reply("ok close");
        }
        if (sscanf(line, "open %63s", name) == 1) {
                for (size_t i = 0; i < pr->n_closed; i++)
                        if (streq(pr->closed[i], name))
                                pr->closed[i][0] = 0;
                pod_gates_changed(pr->m.pod_gates, NULL);
                return reply("ok open");
        }
        if (streq(line, "dump")) {
                cJSON *list = NULL;
                if (registry_list_json(pr->registry, &list) < 0)
                        return reply("error dump");
                char *s = cJSON_PrintUnformatted(list);
                reply(s ? s : "error dump");
                free(s);
                cJSON_Delete(list);
                return;
        }
        reply("error unknown command");
}

static int on_stdin(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct probe *pr = userdata;
        static char buf[65536];
        static size_t len;
        ssize_t n;

        (void) revents;
        n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0) {
                sd_event_source_set_enabled(src, SD_EVENT_OFF);
                pr->stopping = true;
                if (registry_shutdown(pr->registry, on_done, pr) == 0)
                        on_done(pr->registry, pr);
                return 0;
        }
        len += (size_t) n;
        buf[len] = 0;
        char *nl;
        while ((nl = strchr(buf, '\n'))) {
                *nl = 0;
                command(pr, buf);
                len -= (size_t) (nl + 1 - buf);
                memmove(buf, nl + 1, len + 1);
        }
        return 0;
}

int main(int argc, char **argv) {
        struct probe pr = {};
        sd_event_source *in = NULL;
        int r;

        if (argc < 2) {
                fprintf(stderr, "usage: %s SERVERS\n", argv[0]);
                return 2;
        }
        log_setup(getenv("PROBE_DEBUG") ? LOG_DEBUG : LOG_WARNING, LOG_TARGET_TEXT);
        if (sd_event_default(&pr.m.event) < 0 || metrics_new(&pr.m.metrics) < 0 || pod_store_new(&pr.m.pods) < 0 ||
            pod_gates_new(&pr.m.pod_gates) < 0)
                return 1;
        struct zk_session_config cfg = { .servers = argv[1], .session_timeout = 4 * USEC_PER_SEC };
        if (zk_session_new(pr.m.event, &cfg, on_state, &pr, &pr.session) < 0)
                return 1;
        struct registry_config rc = { .write_qps = 1000, .max_ops_per_write = 250, .drain_delay = USEC_PER_SEC, .flap_damping = 0 };
        if (registry_new(&pr.m, pr.session, &rc, &pr.registry) < 0)
                return 1;
        if (sd_event_add_io(pr.m.event, &in, STDIN_FILENO, EPOLLIN, on_stdin, &pr) < 0)
                return 1;
        reply("ready");
        r = sd_event_loop(pr.m.event);
        sd_event_source_unref(in);
        pr.registry = registry_free(pr.registry);
        pr.session = zk_session_free(pr.session);
        http_client_free(pr.m.http);
        pod_gates_free(pr.m.pod_gates);
        pod_store_free(pr.m.pods);
        metrics_free(pr.m.metrics);
        sd_event_unref(pr.m.event);
        return r < 0 ? 1 : 0;
}
