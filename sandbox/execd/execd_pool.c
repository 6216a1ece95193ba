/* execd_pool.c - pinhole-execd's thread pool: jobs wait in a queue bounded
 * by the loop (--queue), run on --max-executions threads, and come back to
 * the loop on a done list with the frames of streamed responses (both
 * under g_pool_mu; the loop is woken through its done event). Only the
 * loop touches a connection's bufferevent.
 *
 * Beside the pool, one parser thread parses the frames too large to parse
 * on the loop (over XD_PARSE_INLINE_MAX): each connection has at most one
 * frame there, so its queue is bounded by the connections; a parsed frame
 * comes back on the same done list. The parser serves identities in turn
 * (parse_take), so one identity's frames never queue another's behind
 * more than the one being parsed. */
#include "execd_state-int.h"

#include <dirent.h>
#include <event2/event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_pool_cv = PTHREAD_COND_INITIALIZER;
static xd_job *g_queue_head, *g_queue_tail, *g_done;
size_t g_queued, g_running;
static bool g_quit;
static struct event *g_done_ev;
static pthread_t *g_threads;
static size_t g_started;
static xd_frame *g_frames_head, *g_frames_tail;
static xd_job *g_parse_head, *g_parse_tail;
static pthread_cond_t g_parse_cv = PTHREAD_COND_INITIALIZER;
static pthread_t g_parser;
static bool g_parser_started;

void xd_job_free(xd_job *job)
{
    free(job->frame);
    json_decref(job->req);
    json_decref(job->resp);
    free(job);
}

/* The two queues (the pool's, the parser's): under g_pool_mu. */
static void queue_push(xd_job **head, xd_job **tail, xd_job *job)
{
    job->next = NULL;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

/* The next job of a queue, waited for; NULL once the pool stops with the
 * queue empty. */
static xd_job *queue_take(xd_job **head, xd_job **tail, pthread_cond_t *cv)
{
    while (!g_quit && *head == NULL)
        pthread_cond_wait(cv, &g_pool_mu);
    xd_job *job = *head;
    if (job != NULL && (*head = job->next) == NULL)
        *tail = NULL;
    return job;
}

/* Under g_pool_mu (released while the loop is woken): job goes back to the
 * loop on the done list. */
static void hand_back(xd_job *job)
{
    job->next = g_done;
    g_done = job;
    pthread_mutex_unlock(&g_pool_mu);
    event_active(g_done_ev, EV_READ, 0);
    pthread_mutex_lock(&g_pool_mu);
}

void xd_enqueue(xd_job *job)
{
    queue_push(&g_queue_head, &g_queue_tail, job);
    g_queued++;
    pthread_cond_signal(&g_pool_cv);
}

static void *pool_main(void *arg)
{
    (void)arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&g_pool_mu);
    for (;;) {
        xd_job *job = queue_take(&g_queue_head, &g_queue_tail, &g_pool_cv);
        if (job == NULL)
            break;
        g_queued--;
        g_running++;
        pthread_mutex_unlock(&g_pool_mu);

        pthread_mutex_lock(&g_mu);
        job->tid = tid;
        bool cancelled = job->cancelled;
        pthread_mutex_unlock(&g_mu);
        if (g_quit || cancelled)
            job->resp = ph_wire_error(g_quit ? "shutting_down" : "io", "not run");
        else
            job->fn(job);
        pthread_mutex_lock(&g_mu);
        job->tid = 0;
        pthread_mutex_unlock(&g_mu);

        pthread_mutex_lock(&g_pool_mu);
        g_running--;
        hand_back(job);
    }
    pthread_mutex_unlock(&g_pool_mu);
    return NULL;
}

json_t *xd_frame_parse(const uint8_t *body, size_t len, const char **code, const char **msg)
{
    ph_wire_cost cost;
    size_t off;
    if (!ph_wire_frame_scan(body, len, &cost, &off)) {
        *code = "too_large";
        *msg = "the request has more than 32768 JSON values or nests deeper than 32";
        return NULL;
    }
    json_t *req = json_loadb((const char *)body, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(req)) {
        json_decref(req);
        *code = "protocol";
        *msg = "a frame must hold one JSON object";
        return NULL;
    }
    return req;
}

void xd_parse_enqueue(xd_job *job)
{
    pthread_mutex_lock(&g_pool_mu);
    queue_push(&g_parse_head, &g_parse_tail, job);
    pthread_cond_signal(&g_parse_cv);
    pthread_mutex_unlock(&g_pool_mu);
}

/* The next frame to parse, waited for: the first of the identity whose
 * frame the parser took least recently; NULL once the pool stops with the
 * queue empty. Under g_pool_mu. */
static xd_job *parse_take(void)
{
    static uint64_t turn;
    while (!g_quit && g_parse_head == NULL)
        pthread_cond_wait(&g_parse_cv, &g_pool_mu);
    xd_job *job = NULL, *before = NULL;
    for (xd_job *j = g_parse_head, *prev = NULL; j; prev = j, j = j->next) {
        if (job == NULL || j->conn->ident->parse_turn < job->conn->ident->parse_turn) {
            job = j;
            before = prev;
        }
    }
    if (job == NULL)
        return NULL;
    if (before)
        before->next = job->next;
    else
        g_parse_head = job->next;
    if (g_parse_tail == job)
        g_parse_tail = before;
    job->conn->ident->parse_turn = ++turn;
    return job;
}

static void *parse_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_pool_mu);
    for (;;) {
        xd_job *job = parse_take();
        if (job == NULL)
            break;
        pthread_mutex_unlock(&g_pool_mu);
        const char *msg = NULL;
        pthread_mutex_lock(&g_mu);
        bool cancelled = job->cancelled; /* its connection closed: dropped unparsed */
        pthread_mutex_unlock(&g_mu);
        if (cancelled)
            job->refusal = "io";
        else if (!xd_pool_stopping())
            job->req = xd_frame_parse(job->frame, job->frame_len, &job->refusal, &msg);
        else
            job->refusal = "shutting_down";
        free(job->frame);
        job->frame = NULL;
        if (job->req == NULL)
            job->resp = ph_wire_error(job->refusal, msg                ? msg
                                                    : cancelled ? "not parsed"
                                                                : "the daemon is stopping");
        pthread_mutex_lock(&g_pool_mu);
        hand_back(job);
    }
    pthread_mutex_unlock(&g_pool_mu);
    return NULL;
}

/* Kills what the pool thread tid started (its direct children: the fake
 * mechanism's PID-namespace init or plain session leader, the runtime's
 * client), so a blocked execute returns at once. Under g_mu. The thread
 * reaps its children itself, so a pid read here may be reused by the time
 * it is signalled: ph_signal_child checks it is still tid's child through
 * a pidfd, and the session is swept only for a child that led one. */
void xd_kill_children_of(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)tid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
        bool leader = false;
        if (pid > 0 && ph_signal_child(tid, pid, SIGKILL, &leader) == PH_OK && leader)
            ph_kill_session(pid);
    }
    fclose(f);
}

bool xd_job_cancelled(xd_job *job)
{
    pthread_mutex_lock(&g_mu);
    bool gone = job->cancelled;
    pthread_mutex_unlock(&g_mu);
    return gone;
}

bool xd_peer_behind(const xd_job *job)
{
    return __atomic_load_n(&job->conn->backlog, __ATOMIC_ACQUIRE) >= XD_STREAM_BACKLOG;
}

/* Hands fr (owned from here on) to the loop for job's connection. */
void xd_frame_queue(xd_job *job, xd_frame *fr)
{
    fr->conn = job->conn;
    __atomic_add_fetch(&job->conn->backlog, fr->len, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&g_pool_mu);
    if (g_frames_tail)
        g_frames_tail->next = fr;
    else
        g_frames_head = fr;
    g_frames_tail = fr;
    pthread_mutex_unlock(&g_pool_mu);
    event_active(g_done_ev, EV_READ, 0);
}

/* frame_obj (consumed) as a wire frame, or NULL. */
xd_frame *xd_frame_new(json_t *frame_obj)
{
    xd_frame *fr = calloc(1, sizeof *fr);
    bool ok = fr && frame_obj && ph_wire_frame(frame_obj, &fr->data, &fr->len) == 0;
    json_decref(frame_obj);
    if (!ok) {
        free(fr);
        return NULL;
    }
    return fr;
}

void xd_frame_free(xd_frame *fr)
{
    free(fr->data);
    free(fr);
}

bool xd_pool_stopping(void)
{
    return __atomic_load_n(&g_quit, __ATOMIC_ACQUIRE);
}

size_t xd_pool_start(size_t n, struct event *done_ev)
{
    g_done_ev = done_ev;
    g_parser_started = pthread_create(&g_parser, NULL, parse_main, NULL) == 0;
    if (!g_parser_started)
        return 0;
    g_threads = calloc(n, sizeof *g_threads);
    for (g_started = 0; g_threads && g_started < n; g_started++)
        if (pthread_create(&g_threads[g_started], NULL, pool_main, NULL) != 0)
            break;
    return g_started;
}

void xd_pool_stop(void)
{
    pthread_mutex_lock(&g_pool_mu);
    __atomic_store_n(&g_quit, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&g_pool_cv);
    pthread_cond_broadcast(&g_parse_cv);
    pthread_mutex_unlock(&g_pool_mu);
    pthread_mutex_lock(&g_mu);
    pthread_mutex_lock(&g_pool_mu);
    for (xd_job *j = g_queue_head; j; j = j->next)
        j->cancelled = true;
    pthread_mutex_unlock(&g_pool_mu);
    pthread_mutex_unlock(&g_mu);
    /* Running jobs: their commands are killed through their threads. */
    for (int round = 0; round < 50; round++) {
        pthread_mutex_lock(&g_pool_mu);
        size_t running = g_running;
        pthread_mutex_unlock(&g_pool_mu);
        if (running == 0)
            break;
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            pid_t tid = (pid_t)atoi(de->d_name);
            if (tid > 0 && tid != (pid_t)syscall(SYS_gettid)) {
                pthread_mutex_lock(&g_mu);
                xd_kill_children_of(tid);
                pthread_mutex_unlock(&g_mu);
            }
        }
        if (d)
            closedir(d);
        usleep(100 * 1000);
    }
    for (size_t i = 0; i < g_started; i++)
        pthread_join(g_threads[i], NULL);
    if (g_parser_started)
        pthread_join(g_parser, NULL);
    g_parser_started = false;
    free(g_threads);
    g_threads = NULL;
    g_started = 0;
}

void xd_pool_take(xd_job **done, xd_frame **frames)
{
    pthread_mutex_lock(&g_pool_mu);
    *done = g_done;
    g_done = NULL;
    *frames = g_frames_head;
    g_frames_head = g_frames_tail = NULL;
    pthread_mutex_unlock(&g_pool_mu);
}
