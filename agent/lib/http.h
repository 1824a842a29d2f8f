/* SPDX-License-Identifier: MIT */
#pragma once

/* The HTTP client every module uses: libcurl's multi interface driven by sd-event
 * (CURLMOPT_SOCKETFUNCTION → sd_event_add_io, CURLMOPT_TIMERFUNCTION → one sd-event timer,
 * curl_multi_socket_action() on events). No thread, no blocking call.
 *
 * The caller builds a CURL easy handle with curl_easy_setopt() (URL, headers, TLS files,
 * timeouts) and submits it. The client owns CURLOPT_PRIVATE, CURLOPT_ERRORBUFFER and sets
 * CURLOPT_NOSIGNAL. The body, decided by max_body (curl cannot tell us whether a
 * WRITEFUNCTION was set, so max_body says it):
 *   max_body > 0   the client installs its own WRITEFUNCTION/WRITEDATA (overriding the
 *                  caller's) and collects the body into resp->body, at most max_body bytes;
 *                  a larger body fails the transfer with -EFBIG.
 *   max_body == 0  streaming (e.g. a watch): the caller MUST have set CURLOPT_WRITEFUNCTION
 *                  (else curl writes to stdout); resp->body is NULL. A write function that
 *                  returns short aborts the transfer with -ECANCELED.
 * The done callback runs exactly once per transfer that was not cancelled, never from inside
 * http_client_submit() or a curl callback; the client frees the easy handle after it returns.
 * From a done callback, anything may be called: submit, cancel, even http_client_free().
 *
 * resp->error is about the transport only (an HTTP 404 or 503 has error 0; check status):
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH (name resolution), -EPROTO (every TLS failure:
 * handshake, certificate verification, pinning), -EBADMSG (malformed HTTP), -ECONNRESET,
 * -EPIPE (body cut short), -EFBIG (over max_body), -ECANCELED (the caller's write function
 * aborted), -ENOMEM, -EIO (anything else). On error, body holds whatever had arrived. */

#include <curl/curl.h>
#include <systemd/sd-event.h>

#include "macro.h"

struct http_client;
struct http_transfer;

struct http_response {
        int error;       /* 0, or negative errno (-ETIMEDOUT, -ECONNREFUSED, -EFBIG, -EPROTO, ...) */
        CURLcode curl_code;
        const char *error_message; /* curl's message when error != 0 (borrowed) */
        long status;     /* HTTP status, 0 if none was received */
        char *body;      /* NUL-terminated, NULL when streaming; borrowed, valid during the callback */
        size_t body_size;
        CURL *easy;      /* to read more info (e.g. curl_easy_header for ETag/Retry-After) */
};

typedef void (*http_done_fn)(struct http_client *c, const struct http_response *resp, void *userdata);

int http_client_new(sd_event *e, struct http_client **ret);
/* Cancels every transfer still running (their callbacks do not run). */
struct http_client *http_client_free(struct http_client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct http_client *, http_client_free);

/* Takes ownership of easy (also on failure). *ret (optional) identifies the transfer for
 * http_transfer_cancel() and is valid until the done callback returns. */
int http_client_submit(struct http_client *c, CURL *easy, size_t max_body, http_done_fn done,
                       void *userdata, struct http_transfer **ret);
/* Stops a running transfer without calling its done callback. NULL is a no-op, and so is
 * cancelling the transfer whose done callback is running. Called from inside a curl callback
 * (e.g. a WRITEFUNCTION), the transfer leaves curl as soon as curl returns to the loop; its
 * write/header/progress callbacks are not called again. */
void http_transfer_cancel(struct http_transfer *t);
/* The transfer's easy handle (e.g. for CURLINFO_RESPONSE_CODE from a streaming write
 * function); owned by the client. */
CURL *http_transfer_easy(const struct http_transfer *t);
/* Transfers submitted, not cancelled, whose done callback has not started yet. */
unsigned http_client_active(const struct http_client *c);

/* Retry-After from a response, as a delay: seconds or an HTTP date (relative to the realtime
 * clock). 0 if absent, invalid or in the past; clamped to 24h so that adding it to a
 * timestamp cannot overflow. */
usec_t http_response_retry_after(const struct http_response *resp);
/* A response header's value (borrowed until the callback returns), or NULL. */
const char *http_response_header(const struct http_response *resp, const char *name);
/* Maps a CURLcode to a negative errno. */
int http_curl_code_to_errno(CURLcode code);
