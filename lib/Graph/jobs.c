/* jobs.c - the one way the library runs independent compile jobs in parallel (CPU kernel
 * modules, PTX modules, CUDA module loads): IC_COMPILE_THREADS threads, the calling one
 * included, take jobs in index order from a shared counter; after the first failure no new
 * job starts and that failure's status and message are the caller's (a message is per thread:
 * a worker's is copied into the calling thread's). */
#include <stdio.h>
#include <unistd.h>
#include "graph-impl.h"

typedef struct {
    ic_ctx *c;
    int njobs;
    ic__job_fn fn;
    void *arg;
    pthread_mutex_t lock;     /* next, status, msg, ids */
    int next, ids;
    ic_status status;
    char msg[IC_ERRMAX];      /* the first failure's message, from the thread that ran it */
} jobs;

int ic__compile_threads(const ic_ctx *c, int njobs)
{
    long n = c->sw.compile_threads > 0 ? c->sw.compile_threads : sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n > IC__MAX_JOB_THREADS ? IC__MAX_JOB_THREADS : n;
    return (int)(n < njobs ? n : njobs < 1 ? 1 : njobs);
}

static void *worker(void *arg)
{
    jobs *J = arg;
    pthread_mutex_lock(&J->lock);
    int thread = J->ids++;
    pthread_mutex_unlock(&J->lock);
    for (;;) {
        pthread_mutex_lock(&J->lock);
        int j = J->status ? J->njobs : J->next++;
        pthread_mutex_unlock(&J->lock);
        if (j >= J->njobs)
            break;
        ic_status s = J->fn(J->arg, j, thread);
        pthread_mutex_lock(&J->lock);
        if (s && !J->status) {
            J->status = s;
            snprintf(J->msg, sizeof J->msg, "%s", ic_last_error(J->c));
        }
        pthread_mutex_unlock(&J->lock);
    }
    return NULL;
}

ic_status ic__run_jobs(ic_ctx *c, int njobs, ic__job_fn fn, void *arg, int *nthreads)
{
    jobs J = { .c = c, .njobs = njobs, .fn = fn, .arg = arg };
    pthread_mutex_init(&J.lock, NULL);
    int n = ic__compile_threads(c, njobs), started = 0;
    pthread_t tids[IC__MAX_JOB_THREADS];
    for (int i = 1; i < n; i++)
        if (pthread_create(&tids[started], NULL, worker, &J) == 0)
            started++;
    worker(&J); /* even if no thread could start, every job gets done here */
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&J.lock);
    if (nthreads)
        *nthreads = started + 1;
    return J.status ? ic__error(c, J.status, "%s", J.msg) : IC_OK;
}
