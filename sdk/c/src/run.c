/* Process helper: one thread per instance, CUMULO_THREAD_COUNT of them. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct worker {
    pthread_t thread;
    cumulo_config config;
    cumulo_setup setup;
    void *user_data;
    int status;
} worker;

static void *run_worker(void *arg) {
    worker *w = arg;
    char error[512];
    cumulo_api *api = NULL;
    int rc = cumulo_connect(&api, &w->config, error, sizeof error);
    if (rc != CUMULO_OK) {
        fprintf(stderr, "cumulo: thread %u: cannot connect: %s\n", w->config.thread_index, error);
        w->status = rc;
        return NULL;
    }
    rc = w->setup ? w->setup(api, w->user_data) : CUMULO_OK;
    if (rc != CUMULO_OK) {
        fprintf(stderr, "cumulo: thread %u: setup failed: %s: %s\n", w->config.thread_index,
                cumulo_status_name(rc), cumulo_error_message(api));
    } else {
        do rc = cumulo_poll(api, -1);
        while (rc == CUMULO_OK);
        if (rc == CUMULO_E_TERMINATED) rc = CUMULO_OK;
        else
            fprintf(stderr, "cumulo: thread %u: stopped: %s: %s\n", w->config.thread_index,
                    cumulo_status_name(rc), cumulo_error_message(api));
    }
    cumulo_destroy(api);
    w->status = rc;
    return NULL;
}

static int thread_count_from_env(uint32_t *count) {
    const char *text = getenv("CUMULO_THREAD_COUNT");
    *count = 1;
    if (!text || !*text) return CUMULO_OK;
    char *end;
    errno = 0;
    unsigned long n = strtoul(text, &end, 10);
    if (errno || *end || n == 0 || n > 4096 || text[0] == '-') {
        fprintf(stderr, "cumulo: CUMULO_THREAD_COUNT is not a count: '%s'\n", text);
        return CUMULO_E_CONFIG;
    }
    *count = (uint32_t)n;
    return CUMULO_OK;
}

int cumulo_run(const cumulo_config *config, uint32_t thread_count, cumulo_setup setup,
               void *user_data) {
    if (thread_count == 0) {
        int rc = thread_count_from_env(&thread_count);
        if (rc != CUMULO_OK) return rc;
    }
    worker *workers = calloc(thread_count, sizeof *workers);
    if (!workers) return CUMULO_E_NOMEM;
    uint32_t started = 0;
    int result = CUMULO_OK;
    for (; started < thread_count; started++) {
        worker *w = &workers[started];
        if (config) w->config = *config;
        w->config.thread_index = started;
        w->setup = setup;
        w->user_data = user_data;
        int err = pthread_create(&w->thread, NULL, run_worker, w);
        if (err) {
            fprintf(stderr, "cumulo: cannot start thread %u: %s\n", started, strerror(err));
            result = CUMULO_E_NOMEM;
            break;
        }
    }
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
        if (result == CUMULO_OK) result = workers[i].status;
    }
    free(workers);
    return result;
}
