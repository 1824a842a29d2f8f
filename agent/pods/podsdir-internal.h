/* SPDX-License-Identifier: MIT */
#pragma once

/* What podsdir.c uses of podsdir-file.c: reading one pod file. */

#include <stdbool.h>

#include "pod-store.h"
#include "pods.h"

#define PODSDIR_SOURCE POD_SOURCE_PODS_DIR
#define PODSDIR_MAX_FILE_SIZE ((size_t) 1024 * 1024)

/* *.json, not a dotfile: editors' temp files (".web.json.swp", "web.json~", "web.json.tmp") and
 * atomic writers' internals ("..data") are never pods. */
bool podsdir_file_is_pod_name(const char *name);

/* Reads name (relative to dir_fd; path is how it is reported) as a static pod. Returns 0 and a
 * pod; -EINVAL and a reason for a file that is there but is not a pod; -ENOENT when the name is
 * gone; another negative errno for failure. */
int podsdir_file_load(int dir_fd, const char *name, const char *path, const char *node_name, struct pod **ret,
                      char **ret_reason);
