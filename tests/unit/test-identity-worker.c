/* SPDX-License-Identifier: MIT */
/* The identity module's issue worker: a real thread, a real CA in a temp dir, results back on a
 * real sd-event loop. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ca.h"
#include "fs.h"
#include "issue-worker.h"
#include "strv.h"

#define MAX_BATCH 4

struct fixture {
        char tmp[64];
        sd_event *event;
        struct issue_worker *worker;
        struct ca *a, *b;
        struct issue_job *results[64];
        size_t n_results;
        unsigned calls, largest_call;
};

static void on_done(struct issue_worker *w, struct issue_job *jobs, void *userdata) {
        struct fixture *f = userdata;
        unsigned n = 0;

        f->calls++;
        while (jobs) {
                struct issue_job *j = jobs;
                jobs = j->next;
                j->next = NULL;
                assert_true(f->n_results < ELEMENTSOF(f->results));
                f->results[f->n_results++] = j;
                n++;
        }
        f->largest_call = MAX(f->largest_call, n);
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(struct fixture));
        _cleanup_free_ char *da = NULL, *db = NULL;

        assert_non_null(f);
        strcpy(f->tmp, "/tmp/test-identity-worker.XXXXXX");
        assert_non_null(mkdtemp(f->tmp));
        da = fs_path_join(f->tmp, "a");
        db = fs_path_join(f->tmp, "b");
        assert_int_equal(ca_load_or_create(da, "CA a", &f->a, NULL), 0);
        assert_int_equal(ca_load_or_create(db, "CA b", &f->b, NULL), 0);
        assert_int_equal(sd_event_new(&f->event), 0);
        assert_int_equal(issue_worker_new(f->event, MAX_BATCH, 0, on_done, f, &f->worker), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        issue_worker_free(f->worker);
        for (size_t i = 0; i < f->n_results; i++)
                issue_job_free(f->results[i]);
        ca_free(f->a);
        ca_free(f->b);
        sd_event_unref(f->event);
        assert_int_equal(fs_rm_rf(f->tmp), 0);
        free(f);
        return 0;
}

static struct issue_job *job(unsigned i) {
        struct issue_job *j = calloc(1, sizeof(struct issue_job));
        assert_non_null(j);
        assert_true(asprintf(&j->uid, "uid-%u", i) > 0);
        assert_true(asprintf(&j->common_name, "p%u.shop", i) > 0);
        assert_true(asprintf(&j->uri, "spiffe://example.org/ns/shop/sa/sa%u", i) > 0);
        j->ip = strdup("10.1.2.3");
        assert_non_null(j->ip);
        j->ticket = i;
        j->lifetime = 600 * USEC_PER_SEC;
        return j;
}

static void run_until_results(struct fixture *f, size_t n) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 20 * USEC_PER_SEC;
        while (f->n_results < n) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("only %zu of %zu results within 20 s", f->n_results, n);
                assert_true(sd_event_run(f->event, 100 * USEC_PER_MSEC) >= 0);
        }
}

/* The key and chain of a result belong together and verify against ca's roots. */
static void assert_issued_by(const struct issue_job *j, const struct ca *ca) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL;

        assert_int_equal(j->result, 0);
        assert_null(j->reason);
        assert_int_equal(x509_key_from_pem(j->key_pem, strlen(j->key_pem), &key), 0);
        assert_int_equal(x509_chain_from_pem(j->chain_pem, strlen(j->chain_pem), &chain), 0);
        assert_true(x509_key_matches(sk_X509_value(chain, 0), key));
        assert_int_equal(x509_verify_chain(chain, ca->roots, 0, NULL), 0);
        /* The PEM's public point is copied from the certificate: the private scalar must sign
         * what the certificate's key verifies. */
        unsigned char sig[128];
        size_t siglen = sizeof(sig);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        assert_non_null(md);
        assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key), 1);
        assert_int_equal(EVP_DigestSign(md, sig, &siglen, (const unsigned char *) "x", 1), 1);
        assert_int_equal(EVP_MD_CTX_reset(md), 1);
        assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, X509_get0_pubkey(sk_X509_value(chain, 0))), 1);
        assert_int_equal(EVP_DigestVerify(md, sig, siglen, (const unsigned char *) "x", 1), 1);
        EVP_MD_CTX_free(md);
        assert_int_equal(strv_length(j->info.sans), 2);
}

/* Results come back in submission order, no more than the batch size per loop iteration. */
static void test_results_in_order_and_in_batches(void **state) {
        struct fixture *f = *state;

        assert_int_equal(issue_worker_set_issuer(f->worker, f->a), 0);
        for (unsigned i = 0; i < 10; i++)
                assert_int_equal(issue_worker_submit(f->worker, job(i)), 0);
        run_until_results(f, 10);
        assert_true(f->largest_call <= MAX_BATCH);
        assert_true(f->calls >= 3);
        for (unsigned i = 0; i < 10; i++) {
                char uid[32];
                (void) snprintf(uid, sizeof(uid), "uid-%u", i);
                assert_string_equal(f->results[i]->uid, uid);
                assert_int_equal(f->results[i]->ticket, i);
                assert_issued_by(f->results[i], f->a);
        }
}

/* An issuer change applies from the next job on; without an issuer a job fails, saying why. */
static void test_issuer_changes_in_order(void **state) {
        struct fixture *f = *state;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL;

        assert_int_equal(issue_worker_set_issuer(f->worker, f->a), 0);
        assert_int_equal(issue_worker_submit(f->worker, job(0)), 0);
        assert_int_equal(issue_worker_set_issuer(f->worker, f->b), 0);
        assert_int_equal(issue_worker_submit(f->worker, job(1)), 0);
        assert_int_equal(issue_worker_set_issuer(f->worker, NULL), 0);
        assert_int_equal(issue_worker_submit(f->worker, job(2)), 0);
        /* The worker signs with its own copy: the loop's may go meanwhile. */
        f->b = ca_free(f->b);
        run_until_results(f, 3);

        assert_issued_by(f->results[0], f->a);
        assert_int_equal(x509_chain_from_pem(f->results[1]->chain_pem, strlen(f->results[1]->chain_pem), &chain), 0);
        assert_int_equal(x509_verify_chain(chain, f->a->roots, 0, NULL), -EBADMSG);
        assert_int_equal(f->results[2]->result, -ENOKEY);
        assert_non_null(strstr(f->results[2]->reason, "no issuer"));
        assert_null(f->results[2]->key_pem);
}

static struct issue_job *staging_job(unsigned i, const char *parent) {
        struct issue_job *j = job(i);
        assert_true(asprintf(&j->stage_name, "uid-%u", i) > 0);
        j->stage_parent = strdup(parent);
        j->stage_bundle = strdup("BUNDLE\n");
        assert_non_null(j->stage_parent);
        assert_non_null(j->stage_bundle);
        return j;
}

static void assert_staged_file(const char *dir, const char *name, const char *content, mode_t mode) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        struct stat st;
        size_t size;

        assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
        assert_int_equal(fs_read_file_full(path, 1 << 20, &data, &size), 0);
        assert_int_equal(size, strlen(content));
        assert_memory_equal(data, content, size);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, mode);
}

/* Asked to, the thread writes a new directory's files under a staging name; it leaves a
 * directory that exists to the loop, and a failure to stage does not fail the certificate. */
static void test_stages_new_directories(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *pods = fs_path_join(f->tmp, "pods"), *there = fs_path_join(f->tmp, "pods/uid-2");
        _cleanup_free_ char *missing = fs_path_join(f->tmp, "missing"), *staged = fs_path_join(f->tmp, "pods/..new-1-uid-1");

        assert_int_equal(fs_mkdir_p(there, 0755), 0);
        assert_int_equal(issue_worker_set_issuer(f->worker, f->a), 0);
        assert_int_equal(issue_worker_submit(f->worker, staging_job(1, pods)), 0);
        assert_int_equal(issue_worker_submit(f->worker, staging_job(2, pods)), 0);
        assert_int_equal(issue_worker_submit(f->worker, staging_job(3, missing)), 0);
        assert_int_equal(issue_worker_submit(f->worker, job(4)), 0);
        run_until_results(f, 4);

        for (unsigned i = 0; i < 4; i++)
                assert_issued_by(f->results[i], f->a);
        assert_int_equal(f->results[0]->staged, 1);
        assert_staged_file(staged, "key.pem", f->results[0]->key_pem, 0600);
        assert_staged_file(staged, "cert.pem", f->results[0]->chain_pem, 0644);
        assert_staged_file(staged, "bundle.pem", "BUNDLE\n", 0644);
        assert_int_equal(f->results[1]->staged, 0);
        assert_int_equal(f->results[2]->staged, -ENOENT);
        assert_int_equal(f->results[3]->staged, 0);
}

static unsigned count_staged(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        unsigned n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += strncmp(de->d_name, "..new-", 6) == 0;
        closedir(d);
        return n;
}

/* Stopped with staged results not handed back (the loop never ran): their directories go. */
static void test_free_drops_what_was_staged(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *pods = fs_path_join(f->tmp, "pods");

        assert_int_equal(fs_mkdir_p(pods, 0755), 0);
        assert_int_equal(issue_worker_set_issuer(f->worker, f->a), 0);
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(issue_worker_submit(f->worker, staging_job(i, pods)), 0);
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 20 * USEC_PER_SEC;
        while (count_staged(pods) < 4) {
                assert_true(now_usec(CLOCK_MONOTONIC) < deadline);
                usleep(1000);
        }
        f->worker = issue_worker_free(f->worker);
        assert_int_equal(f->n_results, 0);
        assert_int_equal(count_staged(pods), 0);
}

/* Freed with work queued and results not taken: nothing leaks (the ASan build checks). */
static void test_free_with_work_pending(void **state) {
        struct fixture *f = *state;

        assert_int_equal(issue_worker_set_issuer(f->worker, f->a), 0);
        for (unsigned i = 0; i < 40; i++)
                assert_int_equal(issue_worker_submit(f->worker, job(i)), 0);
        f->worker = issue_worker_free(f->worker);
        assert_int_equal(f->n_results, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_results_in_order_and_in_batches, setup, teardown),
                cmocka_unit_test_setup_teardown(test_issuer_changes_in_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stages_new_directories, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_drops_what_was_staged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_with_work_pending, setup, teardown),
        };
        return cmocka_run_group_tests_name("identity-worker", tests, NULL, NULL);
}
