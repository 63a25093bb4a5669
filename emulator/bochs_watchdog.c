/* A time budget for a Bochs run that costs nothing per instruction (lowp.emulator.bochs_guest): a thread of this
   library, armed before Session.run and disarmed after it, calls bochscpu's cpu_set_killbit(0) when the deadline
   passes. That sets the CPU's async_event and Bochs's kill request: the CPU stops at the next instruction
   boundary and bochscpu's run loop returns, with RIP at the instruction it stopped before. The thread never
   touches Python (Session.run holds the GIL throughout).

   Once the deadline has passed it sets the kill bit again every REFIRE_NS until disarmed: cpu_set_killbit is two
   plain stores (async_event = 1, then kill_bochs_request = 1) racing with the CPU thread, which may see the first,
   find no kill request yet and clear async_event, and then spin on with the request set and nothing to look at
   it (a hang the host's backstop caught after a minute in two CI runs, on loaded machines). A second store, with
   the request already visible, stops it. */
#include <errno.h>
#include <pthread.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static struct timespec deadline;
static int armed, fired, started;
static void (*kill_cpu)(unsigned);

#define REFIRE_NS 20000000L

static void later(struct timespec *when, long long ns) {
    ns += when->tv_nsec;
    when->tv_sec += ns / 1000000000;
    when->tv_nsec = ns % 1000000000;
}

static void *watch(void *unused) {
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!armed) pthread_cond_wait(&changed, &lock);
        if (pthread_cond_timedwait(&changed, &lock, &deadline) == ETIMEDOUT && armed) {
            kill_cpu(0);
            fired = 1;
            clock_gettime(CLOCK_REALTIME, &deadline);
            later(&deadline, REFIRE_NS);        /* still armed: again until the caller disarms */
        }
    }
    return 0;
}

/* A fork copies this library's state but not its thread (lowp forks Bochs guests from the host's process, which
   may have started a watchdog itself: a test does): the child starts from the state a fresh load has, its lock
   and condition new (the thread may have held the lock at the fork), and its first start makes its own thread. */
static void forked(void) {
    pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_changed = PTHREAD_COND_INITIALIZER;
    lock = fresh_lock;
    changed = fresh_changed;
    armed = fired = started = 0;
}

/* Start the thread once; set_killbit: bochscpu's cpu_set_killbit. 0 on success. */
int lowp_watchdog_start(void (*set_killbit)(unsigned)) {
    static int at_fork;
    pthread_t thread;
    kill_cpu = set_killbit;
    if (started) return 0;
    if (!at_fork && pthread_atfork(0, 0, forked)) return -1;
    at_fork = 1;
    if (pthread_create(&thread, 0, watch, 0)) return -1;
    pthread_detach(thread);
    started = 1;
    return 0;
}

void lowp_watchdog_arm(double seconds) {
    pthread_mutex_lock(&lock);
    clock_gettime(CLOCK_REALTIME, &deadline);
    later(&deadline, (long long)(seconds * 1e9));
    armed = 1;
    fired = 0;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
}

/* 1 if the deadline passed (and the CPU was stopped) since the last arm. */
int lowp_watchdog_disarm(void) {
    pthread_mutex_lock(&lock);
    armed = 0;
    int was = fired;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
    return was;
}
