/* SPDX-License-Identifier: MIT */
#pragma once

/* The csi module: a CSI node plugin (docs/csi.md) whose one volume is the agent's sockets
 * directory, so that a pod reaches the agent through an inline ephemeral CSI volume instead of
 * a hostPath the Pod Security Standards' baseline profile forbids. csi.c is the module (its
 * [csi] section, its state, the node operations publish and unpublish); csi-api.c the gRPC
 * services on the agent's gRPC server: CSI's Identity and Node services on [csi] socket, and
 * the kubelet's plugin Registration service on <registration-dir>/<name>-reg.sock; csi-mount.c
 * the mounts. */

#include <stdbool.h>

#include "grpc-server.h"
#include "module.h"

#define MODULE "csi"
#define CSI_NAME_DEFAULT "csi.pinion.dev"

struct csi_settings {
        bool enable;
        char *name;             /* the driver's name: GetPluginInfo, the CSIDriver object */
        char *socket;           /* the CSI socket (root only: the kubelet's) */
        char *registration_dir; /* the kubelet's plugins_registry; NULL: no registration socket */
        char *pods_root;        /* target paths must be below it */
};

struct csi {
        struct module_instance *mi;
        struct csi_settings *settings;
        struct grpc_server *node_server; /* Identity and Node, on settings->socket */
        struct grpc_server *reg_server;  /* Registration, on reg_socket */
        char *reg_socket;
        char *sockets_dir; /* what is published: the directory of the local API's socket */
        bool registered;   /* the kubelet said it took the plugin */
        unsigned n_published, n_unpublished, n_refused;
};

/* csi-api.c: serve the CSI socket and the registration socket (logs what failed). */
int csi_api_start(struct csi *csi);
void csi_api_stop(struct csi *csi);

/* csi.c: the kubelet's answer to our registration. */
void csi_registration_status(struct csi *csi, bool registered, const char *error);
/* csi.c: the node operations. Publishes (bind-mounts read-only) or unpublishes the sockets
 * directory at target_path: counted and logged; 0, or a negative errno (csi-mount.h) with why
 * (why_size >= 1, initially empty) saying why. */
int csi_publish(struct csi *csi, const char *volume_id, const char *target_path, char *why, size_t why_size);
int csi_unpublish(struct csi *csi, const char *volume_id, const char *target_path, char *why, size_t why_size);
/* A request refused before it came to a mount (the caller, the request's fields). */
void csi_note_refused(struct csi *csi);
