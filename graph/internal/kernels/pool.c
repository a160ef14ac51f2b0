//go:build cgo && !purego

// Float32 products, element-wise and row-wise loops (range jobs: vec.c's
// and layernorm.c's kernels on SplitRange's chunks), attention heads
// (attention.c's softmax and sampled Bayesian heads) and EM problems
// (em.c's), the last three whole batch elements at a time, shared with
// workers.go's helper goroutines in one cgo call, and the helpers' sleep.
// A range job goes through the same slots as a product's shares
// (pool_run): the helper takes chunks from the job's counter until none is
// left, inside C, where a Go job (RunShares, SplitRange) cost it a
// goroutine hand-over, and each chunk a cgo call.
//
// pf_pool_sgemm, called once by the product's caller, posts the shares to
// the helpers' slots here, computes its own share, and waits for theirs
// in C: no RunShares, no WaitGroup, no return to Go in between. A helper
// polling for work in Go (workers.go's poll) sees its slot's state
// and runs its share with one cgo call (pf_pool_take); a helper that has
// polled in vain for helperSpin sleeps here (pf_pool_serve) rather than
// parking its goroutine, so that the caller's C code wakes it straight
// from a condition variable, and it runs the share before it returns to
// Go; a Go job (RunShares' other sections) wakes it too, and makes
// pf_pool_serve return. The helpers stay Go's threads, so Go's signal
// handling (Ctrl-C saving a checkpoint, the profiler) is unchanged.
//
// Why: with every share posted as a Go job and run as a cgo call of its
// own, both Ps sat in long cgo calls, Go's sysmon retook a P about six
// times a Set Transformer step, threads parked and woke some 35 times a
// step, and the helper came too late for 34 of 82 shares. Helper threads
// of C's own (pthreads) spared the products that, but made two helpers
// per spare core, one for products and one for the rest, each asleep
// when the other's work came, and three threads spinning on two cores:
// the Set Transformer step was 10–15% slower. One helper per core, which
// polls in Go and sleeps in C, serves both.
//
// The pool is the process's: kernels have no handle on a program, and two
// programs running at once share the cores anyway. It is the only mutable
// state at file scope; it holds no values between products (only the
// slots and the argument block of the product under way) and allocates
// nothing.
//
// One product at a time: a caller takes the pool with a compare-and-swap
// on busy. A caller that finds it taken (two goroutines' products at
// once, in a ParallelFor) computes every share itself, in order, which
// gives the same values: each element of C is computed the same way
// whichever thread takes its block (pf_sgemm_par), and the caller's own
// share takes every block it finds left.

#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE // sched_getcpu, sched_setaffinity
#endif
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <kernels.h>
#include <pthread.h>
#include <time.h>

// WAIT_SPIN_NS is how long the caller, its share done, polls for the
// helpers' before it sleeps: a helper's share is about as long as the
// caller's, so it is usually nearly done.
#define WAIT_SPIN_NS 50000

// SERVE_SPIN_NS is how long a helper woken in pf_pool_serve polls for the
// next post after its share before it sleeps again: a step's sections
// come back to back or after serial gaps of a few µs, and a sleeping
// helper costs the caller a broadcast and starts its share some 25 µs
// late (TestStepPoolStats: 71 wake-ups a Set Transformer step, where it
// now counts about 4). workers.go's helperSpin, the same span, is the
// poll of a helper in Go. Longer is worse where it matters: a 350 µs poll
// here, on entry as after each share, made a quiet machine's Set
// Transformer step 2–9% faster, but with one other busy process on the
// two cores the Set Transformer step 35–45% and the Transformer step
// 17–20% slower (BenchmarkSetTransformerStepLN, BenchmarkSeq2SeqStep,
// alternated): a polling helper is a runnable thread, and on busy cores
// it takes its time from the caller.
#define SERVE_SPIN_NS 50000

// The states of a slot's product share. The caller moves it IDLE →
// POSTED and, if the helper has not started, POSTED → IDLE (taking the
// share back); the helper moves it POSTED → RUNNING → DONE; the caller
// DONE → IDLE.
enum { IDLE, POSTED, RUNNING, DONE };

// sgemm_job is pf_sgemm_par's arguments but the worker index.
struct sgemm_job {
	int level, mode, transA, transB, m, n, k;
	float alpha, beta;
	const float *A, *B, *bias;
	int lda, ldb, ldc, rb, cw;
	float *C, *bp;
	int *ctr;
};

// range_job is an element-wise or row-wise loop over [0, n) cut into
// chunks, which the threads take from the two ends of ctr (pf_claim, the
// caller from the front): chunk c is [lo, hi)
// with lo = units·c/chunks·align and hi = min(units·(c+1)/chunks·align,
// n), SplitRange's bounds (workers.go), and run_range runs the kernel of
// kind (PF_RANGE_*) on it. Each chunk's values depend on its elements
// alone, so on no thread's count or speed.
struct range_job {
	int kind, n, d, chunks, units, align;
	float eps;
	void *p[PF_RANGE_PTRS];
	int *ctr;
};

// counter is a range or heads job's two-ended counter (pf_claim's 8
// bytes), on a cache line of its own in the caller's frame: each claim by the other core takes the line
// away, and the job's arguments and the caller's locals beside it would
// go with it (the caller reads them at each chunk or batch element).
struct counter {
	_Alignas(64) long long n;
	char pad[56];
};

// The kinds of job.
enum { JOB_GEMM, JOB_RANGE, JOB_ATTN_FWD, JOB_ATTN_BWD, JOB_EM_FWD, JOB_EM_BWD, JOB_BAYES_FWD, JOB_BAYES_BWD };

// job is what a slot's share runs: a product's share (pf_sgemm_par),
// chunks of a range job, or batch elements of attention heads
// (pf_attn_heads_run), sampled Bayesian heads (pf_bayes_job_run) or EM
// problems (pf_em_job_run), until none is left.
struct job {
	int kind; // JOB_GEMM: g, JOB_RANGE: r, JOB_ATTN_*: a
	union {
		struct sgemm_job g;
		struct range_job r;
		pf_attn_job a;
		pf_em_job e;
		pf_bayes_job y;
	};
};

// slot is one helper's mailbox, on a cache line of its own: the state of
// its product share, whether a Go job waits for it (set by workers.go),
// and whether it sleeps.
struct slot {
	_Alignas(64) int state;
	int gojob;
	int sleeping;
	int kicked; // pf_pool_wake woke the helper for this slot (under pool.mu)
#ifdef __linux__
	// While sleeping (under pool.mu): the helper's thread and its CPUs
	// as it went to sleep, and whether pf_pool_wake narrowed them.
	pid_t tid;
	int narrowed;
	cpu_set_t cpus;
#endif
};

static struct {
	_Alignas(64) int busy; // a caller holds the pool
	struct job job;        // the job under way, written before POSTED
	pthread_mutex_t mu;    // with the two conditions below, for sleeping
	pthread_cond_t work;   // a slot became POSTED or got a Go job
	pthread_cond_t done;   // a slot became DONE
	int waiting;           // a caller sleeping on done (under mu)
	long long posted_ns;   // when the job was posted, with stats on
	long long helper_done; // when slot 0's helper finished it, with stats on
	struct slot slots[PF_POOL_SLOTS];
} pool = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.work = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

static inline int load(int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void store(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline int cas(int *p, int from, int to) {
	return __atomic_compare_exchange_n(p, &from, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static long long now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void run_range(const struct range_job *r, int lo, int hi);

// run_share runs worker's share of j: its blocks of a product, or the
// range job's chunks or the heads' batch elements it takes from the
// counter.
static void run_share(const struct job *jb, int worker) {
	if (jb->kind == JOB_ATTN_FWD || jb->kind == JOB_ATTN_BWD) {
		pf_attn_heads_run(&jb->a, jb->kind == JOB_ATTN_BWD, worker);
		return;
	}
	if (jb->kind == JOB_EM_FWD || jb->kind == JOB_EM_BWD) {
		pf_em_job_run(&jb->e, jb->kind == JOB_EM_BWD, worker);
		return;
	}
	if (jb->kind == JOB_BAYES_FWD || jb->kind == JOB_BAYES_BWD) {
		pf_bayes_job_run(&jb->y, jb->kind == JOB_BAYES_BWD, worker);
		return;
	}
	if (jb->kind == JOB_RANGE) {
		const struct range_job *r = &jb->r;
		for (;;) {
			int c = pf_claim(r->ctr, worker, r->chunks);
			if (c < 0) return;
			long long lo = (long long)r->units * c / r->chunks * r->align;
			long long hi = (long long)r->units * (c + 1) / r->chunks * r->align;
			if (hi > r->n) hi = r->n;
			if (lo < hi) run_range(r, (int)lo, (int)hi);
		}
	}
	const struct sgemm_job *j = &jb->g;
	pf_sgemm_par(j->level, j->mode, worker, j->transA, j->transB, j->m, j->n, j->k, j->alpha, j->A, j->lda, j->B,
	             j->ldb, j->beta, j->C, j->ldc, j->bias, j->bp, j->rb, j->cw, j->ctr);
}

// run_range runs r's kernel on [lo, hi): the call workers.go's
// SplitRange makes on the chunk through the Go bindings (vec_cgo.go,
// layernorm_cgo.go), so the values are theirs.
static void run_range(const struct range_job *r, int lo, int hi) {
	void *const *p = r->p;
	int d = r->d, len = hi - lo, row = lo / (d > 0 ? d : 1);
	switch (r->kind) {
	case PF_RANGE_ADD_REPEAT: // a, b [d], y
		pf_add_repeat((const float *)p[0] + lo, p[1], (float *)p[2] + lo, len, d);
		break;
	case PF_RANGE_ADD: // a, b, y of one length
		pf_add_repeat((const float *)p[0] + lo, (const float *)p[1] + lo, (float *)p[2] + lo, len, len);
		break;
	case PF_RANGE_MUL: // a, b, y
		pf_mul((const float *)p[0] + lo, (const float *)p[1] + lo, (float *)p[2] + lo, len);
		break;
	case PF_RANGE_RELU: // x, y
		pf_relu((const float *)p[0] + lo, (float *)p[1] + lo, len);
		break;
	case PF_RANGE_RELU_GRAD: // x, g, y
		pf_relu_grad((const float *)p[0] + lo, (const float *)p[1] + lo, (float *)p[2] + lo, len);
		break;
	case PF_RANGE_LN_FWD: // x, γ, β, y, mean, rstd; rows of d
		pf_layernorm_fwd((const float *)p[0] + lo, p[1], p[2], (float *)p[3] + lo, len / d, d, r->eps,
		                 (float *)p[4] + row, (float *)p[5] + row);
		break;
	case PF_RANGE_ADD_LN_FWD: // x, f, γ, β, s, y, mean, rstd; rows of d
		pf_add_layernorm_fwd((const float *)p[0] + lo, (const float *)p[1] + lo, p[2], p[3], (float *)p[4] + lo,
		                     (float *)p[5] + lo, len / d, d, r->eps, (float *)p[6] + row, (float *)p[7] + row);
		break;
	case PF_RANGE_LN_BWD: // x, γ, g, mean, rstd, dx, dγ, dβ, part [2d], g2 or NULL; two chunks
		// The first chunk's rows accumulate into dγ, dβ, the second's
		// into part, which the caller adds after (LayerNormBwdHalves32),
		// whichever thread runs which.
		pf_layernorm_bwd((const float *)p[0] + lo, p[1], (const float *)p[2] + lo,
		                 p[9] ? (const float *)p[9] + lo : NULL, (const float *)p[3] + row, (const float *)p[4] + row,
		                 (float *)p[5] + lo, lo == 0 ? p[6] : p[8], lo == 0 ? p[7] : (float *)p[8] + d, len / d, d);
		break;
	case PF_RANGE_COLSUM: // x [d×n], s [n]: columns [lo, hi) of d rows
		pf_colsum_ld((const float *)p[0] + lo, d, len, r->n, (float *)p[1] + lo);
		break;
	}
}

// pf_pool_slot is slot i's words (state, gojob, sleeping), for
// workers.go's atomics.
int *pf_pool_slot(int i) { return &pool.slots[i].state; }

// stats_on makes pool_run and the helpers count into stats (PF_PS_*),
// for a test's measurement of the parallel sections (pf_pool_stats);
// off, nothing is timed. The counts are updated without atomics by the
// one caller holding the pool and its helper of slot 0, each its own
// words, so they are exact only with one helper (two cores).
static int stats_on;
static long long stats[PF_PS_N];

// pf_pool_stats_on turns the counting on (1, clearing the counts) or off.
void pf_pool_stats_on(int on) {
	if (on)
		for (int i = 0; i < PF_PS_N; i++) stats[i] = 0;
	store(&stats_on, on);
}

// pf_pool_stats is the counts (PF_PS_*).
long long *pf_pool_stats(void) { return stats; }

// take runs slot s's product share as worker w if one is posted, and
// reports whether it did; woke says the helper was asleep in
// pf_pool_serve, for the counts.
static int take(struct slot *s, int w, int woke) {
	if (load(&s->state) != POSTED || !cas(&s->state, POSTED, RUNNING)) return 0;
	if (load(&stats_on) && w == 1) {
		long long d = now_ns() - pool.posted_ns;
		stats[woke ? PF_PS_WOKE_STARTED : PF_PS_STARTED]++;
		stats[woke ? PF_PS_WOKE_START_NS : PF_PS_START_NS] += d;
		if (d > stats[PF_PS_START_MAX_NS]) stats[PF_PS_START_MAX_NS] = d;
		if (d > 10000) stats[PF_PS_START_LATE]++;
	}
	run_share(&pool.job, w);
	if (load(&stats_on) && w == 1) pool.helper_done = now_ns();
	store(&s->state, DONE);
	if (load(&pool.waiting)) {
		pthread_mutex_lock(&pool.mu);
		pthread_cond_broadcast(&pool.done);
		pthread_mutex_unlock(&pool.mu);
	}
	return 1;
}

// pf_pool_serve is helper i's sleep, after it has polled in vain in Go
// (worker i + 1 of the products): it sleeps until pf_pool_wake wakes it
// for a product share posted to slot i, runs it, polls for
// SERVE_SPIN_NS for the next one and sleeps again if none comes, and
// returns when workers.go has posted a Go job to the slot (gojob),
// clearing it. A broadcast meant for other slots' helpers, or a
// spurious wake-up, leaves it asleep.
//
// A share its caller took back before the helper, woken for it, could
// start (the wake-up takes some 25 µs, longer than many sections) is
// followed by the same poll: its caller is in a run of sections, and
// the next is likely to come within the span, where sleeping at once
// had the next section wake the helper again and, as often, take its
// share back too. The helper sleeps only when nothing is posted: a post
// found by the poll is taken without going through the mutex, so that
// sleeping is never set, even briefly, while the helper is awake (a
// caller seeing it would broadcast for nothing). Every wake-up for the
// slot (kicked) leads to that poll, even when the share was taken back
// before the helper got the mutex: going straight back to sleep left a
// helper that wakes later than a product lasts asleep for every product
// of a run (a benchmark's 50 products of 512x64x64, all on the caller's
// thread).
//
// Asleep, the helper keeps its thread and CPUs in its slot, so that
// pf_pool_wake can send it to another CPU than its waker's; woken, it
// takes its CPUs back under the mutex before it runs any share or Go
// code (the process's CPUs, should its own be refused).
void pf_pool_serve(int i) {
	struct slot *s = &pool.slots[i];
	for (;;) {
		int slept = 0;
		if (load(&s->state) != POSTED && !load(&s->gojob)) {
			// sleeping is set before state and gojob are read again,
			// and the posters store those before they read sleeping
			// (all sequentially consistent), so one side sees the
			// other.
			pthread_mutex_lock(&pool.mu);
#ifdef __linux__
			s->tid = (pid_t)syscall(SYS_gettid);
			if (sched_getaffinity(0, sizeof s->cpus, &s->cpus) != 0) s->tid = 0;
#endif
			store(&s->sleeping, 1);
			while (!s->kicked && load(&s->state) != POSTED && !load(&s->gojob)) {
				if (!slept && load(&stats_on) && i == 0) stats[PF_PS_SLEEPS]++;
				slept = 1;
				pthread_cond_wait(&pool.work, &pool.mu);
			}
			store(&s->sleeping, 0);
			s->kicked = 0;
#ifdef __linux__
			if (s->narrowed && sched_setaffinity(0, sizeof s->cpus, &s->cpus) != 0) {
				cpu_set_t all; // the CPUs changed while it slept: take the process's
				if (sched_getaffinity(getpid(), sizeof all, &all) == 0) sched_setaffinity(0, sizeof all, &all);
			}
			s->narrowed = 0;
#endif
			pthread_mutex_unlock(&pool.mu);
		}
		if (load(&s->gojob) && __atomic_exchange_n(&s->gojob, 0, __ATOMIC_SEQ_CST)) return;
		take(s, i + 1, slept); // or its caller took it back
		// Sections come back to back, or after short serial gaps:
		// poll for the next post before sleeping again.
		long long start = 0;
		for (int it = 0; load(&s->state) != POSTED && !load(&s->gojob); it++) {
			relax();
			if ((it & 63) != 63) continue;
			long long t = now_ns();
			if (!start) start = t;
			else if (t - start > SERVE_SPIN_NS) break;
		}
	}
}

// pf_pool_take runs the product share posted to slot i, if any, as worker
// i + 1, for a helper polling in Go, and reports whether it did.
int pf_pool_take(int i) { return take(&pool.slots[i], i + 1, 0); }

// pf_pool_wake wakes the sleeping helpers whose slots have a share posted
// or a Go job (kicked), after a post to a slot whose sleeping word is
// set; the others sleep on.
//
// On Linux, where it can (two CPUs or more allowed, the calls not
// refused), each is first kept off its waker's CPU (its CPUs less the
// waker's, until it wakes: pf_pool_serve restores them). Why: Linux wakes a thread
// on its waker's CPU when the other CPU is busy at that moment, and on
// two cores it often is, briefly, with one of Go's own threads (the
// scheduler's, the garbage collector's). The helper then waits behind
// its caller, which computes its share and takes the helper's back, for
// the rest of the scheduler's slice: 1–4 ms (perf sched), while the other
// CPU, idle again within microseconds, does not pull it for as long. A
// benchmark of 50 products of 512x64x64 ran on one thread in 6–28 of 80
// runs that way (half the rate), and none with the helper sent away;
// the Set Transformer step's best of ten alternated rounds went from
// 4.56 to 3.94 ms (graph/PERFORMANCE.md). The narrowing is done under
// the mutex, while the helper is known to be waiting on it, and undone
// in the same critical section that ends its sleep, so a helper runs no
// share and no Go code narrowed.
void pf_pool_wake(void) {
	pthread_mutex_lock(&pool.mu);
#ifdef __linux__
	int cpu = sched_getcpu();
#endif
	for (int i = 0; i < PF_POOL_SLOTS; i++) {
		struct slot *s = &pool.slots[i];
		if (!load(&s->sleeping) || (load(&s->state) != POSTED && !load(&s->gojob))) continue;
		s->kicked = 1;
#ifdef __linux__
		if (cpu < 0 || cpu >= CPU_SETSIZE || !s->tid || s->narrowed || !CPU_ISSET(cpu, &s->cpus) ||
		    CPU_COUNT(&s->cpus) < 2)
			continue;
		cpu_set_t away = s->cpus;
		CPU_CLR(cpu, &away);
		s->narrowed = sched_setaffinity(s->tid, sizeof away, &away) == 0;
		if (s->narrowed && i == 0 && load(&stats_on)) stats[PF_PS_WOKE_AWAY]++;
#endif
	}
	pthread_cond_broadcast(&pool.work);
	pthread_mutex_unlock(&pool.mu);
}

// pool_run runs j's shares 0 … workers−1: the caller runs share 0 and
// the helpers of slots 0 … helpers−1 (waiting in pf_pool_serve) the next
// ones, or the caller runs them all when another job holds the pool. It
// returns when every share is done, and reports how many shares the
// helpers ran (the others ran on the caller). Every pointer in j stays
// valid until it returns: no helper touches the job's memory afterwards.
static int pool_run(const struct job *j, int workers, int helpers) {
	int h = workers - 1 < helpers ? workers - 1 : helpers;
	if (h > PF_POOL_SLOTS) h = PF_POOL_SLOTS;
	if (h <= 0 || !cas(&pool.busy, 0, 1)) {
		for (int w = 0; w < workers; w++) run_share(j, w);
		return 0;
	}
	pool.job = *j; // published by the POSTED stores below
	int st = load(&stats_on);
	if (st) {
		pool.posted_ns = now_ns();
		pool.helper_done = 0;
		stats[PF_PS_SECTIONS]++;
	}
	int wake = 0;
	for (int i = 0; i < h; i++) store(&pool.slots[i].state, POSTED);
	for (int i = 0; i < h; i++) wake |= load(&pool.slots[i].sleeping);
	if (wake) pf_pool_wake();
	if (st && wake) stats[PF_PS_WAKES]++;
	run_share(j, 0);
	for (int w = h + 1; w < workers; w++) run_share(j, w); // shares with no helper
	long long own = st ? now_ns() : 0;
	if (st) stats[PF_PS_SECTION_NS] += own - pool.posted_ns;
	int ran = 0;
	for (int i = 0; i < h; i++) {
		struct slot *s = &pool.slots[i];
		// A helper that has not started its share (asleep, running a Go
		// job, or its core taken by another process) gives it back: the
		// caller runs it, with the same worker index, rather than wait
		// for the helper; it finds no block left and returns at once.
		if (cas(&s->state, POSTED, IDLE)) {
			if (st && i == 0) stats[PF_PS_TAKEN_BACK]++;
			run_share(j, i + 1);
			continue;
		}
		long long start = 0;
		for (int it = 0; load(&s->state) != DONE; it++) {
			relax();
			if ((it & 63) != 63) continue;
			long long t = now_ns();
			if (!start) start = t;
			else if (t - start > WAIT_SPIN_NS) {
				pthread_mutex_lock(&pool.mu);
				store(&pool.waiting, load(&pool.waiting) + 1);
				while (load(&s->state) != DONE) pthread_cond_wait(&pool.done, &pool.mu);
				store(&pool.waiting, load(&pool.waiting) - 1);
				pthread_mutex_unlock(&pool.mu);
			}
		}
		if (st && i == 0) {
			long long t = now_ns(), hd = pool.helper_done;
			stats[PF_PS_WAIT_NS] += t - own;
			if (hd && hd < own) stats[PF_PS_HELPER_IDLE_NS] += own - hd;
		}
		store(&s->state, IDLE);
		ran++;
	}
	// Keep no pointer into the caller's (Go) memory past the call, as
	// cgo's rules ask: every share is done or taken back by now.
	pool.job = (struct job){0};
	store(&pool.busy, 0);
	return ran;
}

// pf_pool_sgemm computes a product shared by workers threads, as
// pf_sgemm_par's workers 0 … workers−1 would, through pool_run. The
// values are pf_sgemm's on one thread whoever runs what. ctr is zeroed
// by the caller.
int pf_pool_sgemm(int workers, int helpers, int level, int mode, int transA, int transB, int m, int n, int k,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  const float *bias, float *bp, int rb, int cw, int *ctr) {
	struct job j = {.kind = JOB_GEMM,
	                .g = {level, mode, transA, transB, m, n, k, alpha, beta, A, B, bias, lda, ldb, ldc, rb, cw, C, bp,
	                      ctr}};
	return pool_run(&j, workers, helpers);
}

// pf_pool_range runs the range job of kind over [0, n) in chunks (see
// range_job) on up to workers threads through pool_run, in the caller's
// one cgo call: element-wise and row-wise loops reach the helpers as the
// products do, without a Go hand-over per chunk. p0 … p9 are the kernel's
// arrays (range_job's kinds say which), unused ones NULL.
int pf_pool_range(int workers, int helpers, int kind, int n, int d, int chunks, int units, int align, float eps,
                  void *p0, void *p1, void *p2, void *p3, void *p4, void *p5, void *p6, void *p7, void *p8, void *p9) {
	struct counter ctr = {0};
	struct job j = {.kind = JOB_RANGE,
	                .r = {kind, n, d, chunks, units, align, eps, {p0, p1, p2, p3, p4, p5, p6, p7, p8, p9}, (int *)&ctr.n}};
	return pool_run(&j, workers, helpers);
}

// pf_pool_attn runs the forward (bwd 0) or backward of softmax heads laid
// out as pf_attn_heads_fwd's and _bwd's (their arguments, b0 and bstep
// aside) on up to workers threads through pool_run, in the caller's one
// cgo call: the workers take whole batch elements from one two-ended
// counter (pf_attn_heads_run), so a helper that starts late, or whose
// core another process takes, leaves its elements to the caller instead
// of a fixed share the caller waits for. With pstride 0 the forward's p holds
// a scratch of n·m weights for each of the workers. Each element's values
// are its own calls', whoever runs it.
int pf_pool_attn(int workers, int helpers, int bwd, int level, const float *q, int ldq, const float *k, int ldk,
                 const float *v, int ldv, const float *g, int ldg, int b, int heads, int n, int m, int d, int dv,
                 float scale, const float *mask, int causal, const float *bias, const float *drop, float *p,
                 int pstride, float *out, int ldo, float *dq, float *dk, float *dvv, int residual) {
	struct counter ctr = {0};
	struct job j = {.kind = bwd ? JOB_ATTN_BWD : JOB_ATTN_FWD,
	                .a = {.level = level, .ldq = ldq, .ldk = ldk, .ldv = ldv, .ldg = ldg, .ldo = ldo, .b = b,
	                      .heads = heads, .n = n, .m = m, .d = d, .dv = dv, .causal = causal, .residual = residual,
	                      .pstride = pstride, .scale = scale, .q = q, .k = k, .v = v, .g = g, .mask = mask,
	                      .bias = bias, .drop = drop, .p = p, .out = out, .dq = dq, .dk = dk, .dvv = dvv, .ctr = (int *)&ctr.n}};
	return pool_run(&j, workers, helpers);
}

// pf_pool_em runs the EM problems of j, forward or (bwd) backward, on up
// to workers threads through pool_run, in the caller's one cgo call: the
// workers take whole batch elements from one two-ended counter
// (pf_em_job_run), as pf_pool_attn's do, where graph's EM op ran them as
// Go jobs (a cgo call a problem, and a helper that had to come back to Go
// to take them). It
// returns whether every problem's scratch was large enough.
int pf_pool_em(int workers, int helpers, int bwd, const int *dims, const int *iv, const int *gld, const long *offs,
               const float *hv, const float *q, const float *xi0, const float *mu0, const float *km, const float *qm,
               const float *sr, float *trace, float *out, float *gq, float *gxi0, float *gmu0, float *gh, float *scr) {
	struct counter ctr = {0};
	int failed = 0;
	struct job jb = {.kind = bwd ? JOB_EM_BWD : JOB_EM_FWD,
	                 .e = {.b = dims[0], .heads = dims[1], .n = dims[2], .m = dims[3], .d = dims[4], .dv = dims[5],
	                       .ldo = dims[6], .ldr = dims[7], .hmask = dims[8], .iv = iv, .gld = gld, .q = q, .xi0 = xi0,
	                       .mu0 = mu0, .km = km, .qm = qm, .sr = sr, .hv = hv, .q_b = offs[0], .q_h = offs[1],
	                       .k_b = offs[2], .k_h = offs[3], .v_b = offs[4], .v_h = offs[5], .o_b = offs[6],
	                       .o_h = offs[7], .sr_b = offs[8], .sr_h = offs[9], .g_q_b = offs[10], .g_q_h = offs[11],
	                       .g_k_b = offs[12], .g_k_h = offs[13], .g_v_b = offs[14], .g_v_h = offs[15],
	                       .tsize = offs[16], .ns = offs[17], .trace = trace, .out = out, .gq = gq, .gxi0 = gxi0,
	                       .gmu0 = gmu0, .gh = gh, .scr = scr, .ctr = (int *)&ctr.n, .failed = &failed}};
	pool_run(&jb, workers, helpers);
	return !failed;
}

// pf_pool_bayes runs the sampled Bayesian heads of pf_bayes_job's pass,
// forward or (bwd) backward, on up to workers threads through pool_run,
// the workers taking whole batch elements from one two-ended counter
// (pf_bayes_job_run), as pf_pool_em does for EM.
int pf_pool_bayes(int workers, int helpers, int bwd, const int *dims, const float *fl, double gd, long pgsize,
                  const float *q, const float *k, const float *v, const float *g, const float *mask, const float *qmask,
                  const float *noise, const float *pad, const float *b2, const float *xc, const double *kc, float *p,
                  float *x, float *out, float *dc, float *dq, float *dk, float *dvv, float *pg, double *sums,
                  double *part, unsigned *skipped) {
	struct counter ctr = {0};
	struct job jb = {.kind = bwd ? JOB_BAYES_BWD : JOB_BAYES_FWD,
	                 .y = {.level = dims[0], .b = dims[1], .h = dims[2], .n = dims[3], .m = dims[4], .d = dims[5],
	                       .dv = dims[6], .ld = dims[7], .ldv = dims[8], .padsize = dims[9], .np = dims[10],
	                       .r = dims[11], .scale = fl[0], .gx = fl[1], .gd = gd, .pgsize = pgsize, .q = q, .k = k,
	                       .v = v, .g = g, .mask = mask, .qmask = qmask, .noise = noise, .pad = pad, .b2 = b2,
	                       .xc = xc, .kc = kc, .p = p, .x = x, .out = out, .dc = dc, .dq = dq, .dk = dk, .dvv = dvv,
	                       .pg = pg, .sums = sums, .part = part, .skipped = skipped, .ctr = (int *)&ctr.n}};
	return pool_run(&jb, workers, helpers);
}
