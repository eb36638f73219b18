/* Kernel dispatch and threading. The ISA table is chosen once, at the
 * first call, from the CPU's features (WK_KERNELS=ref forces the portable
 * reference); the work of each call is split here over the pool's threads
 * and the table's entries run on the pieces. */
#include "kernels-impl.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dequant-orc.h"

#ifdef WK_HAVE_AVX2_KERNELS
#include <cpuid.h>
#endif

/* GNU indent misreads the _Atomic (type) specifier. */
/* *INDENT-OFF* */
static _Atomic (const wk_kernel_set *) wk_kernels_forced;
static _Atomic (const wk_kernel_set *) wk_kernels_chosen;
/* *INDENT-ON* */

int
wk_kernels_avx2_usable (void)
{
#ifdef WK_HAVE_AVX2_KERNELS
  unsigned a, b, c, d;

  __builtin_cpu_init ();
  /* avx2 also says the OS saves the ymm registers; clang 14 knows no
   * "f16c" feature string, so that one comes from CPUID leaf 1 */
  if (!__builtin_cpu_supports ("avx2") || !__builtin_cpu_supports ("fma"))
    return 0;
  if (!__get_cpuid (1, &a, &b, &c, &d))
    return 0;
  return (c & bit_F16C) != 0;
#else
  return 0;
#endif
}

int
wk_kernels_avx2vnni_usable (void)
{
#ifdef WK_HAVE_AVX2_KERNELS
  unsigned a, b, c, d;

  /* AVX-VNNI: CPUID leaf 7, sub-leaf 1, EAX bit 4 */
  return wk_kernels_avx2_usable () && __get_cpuid_count (7, 1, &a, &b, &c, &d)
      && (a & (1u << 4)) != 0;
#else
  return 0;
#endif
}

#ifdef WK_HAVE_AVX512_KERNELS
static wk_kernel_set wk_kernels_avx512_set;
static pthread_once_t wk_kernels_avx512_once = PTHREAD_ONCE_INIT;

static void
wk_kernels_avx512_build (void)
{
  wk_kernels_avx512_init (&wk_kernels_avx512_set);
}

static const wk_kernel_set *
wk_kernels_avx512_get (void)
{
  __builtin_cpu_init ();
  if (!wk_kernels_avx2_usable () || !__builtin_cpu_supports ("avx512f")
      || !__builtin_cpu_supports ("avx512bw")
      || !__builtin_cpu_supports ("avx512vl")
      || !__builtin_cpu_supports ("avx512dq"))
    return NULL;
  pthread_once (&wk_kernels_avx512_once, wk_kernels_avx512_build);
  return &wk_kernels_avx512_set;
}
#endif

/* orcc's generated functions compile their program on the first call and
 * set a plain `static volatile int p_inited` under orc_once_mutex, but test
 * it unlocked: two streaming threads making the first call race on it
 * (ThreadSanitizer sees it). One tiny call of each kernel inside a
 * pthread_once sets the flags before any concurrent call, and pthread_once
 * orders every later caller after it. The -dist.c backups (-Dorc=disabled)
 * have no flag; the calls are then a harmless one-element loop. */
static pthread_once_t wk_kernels_orc_once = PTHREAD_ONCE_INIT;

static void
wk_kernels_orc_warm (void)
{
  float lo[1], hi[1];
  const int8_t q8[1] = { 0 };
  const uint8_t q4[1] = { 0 };

  wk_orc_dequant_q8_0 (lo, q8, 1.0f, 1);
  wk_orc_dequant_q4_0 (lo, hi, q4, 1.0f, 1);
}

int
wk_kernels_simd_sets (const wk_kernel_set ** sets, int max)
{
  int n = 0;

#ifdef WK_HAVE_AVX2_KERNELS
  if (n < max && wk_kernels_avx2_usable ())
    sets[n++] = &wk_kernels_avx2;
  if (n < max && wk_kernels_avx2vnni_usable ())
    sets[n++] = &wk_kernels_avx2vnni;
#endif
#ifdef WK_HAVE_AVX512_KERNELS
  if (n < max && wk_kernels_avx512_get ())
    sets[n++] = wk_kernels_avx512_get ();
#endif
#ifdef WK_HAVE_WASM_KERNELS
  /* the module does not instantiate without SIMD128 */
  if (n < max)
    sets[n++] = &wk_kernels_wasm;
#endif
#ifdef __wasm__
  /* the relaxed module's (x86-on-wasm.h), the widest */
  if (n < max && &wk_kernels_avx2 != NULL)
    sets[n++] = &wk_kernels_avx2;
#endif
  (void) sets;
  (void) max;
  return n;
}

/* The widest usable set; WK_KERNELS=ref, avx2, avx512 or wasm picks one
 * (when usable). */
static const wk_kernel_set *
wk_kernels_choose (void)
{
  const wk_kernel_set *sets[5];
  const char *env = getenv ("WK_KERNELS");
  int n = wk_kernels_simd_sets (sets, 5), i;

  if (env && strcmp (env, "ref") == 0)
    return &wk_kernels_ref;
  if (env && *env)
    for (i = 0; i < n; i++)
      if (strcmp (env, sets[i]->name) == 0)
        return sets[i];
  return n > 0 ? sets[n - 1] : &wk_kernels_ref;
}

/* -1: not read yet */
static atomic_int wk_kernels_int8_mode = -1;

int
wk_kernels_int8 (void)
{
  int mode = atomic_load_explicit (&wk_kernels_int8_mode,
      memory_order_relaxed);

  if (mode < 0) {
    /* racing first calls all compute the same answer */
    const char *env = getenv ("WK_INT8");
    /* the encoder's integer products run by default only on q8_0 weights
     * where the kernel set says they pay (linear_q_default: AVX-512 VNNI,
     * the whole encoder 1.33-1.84x faster from the default model to
     * small, and AVX-VNNI; the default model's development-set WER within
     * 0.3 points);
     * WK_INT8=all for q4_0 and on other sets too, WK_INT8=dec never */
    mode = WK_INT8_AUTO;
    if (env && (strcmp (env, "0") == 0 || strcmp (env, "off") == 0))
      mode = WK_INT8_OFF;
    else if (env && strcmp (env, "all") == 0)
      mode = WK_INT8_ALL;
    else if (env && strcmp (env, "dec") == 0)
      mode = WK_INT8_DEC;
    atomic_store_explicit (&wk_kernels_int8_mode, mode, memory_order_relaxed);
  }
  return mode;
}

const wk_kernel_set *
wk_kernels_get (void)
{
  const wk_kernel_set *set;

  pthread_once (&wk_kernels_orc_once, wk_kernels_orc_warm);
  set = atomic_load_explicit (&wk_kernels_forced, memory_order_acquire);
  if (set)
    return set;
  set = atomic_load_explicit (&wk_kernels_chosen, memory_order_acquire);
  if (set)
    return set;
  /* Racing first calls all compute the same answer. */
  set = wk_kernels_choose ();
  atomic_store_explicit (&wk_kernels_chosen, set, memory_order_release);
  return set;
}

void
wk_kernels_set (const wk_kernel_set * set)
{
  atomic_store_explicit (&wk_kernels_forced, set, memory_order_release);
}

const char *
wk_kernels_name (void)
{
  return wk_kernels_get ()->name;
}

/* [*b, *e) = piece ith of nth of [0, total) in units of `unit`. */
static void
wk_split (int64_t total, int64_t unit, int ith, int nth, int64_t * b,
    int64_t * e)
{
  int64_t units = (total + unit - 1) / unit;
  int64_t per = units / nth, extra = units % nth;
  int64_t ub = ith * per + (ith < extra ? ith : extra);
  int64_t ue = ub + per + (ith < extra ? 1 : 0);

  *b = ub * unit < total ? ub * unit : total;
  *e = ue * unit < total ? ue * unit : total;
}

/* The outputs of wk_linear_ex are split in pieces of this many: no
 * kernel's result depends on where pieces of it start (tests). */
#define WK_LINEAR_UNIT 32

/* Tasks per thread: threads claim tasks one at a time, so several per
 * thread balance the load when a thread is slow (a shared machine). */
#define WK_TASKS_PER_THREAD 4
/* Products with few rows of X smaller than this (multiply-adds) run on the
 * caller alone: waking a worker costs microseconds, more on a busy
 * machine, and the decoder's 384 x 384 products take about 5 us. */
#define WK_GEMV_PARALLEL_MACS (1 << 20)
/* Other work below this runs on the caller alone. */
#define WK_PARALLEL_MACS (1 << 16)

static int
wk_n_tasks (wk_pool * pool, int64_t units)
{
  int64_t t = (int64_t) wk_pool_size (pool) * WK_TASKS_PER_THREAD;
  if (t > units)
    t = units;
  return t < 1 ? 1 : (int) t;
}

/* ---- wk_linear ---- */

typedef struct
{
  const wk_kernel_set *ks;
  const wk_tensor *W;
  const float *bias;
  const float *X;
  int64_t n, ldx;
  float *Y;
  int64_t ldy;
  unsigned flags;
  int act_q8;
  int split_rows;               /* split X's rows rather than W's */
  int64_t unit;
  /* integer products (linear_q) when q != NULL: X quantized, see
   * wk_linear_work */
  const int8_t *q;
  const float *qd;
  const int32_t *qc;
} wk_linear_job;

static void
wk_linear_worker (void *data, int ith, int nth)
{
  const wk_linear_job *job = data;
  int64_t b, e;

  if (job->q) {
    const int64_t k = job->W->ne[0], nb = k / WK_QK;
    if (job->split_rows) {
      wk_split (job->n, job->unit, ith, nth, &b, &e);
      if (b < e)
        job->ks->linear_q (job->W, job->bias, job->q + b * k, job->qd + b * nb,
            job->qc + b * nb, e - b, job->Y + b * job->ldy, job->ldy, 0,
            job->W->ne[1], job->flags);
    } else {
      wk_split (job->W->ne[1], job->unit, ith, nth, &b, &e);
      if (b < e)
        job->ks->linear_q (job->W, job->bias, job->q, job->qd, job->qc,
            job->n, job->Y, job->ldy, b, e, job->flags);
    }
    return;
  }
  if (job->split_rows) {
    wk_split (job->n, job->unit, ith, nth, &b, &e);
    if (b < e)
      job->ks->linear (job->W, job->bias, job->X + b * job->ldx, e - b,
          job->ldx, job->Y + b * job->ldy, job->ldy, 0, job->W->ne[1],
          job->flags, job->act_q8);
  } else {
    wk_split (job->W->ne[1], job->unit, ith, nth, &b, &e);
    if (b < e)
      job->ks->linear (job->W, job->bias, job->X, job->n, job->ldx, job->Y,
          job->ldy, b, e, job->flags, job->act_q8);
  }
}

/* ---- quantized activations (wk_linear_work) ---- */

/* The parts of a work buffer for n rows of depth k: q [n][k], then d and
 * c [n][k / 32] each, 64-byte aligned. */
static size_t
wk_linear_work_q_bytes (int64_t n, int64_t k)
{
  return ((size_t) n * (size_t) k + 63) & ~(size_t) 63;
}

/* What a work buffer's quantized rows were made from (its first 64
 * bytes, after the alignment): valid only until the next call without
 * WK_LINEAR_REUSE_X. */
typedef struct
{
  const float *X;
  int64_t n, ldx, k;
  int32_t off;
  int valid;
} wk_work_head;

size_t
wk_linear_work_size (int64_t n, int64_t k)
{
  if (n <= 0 || k <= 0)
    return 0;
  /* + 64 to align the start, + 64 for the head */
  return wk_linear_work_q_bytes (n, k) + 2 * (size_t) n *(size_t) (k /
      WK_QK) * sizeof (float) + 128;
}

typedef struct
{
  const wk_kernel_set *ks;
  const float *X;
  int64_t n, ldx, k;
  int32_t off;                  /* -128 (q8_0) or -8 (q4_0) */
  int8_t *q;
  float *d;
  int32_t *c;
} wk_quantize_job;

static void
wk_quantize_worker (void *data, int ith, int nth)
{
  const wk_quantize_job *job = data;
  const int64_t nb = job->k / WK_QK;
  int64_t b, e, i, blk;

  wk_split (job->n, 16, ith, nth, &b, &e);
  for (i = b; i < e; i++) {
    int8_t *q = job->q + i * job->k;
    int32_t *c = job->c + i * nb;
    job->ks->quantize_act (job->X + i * job->ldx, job->k, q, job->d + i * nb);
    for (blk = 0; blk < nb; blk++)
      c[blk] = job->off * wk_block_sum_i8 (q + blk * WK_QK);
  }
}

static int
wk_linear_work_enabled (const wk_kernel_set * ks, wk_type type, unsigned flags)
{
  int mode = wk_kernels_int8 ();

  if (!ks->linear_q || (type != WK_TYPE_Q8_0 && type != WK_TYPE_Q4_0))
    return 0;
  return mode == WK_INT8_ALL
      || (mode != WK_INT8_OFF && (flags & WK_LINEAR_INT8))
      || (mode == WK_INT8_AUTO && type == WK_TYPE_Q8_0 && ks->linear_q_default);
}

int
wk_linear_work_used (wk_type type, unsigned flags)
{
  return wk_linear_work_enabled (wk_kernels_get (), type, flags);
}

int
wk_linear_work_takes_q (const wk_kernel_set * ks, const wk_tensor * W,
    int64_t n, unsigned flags)
{
  return wk_linear_work_enabled (ks, W->type, flags)
      && n >= WK_LINEAR_GEMM_ROWS && n >= ks->linear_q_min_rows
      && W->ne[0] % WK_QK == 0 && W->ne[0] <= WK_LINEAR_QMAX_K;
}

void
wk_linear_ex (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t n, int64_t ldx, float *Y, int64_t ldy,
    unsigned flags)
{
  wk_linear_work (pool, W, bias, X, n, ldx, Y, ldy, flags, NULL);
}

void
wk_linear_work (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t n, int64_t ldx, float *Y, int64_t ldy,
    unsigned flags, void *work)
{
  wk_linear_job job;
  int nth = wk_pool_size (pool);
  int64_t m;

  if (!W || n <= 0 || W->ne[0] <= 0 || W->ne[1] <= 0
      || wk_type_row_bytes (W->type, W->ne[0]) == 0)
    return;
  m = W->ne[1];
  job.ks = wk_kernels_get ();
  job.q = NULL;
  job.qd = NULL;
  job.qc = NULL;
  if (work) {
    wk_work_head *head = (wk_work_head *) (((uintptr_t) work + 63) &
        ~(uintptr_t) 63);
    const int64_t k = W->ne[0];
    unsigned char *base = (unsigned char *) head + 64;
    wk_quantize_job qj;
    int reuse = (flags & WK_LINEAR_REUSE_X) && head->valid;

    if (!(flags & WK_LINEAR_REUSE_X))
      head->valid = 0;
    if (wk_linear_work_takes_q (job.ks, W, n, flags)) {
      qj.ks = job.ks;
      qj.X = X;
      qj.n = n;
      qj.ldx = ldx;
      qj.k = k;
      qj.off = W->type == WK_TYPE_Q8_0 ? -128 : -8;
      qj.q = (int8_t *) base;
      qj.d = (float *) (base + wk_linear_work_q_bytes (n, k));
      qj.c = (int32_t *) (qj.d + n * (k / WK_QK));
      /* the rows the previous call quantized, when they are these */
      if (!(reuse && head->X == X && head->n == n && head->ldx == ldx
              && head->k == k && head->off == qj.off)) {
        if (nth == 1 || n * k < WK_PARALLEL_MACS)
          wk_quantize_worker (&qj, 0, 1);
        else
          wk_pool_run_tasks (pool, wk_quantize_worker, &qj,
              wk_n_tasks (pool, (n + 15) / 16));
        head->X = X;
        head->n = n;
        head->ldx = ldx;
        head->k = k;
        head->off = qj.off;
        head->valid = 1;
      }
      job.q = qj.q;
      job.qd = qj.d;
      job.qc = qj.c;
    }
  }
  job.W = W;
  job.bias = bias;
  job.X = X;
  job.n = n;
  job.ldx = ldx;
  job.Y = Y;
  job.ldy = ldy;
  job.flags = flags & ~(unsigned) (WK_LINEAR_INT8 | WK_LINEAR_REUSE_X);
  job.act_q8 = wk_linear_act_q8 (W, n);
  /* whole weight panels per piece (16 outputs for AVX2, 32 for AVX-512);
   * the streamed kernels' tiles (8 rows for AVX2, 16 for AVX-512 VNNI,
   * 16 outputs for the GEMV kernels) start at every piece, so pieces on
   * 32-output boundaries hold whole tiles and keep their results those of
   * one piece, whatever the thread count */
  job.unit = WK_LINEAR_UNIT;
  job.split_rows = 0;
  if (m < job.unit * nth * 2 && n >= 4 * nth * WK_LINEAR_GEMM_ROWS) {
    job.split_rows = 1;
    job.unit = WK_LINEAR_GEMM_ROWS;
  }
  /* small products are not worth waking the workers */
  if (nth == 1 || n * m * W->ne[0] < (n < WK_LINEAR_GEMM_ROWS ?
          WK_GEMV_PARALLEL_MACS : WK_PARALLEL_MACS))
    wk_linear_worker (&job, 0, 1);
  else
    wk_pool_run_tasks (pool, wk_linear_worker, &job, wk_n_tasks (pool,
            ((job.split_rows ? n : m) + job.unit - 1) / job.unit));
}

/* ---- wk_linear_batch ---- */

/* Outputs per block: every group passes over one block of weight rows
 * while it is in cache (256 rows of 256 q8_0 values: 70 KB, in L2). */
#define WK_BATCH_BLOCK 256
/* Rows of several groups in one kernel call, so that each weight read
 * serves them all (the few-row kernels' passes: 7 with AVX-512 VNNI, 4
 * with AVX2), for the types whose few-row kernels give every row the bits
 * of the one-row product (test_few_rows_match_one_row: f16, q8_0, q4_0),
 * at depths up to WK_BATCH_CHUNK_K (the rows are gathered into a copy:
 * the decoder's are at most 4 d). */
#define WK_BATCH_CHUNK_ROWS (WK_LINEAR_GEMM_ROWS - 1)
#define WK_BATCH_CHUNK_K 4096
/* Gathered rows that fit here stay on the caller's stack (2 streams of 3
 * beams through the decoder's 4 d = 1536): a batch of live steps
 * allocates nothing; more go to the heap. */
#define WK_BATCH_STACK_FLOATS (WK_BATCH_CHUNK_ROWS * 1536)
/* Most groups chunked (the scheduler's batches have up to 32) */
#define WK_BATCH_MAX_GROUPS 64

typedef struct
{
  const wk_kernel_set *ks;
  const wk_tensor *W;
  const float *bias;
  const wk_rows *groups;
  int n_groups;
  int64_t ldx, ldy;
  unsigned flags;
  /* chunks of whole groups (chunk c: groups chunk[c] .. chunk[c+1]-1,
   * chunk_rows[c] rows in all) whose rows are copied one after the other
   * into xs, or n_chunks = 0: each group alone */
  int n_chunks;
  int chunk[WK_BATCH_MAX_GROUPS + 1];
  int chunk_rows[WK_BATCH_MAX_GROUPS];
  const float *xs;
} wk_batch_job;

/* One chunk's rows through outputs jb .. je-1: the rows gathered in xs
 * (row stride k) into a block of Y of its own, then to each group's Y. */
static void
wk_batch_chunk (const wk_batch_job * job, int c, const float *x, int64_t jb,
    int64_t je)
{
  float yb[WK_BATCH_CHUNK_ROWS * WK_BATCH_BLOCK];
  const size_t rb = wk_type_row_bytes (job->W->type, job->W->ne[0]);
  const size_t bytes = (size_t) (je - jb) * sizeof (float);
  wk_tensor sub = *job->W;
  int g, i, r = 0;

  /* outputs jb .. je-1 as a tensor of their own, so that the block's Y
   * starts at 0: no kernel's result depends on where its outputs start */
  sub.data = (const unsigned char *) job->W->data + (size_t) jb *rb;
  sub.ne[1] = je - jb;
  sub.nbytes = (size_t) (je - jb) * rb;
  if (job->flags & WK_LINEAR_ADD)
    for (g = job->chunk[c]; g < job->chunk[c + 1]; g++)
      for (i = 0; i < job->groups[g].n; i++, r++)
        memcpy (yb + r * WK_BATCH_BLOCK, job->groups[g].Y + i * job->ldy + jb,
            bytes);
  job->ks->linear (&sub, job->bias ? job->bias + jb : NULL, x,
      job->chunk_rows[c], job->W->ne[0], yb, WK_BATCH_BLOCK, 0, je - jb,
      job->flags, wk_linear_act_q8 (job->W, job->chunk_rows[c]));
  r = 0;
  for (g = job->chunk[c]; g < job->chunk[c + 1]; g++)
    for (i = 0; i < job->groups[g].n; i++, r++)
      memcpy (job->groups[g].Y + i * job->ldy + jb, yb + r * WK_BATCH_BLOCK,
          bytes);
}

static void
wk_batch_worker (void *data, int ith, int nth)
{
  const wk_batch_job *job = data;
  const int64_t k = job->W->ne[0];
  int64_t b, e, jb;
  int g, c;

  wk_split (job->W->ne[1], WK_LINEAR_UNIT, ith, nth, &b, &e);
  for (jb = b; jb < e; jb += WK_BATCH_BLOCK) {
    int64_t je = jb + WK_BATCH_BLOCK < e ? jb + WK_BATCH_BLOCK : e;
    const float *x = job->xs;
    for (c = 0; c < job->n_chunks; c++) {
      wk_batch_chunk (job, c, x, jb, je);
      x += (size_t) job->chunk_rows[c] * (size_t) k;
    }
    if (job->n_chunks)
      continue;
    for (g = 0; g < job->n_groups; g++) {
      const wk_rows *r = &job->groups[g];
      if (r->n > 0)
        job->ks->linear (job->W, job->bias, r->X, r->n, job->ldx, r->Y,
            job->ldy, jb, je, job->flags, wk_linear_act_q8 (job->W, r->n));
    }
  }
}

void
wk_linear_batch (wk_pool * pool, const wk_tensor * W, const float *bias,
    const wk_rows * groups, int n_groups, int64_t ldx, int64_t ldy,
    unsigned flags)
{
  wk_batch_job job;
  float on_stack[WK_BATCH_STACK_FLOATS];
  float *xs = NULL, *heap = NULL;
  int64_t m, k, rows = 0;
  int g, i, n_nonempty = 0, shared;

  if (!W || n_groups <= 0 || W->ne[0] <= 0 || W->ne[1] <= 0
      || wk_type_row_bytes (W->type, W->ne[0]) == 0)
    return;
  k = W->ne[0];
  for (g = 0; g < n_groups; g++)
    if (groups[g].n > 0) {
      rows += groups[g].n;
      n_nonempty++;
    }
  m = W->ne[1];
  job.ks = wk_kernels_get ();
  job.W = W;
  job.bias = bias;
  job.groups = groups;
  job.n_groups = n_groups;
  job.ldx = ldx;
  job.ldy = ldy;
  job.flags = flags & ~(unsigned) (WK_LINEAR_INT8 | WK_LINEAR_REUSE_X);
  job.n_chunks = 0;
  job.xs = NULL;

  /* groups that share their weight reads: the nonempty ones, chunked */
  shared = (W->type == WK_TYPE_F16 || W->type == WK_TYPE_Q8_0
      || W->type == WK_TYPE_Q4_0) && k <= WK_BATCH_CHUNK_K
      && n_groups <= WK_BATCH_MAX_GROUPS;
  for (g = 0; shared && g < n_groups; g++)
    if (groups[g].n >= WK_BATCH_CHUNK_ROWS + 1)
      shared = 0;
  if (shared && n_nonempty > 1)
    xs = rows * k <= WK_BATCH_STACK_FLOATS ? on_stack :
        (heap = malloc ((size_t) rows * (size_t) k * sizeof (float)));
  if (xs) {
    /* empty groups (n <= 0) fall inside chunks and add no rows */
    float *x = xs;
    for (g = 0; g < n_groups; g++) {
      if (groups[g].n <= 0)
        continue;
      if (job.n_chunks == 0 || job.chunk_rows[job.n_chunks - 1]
          + groups[g].n > WK_BATCH_CHUNK_ROWS) {
        job.chunk[job.n_chunks] = g;
        job.chunk_rows[job.n_chunks++] = 0;
      }
      job.chunk_rows[job.n_chunks - 1] += groups[g].n;
      for (i = 0; i < groups[g].n; i++, x += k)
        memcpy (x, groups[g].X + i * ldx, (size_t) k * sizeof (float));
    }
    job.chunk[job.n_chunks] = n_groups;
    job.xs = xs;
  }
  if (wk_pool_size (pool) == 1 || rows * m * W->ne[0] < WK_GEMV_PARALLEL_MACS)
    wk_batch_worker (&job, 0, 1);
  else
    wk_pool_run_tasks (pool, wk_batch_worker, &job, wk_n_tasks (pool,
            (m + WK_LINEAR_UNIT - 1) / WK_LINEAR_UNIT));
  free (heap);
}

void
wk_linear (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t n, int64_t ldx, float *Y, int64_t ldy)
{
  wk_linear_ex (pool, W, bias, X, n, ldx, Y, ldy, 0);
}

/* ---- rows ---- */

void
wk_tensor_get_row (const wk_tensor * W, int64_t r, float *out)
{
  const int64_t k = W->ne[0];
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  const unsigned char *row;
  const wk_kernel_set *ks;
  int64_t b;

  if (row_bytes == 0 || r < 0 || r >= W->ne[1])
    return;
  row = (const unsigned char *) W->data + ((size_t) r) * row_bytes;
  /* Normally done already by the first wk_kernels_get (); cheap when so. */
  pthread_once (&wk_kernels_orc_once, wk_kernels_orc_warm);
  switch (W->type) {
    case WK_TYPE_Q8_0:
      for (b = 0; b < k / WK_QK; b++) {
        const wk_block_q8_0 *blk = (const wk_block_q8_0 *) row + b;
        wk_orc_dequant_q8_0 (out + b * WK_QK, blk->qs,
            wk_fp16_to_fp32 (blk->d), WK_QK);
      }
      break;
    case WK_TYPE_Q4_0:
      for (b = 0; b < k / WK_QK; b++) {
        const wk_block_q4_0 *blk = (const wk_block_q4_0 *) row + b;
        wk_orc_dequant_q4_0 (out + b * WK_QK, out + b * WK_QK + WK_QK / 2,
            blk->qs, wk_fp16_to_fp32 (blk->d), WK_QK / 2);
      }
      break;
    case WK_TYPE_F16:
      if ((ks = wk_kernels_get ())->f16_to_f32)
        ks->f16_to_f32 ((const uint16_t *) row, out, k);
      else
        wk_row_to_f32 (W->type, row, out, k);
      break;
    default:
      wk_row_to_f32 (W->type, row, out, k);
      break;
  }
}

/* ---- f32 products ---- */

typedef struct
{
  const wk_kernel_set *ks;
  int b_trans;
  int64_t n, m, k;
  float alpha;
  const float *A, *B;
  int64_t lda, ldb;
  float *C;
  int64_t ldc;
  int split_rows;
} wk_gemm_job;

static void
wk_gemm_worker (void *data, int ith, int nth)
{
  const wk_gemm_job *job = data;
  int64_t b, e;

  if (job->split_rows) {
    wk_split (job->n, 8, ith, nth, &b, &e);
    if (b < e)
      job->ks->gemm_f32 (job->b_trans, b, e, 0, job->m, job->k, job->alpha,
          job->A, job->lda, job->B, job->ldb, job->C, job->ldc);
  } else {
    wk_split (job->m, 32, ith, nth, &b, &e);
    if (b < e)
      job->ks->gemm_f32 (job->b_trans, 0, job->n, b, e, job->k, job->alpha,
          job->A, job->lda, job->B, job->ldb, job->C, job->ldc);
  }
}

void
wk_gemm_f32 (wk_pool * pool, int b_trans, int64_t n, int64_t m, int64_t k,
    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
    float *C, int64_t ldc)
{
  wk_gemm_job job = { wk_kernels_get (), b_trans, n, m, k, alpha, A, B,
    lda, ldb, C, ldc, 0
  };
  int nth = wk_pool_size (pool);

  if (n <= 0 || m <= 0)
    return;
  job.split_rows = n >= 8 * nth;
  if (nth == 1 || n * m * (k > 0 ? k : 1) < WK_PARALLEL_MACS)
    wk_gemm_worker (&job, 0, 1);
  else
    wk_pool_run_tasks (pool, wk_gemm_worker, &job, wk_n_tasks (pool,
            job.split_rows ? (n + 7) / 8 : (m + 31) / 32));
}

/* ---- attention ---- */

/* Queries per work item. */
#define WK_ATTN_QBLOCK 32

typedef struct
{
  const wk_kernel_set *ks;
  int n_head;
  int64_t d_head, n_q, n_kv;
  const float *Q;
  const void *K, *V;            /* f32, f16 when kv16 1, f32 halves: 2 */
  int64_t ldq, ldk, ldv;
  float scale;
  int causal;
  float *O;
  int64_t ldo;
  int64_t n_qblocks;
  int kv16;
  float *work;                  /* per-task copies of a head's K and V */
  size_t work_floats;
} wk_attention_job;

/* From this many queries on, wk_attention_work copies the f32 keys and
 * values of a head into rows of their own. */
#define WK_ATTN_PACK_MIN_Q 64

/* kv16 2 (halves held in f32, f16kv_exact): query rows q0 .. q1-1 of the
 * head at column off in attention_head_f16kv's order, which is the f32
 * entry's for one query at a time */
static void
attention_halves_rows (const wk_attention_job * job, int64_t off, int64_t q0,
    int64_t q1)
{
  int64_t i;

  for (i = q0; i < q1; i++)
    job->ks->attention_head (job->d_head, i, i + 1, job->n_q, job->n_kv,
        job->Q + off, job->ldq, (const float *) job->K + off, job->ldk,
        (const float *) job->V + off, job->ldv, job->scale, job->causal,
        job->O + off, job->ldo);
}

static void
wk_attention_worker (void *data, int ith, int nth)
{
  const wk_attention_job *job = data;
  const int64_t dh = job->d_head, nkv = job->n_kv;
  const size_t slot = (size_t) (2 * nkv * dh);
  float *kv = NULL;             /* this task's copy of a head: K, then V */
  int64_t b, e, it, packed = -1;

  wk_split (job->n_head * job->n_qblocks, 1, ith, nth, &b, &e);
  if (job->work && (size_t) (ith + 1) * slot <= job->work_floats)
    kv = job->work + (size_t) ith *slot;
  for (it = b; it < e; it++) {
    int64_t h = it / job->n_qblocks;
    int64_t q0 = (it % job->n_qblocks) * WK_ATTN_QBLOCK;
    int64_t q1 = q0 + WK_ATTN_QBLOCK < job->n_q ? q0 + WK_ATTN_QBLOCK :
        job->n_q;
    int64_t off = h * dh;
    if (job->kv16 == 2) {
      attention_halves_rows (job, off, q0, q1);
    } else if (job->kv16) {
      job->ks->attention_head_f16kv (dh, q0, q1, job->n_q, nkv,
          job->Q + off, job->ldq, (const uint16_t *) job->K + off,
          job->ldk, (const uint16_t *) job->V + off, job->ldv, job->scale,
          job->causal, job->O + off, job->ldo);
    } else {
      const float *K = (const float *) job->K + off;
      const float *V = (const float *) job->V + off;
      int64_t ldk = job->ldk, ldv = job->ldv, t;
      if (kv) {
        if (packed != h) {
          for (t = 0; t < nkv; t++) {
            memcpy (kv + t * dh, K + t * ldk, (size_t) dh * sizeof (float));
            memcpy (kv + (nkv + t) * dh, V + t * ldv,
                (size_t) dh * sizeof (float));
          }
          packed = h;
        }
        K = kv;
        V = kv + nkv * dh;
        ldk = ldv = dh;
      }
      job->ks->attention_head (dh, q0, q1, job->n_q, nkv, job->Q + off,
          job->ldq, K, ldk, V, ldv, job->scale, job->causal, job->O + off,
          job->ldo);
    }
  }
}

/* Few queries (decoder steps, beams) with a kernel for several heads at
 * once: pieces are runs of heads, as few as the threads allow, so that
 * each reads the keys' rows as wide as it can. */
#define WK_ATTN_FEW_QUERIES 8

static void
wk_attention_heads_worker (void *data, int ith, int nth)
{
  const wk_attention_job *job = data;
  int64_t b, e, h;

  wk_split (job->n_head, 1, ith, nth, &b, &e);
  if (b >= e || job->ks->attention_heads ((int) b, (int) e, job->d_head, 0,
          job->n_q, job->n_q, job->n_kv, job->Q, job->ldq, job->K, job->ldk,
          job->V, job->ldv, job->scale, job->causal, job->O, job->ldo,
          job->kv16))
    return;
  /* a case the set's several-head kernel does not take: head by head */
  for (h = b; h < e; h++) {
    const int64_t off = h * job->d_head;
    if (job->kv16 == 2)
      attention_halves_rows (job, off, 0, job->n_q);
    else if (job->kv16)
      job->ks->attention_head_f16kv (job->d_head, 0, job->n_q, job->n_q,
          job->n_kv, job->Q + off, job->ldq, (const uint16_t *) job->K + off,
          job->ldk, (const uint16_t *) job->V + off, job->ldv, job->scale,
          job->causal, job->O + off, job->ldo);
    else
      job->ks->attention_head (job->d_head, 0, job->n_q, job->n_q, job->n_kv,
          job->Q + off, job->ldq, (const float *) job->K + off, job->ldk,
          (const float *) job->V + off, job->ldv, job->scale, job->causal,
          job->O + off, job->ldo);
  }
}

static void
wk_attention_any (wk_pool * pool, int n_head, int64_t d_head, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const void *K, int64_t ldk,
    const void *V, int64_t ldv, float scale, int causal, float *O,
    int64_t ldo, int kv16, float *work, size_t work_floats)
{
  wk_attention_job job = { wk_kernels_get (), n_head, d_head, n_q, n_kv,
    Q, K, V, ldq, ldk, ldv, scale, causal, O, ldo,
    (n_q + WK_ATTN_QBLOCK - 1) / WK_ATTN_QBLOCK, kv16, NULL, 0
  };
  int nth = wk_pool_size (pool);

  if (n_head <= 0 || d_head <= 0 || d_head > 256 || n_q <= 0 || n_kv <= 0)
    return;
  if (job.ks->attention_heads && n_q < WK_ATTN_FEW_QUERIES) {
    if (nth == 1 || n_head * n_q * n_kv * d_head < WK_PARALLEL_MACS)
      wk_attention_heads_worker (&job, 0, 1);
    else
      wk_pool_run_tasks (pool, wk_attention_heads_worker, &job,
          nth < n_head ? nth : n_head);
    return;
  }
  if (work && !kv16 && n_q >= WK_ATTN_PACK_MIN_Q
      && (ldk != d_head || ldv != d_head)) {
    job.work = work;
    job.work_floats = work_floats;
  }
  if (nth == 1 || n_head * n_q * n_kv * d_head < WK_PARALLEL_MACS)
    wk_attention_worker (&job, 0, 1);
  else if (job.work)
    /* one task per thread, each with its own copy (and a contiguous run
     * of heads, so it copies few) */
    wk_pool_run (pool, wk_attention_worker, &job);
  else
    wk_pool_run_tasks (pool, wk_attention_worker, &job, wk_n_tasks (pool,
            n_head * job.n_qblocks));
}

void
wk_attention (wk_pool * pool, int n_head, int64_t d_head, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O, int64_t ldo)
{
  wk_attention_any (pool, n_head, d_head, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
      scale, causal, O, ldo, 0, NULL, 0);
}

void
wk_attention_work (wk_pool * pool, int n_head, int64_t d_head, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O,
    int64_t ldo, float *work, size_t work_floats)
{
  wk_attention_any (pool, n_head, d_head, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
      scale, causal, O, ldo, 0, work, work_floats);
}

void
wk_attention_f16kv (wk_pool * pool, int n_head, int64_t d_head,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
    float scale, int causal, float *O, int64_t ldo)
{
  wk_attention_any (pool, n_head, d_head, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
      scale, causal, O, ldo, 1, NULL, 0);
}

void
wk_attention_halves (wk_pool * pool, int n_head, int64_t d_head,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq, const float *K,
    int64_t ldk, const float *V, int64_t ldv, float scale, int causal,
    float *O, int64_t ldo)
{
  wk_attention_any (pool, n_head, d_head, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
      scale, causal, O, ldo, wk_kernels_get ()->f16kv_exact ? 2 : 0, NULL, 0);
}

void
wk_f32_to_f16 (const float *x, uint16_t * y, int64_t n)
{
  if (n > 0)
    wk_kernels_get ()->f32_to_f16 (x, y, n);
}

int
wk_kernels_f16kv_slow (void)
{
  return wk_kernels_get ()->f16kv_slow;
}

void
wk_round_f16 (float *x, int64_t n)
{
  const wk_kernel_set *ks = wk_kernels_get ();
  uint16_t h[256];
  int64_t i, j;

  if (ks->round_f16) {
    if (n > 0)
      ks->round_f16 (x, n);
    return;
  }
  for (i = 0; i < n; i += 256) {
    int64_t m = n - i < 256 ? n - i : 256;
    ks->f32_to_f16 (x + i, h, m);
    for (j = 0; j < m; j++)
      x[i + j] = wk_fp16_to_fp32 (h[j]);
  }
}

/* ---- element-wise ---- */

typedef struct
{
  const wk_kernel_set *ks;
  const float *X;
  int64_t n, d, ldx;
  const float *gamma, *beta;
  float eps;
  float *Y;
  int64_t ldy;
} wk_norm_job;

static void
wk_norm_worker (void *data, int ith, int nth)
{
  const wk_norm_job *job = data;
  int64_t b, e, i;

  wk_split (job->n, 1, ith, nth, &b, &e);
  for (i = b; i < e; i++)
    job->ks->layer_norm_row (job->X + i * job->ldx, job->d, job->gamma,
        job->beta, job->eps, job->Y + i * job->ldy);
}

void
wk_layer_norm (wk_pool * pool, const float *X, int64_t n, int64_t d,
    int64_t ldx, const float *gamma, const float *beta, float eps, float *Y,
    int64_t ldy)
{
  wk_norm_job job = { wk_kernels_get (), X, n, d, ldx, gamma, beta, eps, Y,
    ldy
  };

  if (n <= 0 || d <= 0)
    return;
  if (wk_pool_size (pool) == 1 || n * d < 65536)
    wk_norm_worker (&job, 0, 1);
  else
    wk_pool_run_tasks (pool, wk_norm_worker, &job, wk_n_tasks (pool, n));
}

void
wk_gelu (float *x, int64_t n)
{
  if (n > 0)
    wk_kernels_get ()->gelu (x, n);
}

void
wk_softmax (float *x, int64_t n)
{
  if (n > 0)
    wk_kernels_get ()->softmax (x, n);
}

void
wk_add (float *y, const float *x, int64_t n)
{
  if (n > 0)
    wk_kernels_get ()->add (y, x, n);
}

/* Each value above the best so far moves it (a NaN never is one, and a
 * NaN at 0 stays the best): one pass over x, as the scalar loop. */
int64_t
wk_argmax (const float *x, int64_t n)
{
  int64_t best, i;

  if (n <= 0)
    return -1;
  best = 0;
  while ((i = best + 1 + wk_find_gt (x + best + 1, n - best - 1, x[best])) < n)
    best = i;
  return best;
}

int64_t
wk_find_gt (const float *x, int64_t n, float t)
{
  const wk_kernel_set *ks = wk_kernels_get ();
  int64_t i;

  if (n <= 0)
    return 0;
  if (ks->find_gt)
    return ks->find_gt (x, n, t);
  for (i = 0; i < n; i++)
    if (x[i] > t)
      break;
  return i;
}

int
wk_top_k (const float *x, int64_t n, int k, int64_t * idx)
{
  float v[WK_TOP_K_MAX], t = -INFINITY;
  int64_t i = 0;
  int m = 0, p;

  if (k > WK_TOP_K_MAX)
    k = WK_TOP_K_MAX;
  if (k <= 0 || n <= 0)
    return 0;
  /* only a value above the k-th kept so far can enter (an equal one comes
   * later, so it loses the tie) */
  while ((i += wk_find_gt (x + i, n - i, t)) < n) {
    if (m < k)
      m++;
    for (p = m - 1; p > 0 && v[p - 1] < x[i]; p--) {
      v[p] = v[p - 1];
      idx[p] = idx[p - 1];
    }
    v[p] = x[i];
    idx[p] = i;
    if (m == k)
      t = v[k - 1];
    i++;
  }
  return m;
}

/* ---- convolution stems ---- */

int64_t
wk_conv1d_k3_work_size (int64_t c_in, int64_t n_in, int stride)
{
  int64_t n_out;

  if (c_in <= 0 || n_in <= 0 || stride <= 0)
    return 0;
  n_out = (n_in - 1) / stride + 1;
  return n_out * c_in * 3;
}

typedef struct
{
  const float *X;
  int64_t c_in, n_in, ldx;
  int time_major, stride;
  int64_t n_out;
  float *work;
} wk_im2col_job;

/* work[t][c * 3 + u] = x (c, stride * t + u - 1) */
static void
wk_im2col_worker (void *data, int ith, int nth)
{
  const wk_im2col_job *job = data;
  const int64_t kk = job->c_in * 3;
  int64_t b, e, t, c;
  int u;

  wk_split (job->n_out, 16, ith, nth, &b, &e);
  for (t = b; t < e; t++) {
    float *row = job->work + t * kk;
    for (u = 0; u < 3; u++) {
      int64_t s = job->stride * t + u - 1;
      if (s < 0 || s >= job->n_in) {
        for (c = 0; c < job->c_in; c++)
          row[c * 3 + u] = 0.0f;
      } else if (job->time_major) {
        const float *x = job->X + s * job->ldx;
        for (c = 0; c < job->c_in; c++)
          row[c * 3 + u] = x[c];
      } else {
        for (c = 0; c < job->c_in; c++)
          row[c * 3 + u] = job->X[c * job->ldx + s];
      }
    }
  }
}

void
wk_conv1d_k3 (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t c_in, int64_t n_in, int64_t ldx,
    int x_time_major, int stride, float *Y, int64_t ldy, unsigned flags,
    float *work)
{
  wk_im2col_job job;
  wk_tensor W2;

  if (!W || c_in <= 0 || n_in <= 0 || stride <= 0 || W->ne[0] != 3
      || W->ne[1] != c_in)
    return;
  job.X = X;
  job.c_in = c_in;
  job.n_in = n_in;
  job.ldx = ldx;
  job.time_major = x_time_major;
  job.stride = stride;
  job.n_out = (n_in - 1) / stride + 1;
  job.work = work;
  wk_pool_run_tasks (pool, wk_im2col_worker, &job, wk_n_tasks (pool,
          (job.n_out + 15) / 16));

  /* the weight viewed as a matrix {3 * c_in, c_out} */
  W2 = *W;
  W2.n_dims = 2;
  W2.ne[0] = 3 * c_in;
  W2.ne[1] = W->ne[2];
  W2.ne[2] = W2.ne[3] = 1;
  wk_linear_ex (pool, &W2, bias, work, job.n_out, 3 * c_in, Y, ldy, flags);
}
