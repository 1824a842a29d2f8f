/* SPDX-License-Identifier: MIT */
#pragma once

/* A sync's work on the version directory, each step run by offload.c (off the loop):
 *   stage_prepare: checks dest, makes the version directory and every directory of the
 *                  manifest, and hard-links the files unchanged since the published version
 *                  (after hashing them: a file damaged in place is downloaded again);
 *   (the loop downloads the other files into it)
 *   stage_publish: fsyncs what was downloaded and every directory, then swaps ..data to it;
 *   stage_remove:  removes a version directory that will never be published.
 * A kill -9 at any instant leaves ..data at the old version or at the new one, whole: nothing
 * but the swap (one rename) makes a version visible. */

#include <stdbool.h>

#include "fetch.h"
#include "offload.h"
#include "manifest.h"
#include "publish-modes.h"

struct stage {
        /* in: borrowed, kept alive and unchanged by the fetch while a step runs */
        const char *dest;
        const char *current_dir;             /* the published version's directory name, or NULL */
        const struct manifest *manifest;
        const struct manifest *current;      /* the published manifest (for reuse), or NULL */
        struct publish_modes modes;
        unsigned keep_versions;

        /* out */
        char *version_dir;     /* full path while unpublished (prepare makes it, remove clears it) */
        int vfd;               /* the version directory, for the loop's downloads */
        bool *reused;          /* per manifest file: linked from the published version */
        unsigned files_reused, files_damaged;
        char *published_name;  /* publish: the directory ..data points at now */
        usec_t publish_usec;   /* publish: fsync + swap + prune */
        enum fetch_error_kind kind; /* a failed step: what kind, and what for people */
        char *message;
};

void stage_init(struct stage *s);
/* Frees the outputs (not the unpublished directory: that is stage_remove's). */
void stage_done(struct stage *s);

int stage_prepare(void *stage, const atomic_bool *stop);
int stage_publish(void *stage, const atomic_bool *stop);
int stage_remove(void *stage, const atomic_bool *stop);

/* 1 with *ret_name (the first) if dest holds an entry pinion did not make, 0 if dest is
 * missing or holds only what an atomic directory does (".." names, links into ..data),
 * negative errno. Publishing there would replace or hide what is not ours. */
int stage_dest_foreign(const char *dest, char **ret_name);
/* -EPERM if dest exists and others than its owner may write into it (they could swap what is
 * published), -ENOTDIR if it is no directory, -ENOENT if it does not exist yet (publishing
 * makes it). The rule every sync applies, and --check-config. */
int stage_check_dest(const char *dest);
