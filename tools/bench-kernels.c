/* wk-bench-kernels: times the kernels on whisper-tiny-sized shapes (d =
 * 384) for each weight type, kernel set and thread count, and prints
 * medians and GFLOP/s; then whole decoder steps of tiny, base and small
 * dims (every weight distinct, so read from memory) with the bytes a step
 * reads, its effective GB/s and that as a share of the machine's measured
 * read bandwidth (a step that reads each byte once is bound by it); then
 * the products of one encoder layer of tiny, base and small ("encq tiny"
 * ...) at 1500 down to 8 frames, q8_0 and q4_0, through the f32 weight
 * panels and the integer products side by side (sets that have them).
 * Each f32-path product of 1000 rows or more is also given as a share of
 * the core's f32 FMA ceiling for its set's vector width (measured at the
 * start: independent FMA chains in registers, no memory), the most f32
 * arithmetic can do. Figures only, no assertions.
 *
 *   wk-bench-kernels [-t max_threads] [-q] [-c] [-C] [-s shape-substring]...
 *
 * Every SIMD set built in and usable here is timed (WK_KERNELS=name: only
 * that one). -q skips the (slow) reference kernels; -c reports the
 * process's CPU time instead of wall time (steadier on a busy machine, but
 * it counts every thread's time and no waiting, so use it with one
 * thread). -C times each decoder step from a cold cache (the bandwidth
 * buffer read through first), for machines whose last-level cache holds
 * a step's weights between steps. Built with OpenBLAS (meson finds it when
 * libopenblas-dev is installed) it also times cblas_sgemm on the encoder
 * shapes with the same threads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels-impl.h"
#include "pool.h"
#include "wk-weight.h"

#ifdef WK_BENCH_HAVE_BLAS
#include <cblas.h>
#endif

static int use_cpu_time;

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (use_cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC,
      &ts);
  return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;

static float
rnd (void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float) ((double) (rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* ---- the f32 FMA ceiling of one core, per vector width (x86, wasm) ---- */

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

#define FMA_CHAINS 12
#define FMA_ITERS 20000000L

/* Returns the GFLOP/s of FMA_CHAINS independent chains of LANES-wide
 * FMAs: VT, SET1, FMADD, STOREU are the ISA's vector type and intrinsics. */
#define FMA_CEILING_BODY(LANES, VT, SET1, FMADD, STOREU) \
  do { \
    VT a[FMA_CHAINS], b = SET1 (0.999f); \
    const VT c = SET1 (0.001f); \
    double t0, t; \
    float sink = 0.0f, v[LANES]; \
    long it; \
    int i; \
    for (i = 0; i < FMA_CHAINS; i++) \
      a[i] = SET1 ((float) i); \
    t0 = now_s (); \
    for (it = 0; it < FMA_ITERS; it++) { \
      /* unrolled, so that the chains stay in registers */ \
      _Pragma ("GCC unroll 12") for (i = 0; i < FMA_CHAINS; i++) \
        a[i] = FMADD (a[i], b, c); \
    } \
    t = now_s () - t0; \
    for (i = 0; i < FMA_CHAINS; i++) { \
      STOREU (v, a[i]); \
      sink += v[0]; \
    } \
    /* keeps the loop; never true for these inputs */ \
    if (sink == 12345.0f) \
      printf ("#\\n"); \
    return 2.0 * LANES * FMA_CHAINS * (double) FMA_ITERS / t * 1e-9; \
  } while (0)

#if defined(__x86_64__)
static __attribute__((target ("avx2,fma")))
     double fma_ceiling_avx2 (void)
{
  FMA_CEILING_BODY (8, __m256, _mm256_set1_ps, _mm256_fmadd_ps,
      _mm256_storeu_ps);
}

static __attribute__((target ("avx512f")))
     double fma_ceiling_avx512 (void)
{
  FMA_CEILING_BODY (16, __m512, _mm512_set1_ps, _mm512_fmadd_ps,
      _mm512_storeu_ps);
}
#elif defined(__wasm_simd128__)
#define MADD_CHAINS 6

/* SIMD128 has no fused multiply-add (clang 14): MADD_CHAINS independent
 * accumulators each adding a product per step, the products off the
 * chains, as in the wasm kernels' tiles (the empty asm keeps w from being
 * folded into a constant; on a float, as clang 19 crashes on a v128_t
 * operand). Out of line and called three times: V8 runs a
 * function's first calls in its baseline compiler and later ones in its
 * optimizing one, which is what the kernels run in. */
static __attribute__((noinline))
     double fma_ceiling_wasm (void)
{
  v128_t acc[MADD_CHAINS], x[MADD_CHAINS], w;
  float ws = 0.999f;
  double t0, t;
  float sink = 0.0f;
  long it;
  int i;

  for (i = 0; i < MADD_CHAINS; i++) {
    acc[i] = wasm_f32x4_splat ((float) i);
    x[i] = wasm_f32x4_splat (0.001f * (float) (i + 1));
  }
  t0 = now_s ();
  for (it = 0; it < FMA_ITERS; it++) {
    __asm__ volatile ("":"+r" (ws));
    w = wasm_f32x4_splat (ws);
    _Pragma ("GCC unroll 6") for (i = 0; i < MADD_CHAINS; i++)
      acc[i] = wasm_f32x4_add (acc[i], wasm_f32x4_mul (x[i], w));
  }
  t = now_s () - t0;
  for (i = 0; i < MADD_CHAINS; i++)
    sink += wasm_f32x4_extract_lane (acc[i], 0);
  if (sink == 12345.0f)
    printf ("#\n");
  return 2.0 * 4 * MADD_CHAINS * (double) FMA_ITERS / t * 1e-9;
}
#endif
/* GFLOP/s of one core's FMA for the set's vector width (0: unknown), the
 * best of three measurements */
static double
fma_ceiling (const wk_kernel_set * set)
{
  double best = 0.0;
#if defined(__x86_64__)
  int i, wide = strcmp (set->name, "avx512") == 0;

  if (strcmp (set->name, "ref") == 0 || (wide
          && !__builtin_cpu_supports ("avx512f"))
      || !__builtin_cpu_supports ("fma"))
    return 0.0;
  for (i = 0; i < 3; i++) {
    double g = wide ? fma_ceiling_avx512 () : fma_ceiling_avx2 ();
    best = g > best ? g : best;
  }
#elif defined(__wasm_simd128__)
  int i;

  if (strcmp (set->name, "wasm") != 0)
    return 0.0;
  for (i = 0; i < 3; i++) {
    double g = fma_ceiling_wasm ();
    best = g > best ? g : best;
  }
#else
  (void) set;
#endif
  return best;
}

typedef void (*bench_fn) (void *ctx);

/* Median wall time of fn over runs sized to about budget_s in all (at
 * least 3, at most 101); each run calls fn enough times to take about a
 * millisecond (the time per call is reported), so that short kernels are
 * not timed at the clock's resolution or by a single interruption. */
static double
median_time (bench_fn fn, void *ctx, double budget_s)
{
  double t[101], t0 = now_s (), one;
  int reps, i, inner = 1, u;

  fn (ctx);                     /* warm up (and size the runs) */
  one = now_s () - t0;
  if (one > 0 && one < 1e-3)
    inner = (int) (1e-3 / one) + 1;
  reps = one > 0 ? (int) (budget_s / (one * inner)) : 101;
  if (reps < 3)
    reps = 3;
  if (reps > 101)
    reps = 101;
  for (i = 0; i < reps; i++) {
    t0 = now_s ();
    for (u = 0; u < inner; u++)
      fn (ctx);
    t[i] = (now_s () - t0) / inner;
  }
  qsort (t, (size_t) reps, sizeof t[0], cmp_double);
  return t[reps / 2];
}

static void
fill_weight_row (float *row, int64_t k, int64_t j, void *user)
{
  int64_t l;

  (void) j;
  (void) user;
  for (l = 0; l < k; l++)
    row[l] = rnd () * 0.1f;
}

static wk_tensor
make_weight (wk_type type, int64_t k, int64_t m)
{
  return wk_weight_make (type, k, m, fill_weight_row, NULL);
}

static float *
rand_buf (int64_t n)
{
  float *p = malloc ((size_t) n * sizeof (float));
  int64_t i;
  for (i = 0; i < n; i++)
    p[i] = rnd ();
  return p;
}

typedef struct
{
  wk_pool *pool;
  const wk_tensor *W;
  const float *bias;
  const float *X;
  float *Y;
  int64_t n;
  unsigned flags;
} linear_ctx;

static void
run_linear (void *data)
{
  linear_ctx *c = data;
  wk_linear_ex (c->pool, c->W, c->bias, c->X, c->n, c->W->ne[0], c->Y,
      c->W->ne[1], c->flags);
}

/* -s filters (a shape is timed when its name contains any of them) */
static const char *shape_filters[16];
static int n_shape_filters;

static int
want_shape (const char *name)
{
  int i;

  for (i = 0; i < n_shape_filters; i++)
    if (strstr (name, shape_filters[i]))
      return 1;
  return n_shape_filters == 0;
}

/* One decoder step (one token, n rows of X for beams) of a Whisper model
 * of the given dims, every weight distinct as in a real model, so that the
 * step reads them all from memory: per layer the self-attention's q, k, v
 * and out products, attention over the past keys (f32), the
 * cross-attention's q and out products, attention over the encoder's 1500
 * keys and values (f16, read for all heads at once), mlp.0 (GELU) and
 * mlp.2; then the logits against the token embedding. */
#define STEP_PAST 128
#define STEP_CTX 1500

typedef struct
{
  const char *name;
  int64_t d;
  int layers;
} step_dims;

typedef struct
{
  wk_pool *pool;
  const step_dims *dims;
  int64_t n;
    wk_tensor (*w)[8];          /* [layers][q k v o cq co fc1 fc2] */
  wk_tensor logits;
  float *x, *h, *y, *yl, *kself, *vself;
  uint16_t *kcross, *vcross;
} step_ctx;

static void
run_step (void *data)
{
  step_ctx *c = data;
  const int64_t d = c->dims->d, n = c->n;
  const int nh = (int) (d / 64);
  int l, i;

  for (l = 0; l < c->dims->layers; l++) {
    const size_t kv = (size_t) l * STEP_CTX * d;
    for (i = 0; i < 4; i++)
      wk_linear (c->pool, &c->w[l][i], NULL, c->x, n, d, c->y, d);
    wk_attention (c->pool, nh, 64, n, STEP_PAST, c->x, d,
        c->kself + (size_t) l * STEP_PAST * d, d,
        c->vself + (size_t) l * STEP_PAST * d, d, 0.125f, 1, c->y, d);
    wk_linear (c->pool, &c->w[l][4], NULL, c->x, n, d, c->y, d);
    wk_attention_f16kv (c->pool, nh, 64, n, STEP_CTX, c->x, d,
        c->kcross + kv, d, c->vcross + kv, d, 0.125f, 0, c->y, d);
    wk_linear (c->pool, &c->w[l][5], NULL, c->x, n, d, c->y, d);
    wk_linear_ex (c->pool, &c->w[l][6], NULL, c->x, n, d, c->h, 4 * d,
        WK_LINEAR_GELU);
    wk_linear_ex (c->pool, &c->w[l][7], NULL, c->h, n, 4 * d, c->y, d,
        WK_LINEAR_ADD);
  }
  wk_linear (c->pool, &c->logits, NULL, c->x, n, d, c->yl, c->logits.ne[1]);
}

/* Bytes one step reads: weights, cross K/V (f16), self K/V (f32). */
static double
step_bytes (const step_ctx * c)
{
  const int64_t d = c->dims->d;
  double b = 0.0;
  int l, i;

  for (l = 0; l < c->dims->layers; l++)
    for (i = 0; i < 8; i++)
      b += (double) wk_type_row_bytes (c->w[l][i].type, c->w[l][i].ne[0])
          * (double) c->w[l][i].ne[1];
  b += (double) wk_type_row_bytes (c->logits.type, d) * c->logits.ne[1];
  b += (double) c->dims->layers * d * (STEP_CTX * 2 * 2 + STEP_PAST * 2 * 4);
  return b;
}

/* Memory read bandwidth: sums of a buffer of 512 MiB, or 4 times the
 * last-level cache where that is larger (VMs on large server chips report
 * hundreds of MiB), split over the pool's threads (the floor a step that
 * reads its bytes once can reach). */
#ifdef __wasm__
#define BW_MIN_BYTES ((size_t) 64 << 20)
#else
#define BW_MIN_BYTES ((size_t) 512 << 20)
#endif

static size_t
bw_bytes (void)
{
  size_t n = BW_MIN_BYTES;
#ifdef _SC_LEVEL3_CACHE_SIZE
  long l3 = sysconf (_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0 && (size_t) l3 * 4 > n)
    n = ((size_t) l3 * 4 + 4095) & ~(size_t) 4095;
#endif
  return n;
}

typedef struct
{
  const uint64_t *p;
  size_t n;
  uint64_t sink[16];
} bw_ctx;

/* 32 bytes a load where the ISA has it (generic vectors, so that the
 * wasm build compiles it too) */
typedef uint64_t bw_vec __attribute__((vector_size (32)));

static void
bw_worker (void *data, int ith, int nth)
{
  bw_ctx *c = data;
  const bw_vec *v = (const bw_vec *) c->p;
  size_t nv = c->n / 4;
  size_t b = nv / (size_t) nth * (size_t) ith, e = nv / (size_t) nth *
      (size_t) (ith + 1), i;
  bw_vec s0 = { 0 }, s1 = { 0 }, s2 = { 0 }, s3 = { 0 };

  for (i = b; i + 4 <= e; i += 4) {
    s0 += v[i];
    s1 += v[i + 1];
    s2 += v[i + 2];
    s3 += v[i + 3];
  }
  s0 ^= s1 ^ s2 ^ s3;
  c->sink[ith & 15] += s0[0] ^ s0[1] ^ s0[2] ^ s0[3];
}

typedef struct
{
  wk_pool *pool;
  bw_ctx bw;
} bw_run_ctx;

static void
run_bw (void *data)
{
  bw_run_ctx *c = data;
  wk_pool_run (c->pool, bw_worker, &c->bw);
}

static uint64_t *bw_buf;
static size_t bw_buf_bytes;

static int
bw_buffer (void)
{
  size_t i;

  if (bw_buf)
    return 1;
  bw_buf_bytes = bw_bytes ();
  bw_buf = aligned_alloc (64, bw_buf_bytes);
  if (!bw_buf)
    return 0;
  for (i = 0; i < bw_buf_bytes / 8; i++)
    bw_buf[i] = i * 0x9e3779b97f4a7c15ull;
  return 1;
}

/* A read of the whole bandwidth buffer on pool (NULL: this thread). */
static void
bw_run_init (bw_run_ctx * c, wk_pool * pool)
{
  memset (c, 0, sizeof *c);
  c->pool = pool;
  c->bw.p = bw_buf;
  c->bw.n = bw_buf_bytes / 8;
}

static double
measure_bandwidth (wk_pool * pool)
{
  bw_run_ctx c;

  if (!bw_buffer ())
    return 0.0;
  bw_run_init (&c, pool);
  return (double) bw_buf_bytes / median_time (run_bw, &c, 1.0) * 1e-9;
}

/* -C: each timed step starts from a cold cache. The bandwidth buffer (at
 * least 4 times the last-level cache) is read through first, untimed, so
 * that the step's weights come from DRAM as the floor assumes, rather
 * than partly from a cache that holds them between steps. */
static int cold_steps;

#define COLD_RUNS 9

static double
median_time_cold (bench_fn fn, void *ctx)
{
  double t[COLD_RUNS], t0;
  bw_run_ctx c;
  int i;

  bw_run_init (&c, NULL);
  fn (ctx);                     /* warm up (page faults, packing) */
  for (i = 0; i < COLD_RUNS; i++) {
    run_bw (&c);
    t0 = now_s ();
    fn (ctx);
    t[i] = now_s () - t0;
  }
  qsort (t, COLD_RUNS, sizeof t[0], cmp_double);
  return t[COLD_RUNS / 2];
}

static float *
rand_buf_f16 (int64_t n, uint16_t ** h)
{
  float *f = rand_buf (n);
  int64_t i;

  *h = malloc ((size_t) n * sizeof (uint16_t));
  for (i = 0; i < n; i++)
    (*h)[i] = wk_fp32_to_fp16 (f[i] * 0.5f);
  return f;
}

/* The decoder step for each dims, type, kernel set and thread count: time,
 * bytes read, effective GB/s and its share of the measured bandwidth. */
static void
bench_step (const wk_kernel_set * const *sets, int n_sets, int max_threads,
    int64_t n)
{
  static const step_dims dims[] = {
    {"tiny", 384, 4}, {"base", 512, 6}, {"small", 768, 12},
  };
  static const wk_type types[] = { WK_TYPE_F16, WK_TYPE_Q8_0, WK_TYPE_Q4_0 };
  double bw[9] = { 0 };
  int nt;

  for (nt = 1; nt <= max_threads && nt < 9; nt++) {
    wk_pool *pool = nt > 1 ? wk_pool_new (nt) : NULL;
    bw[nt] = measure_bandwidth (pool);
    printf ("# memory read bandwidth, %d thread%s: %.1f GB/s (%zu MiB "
        "read)\n", nt, nt > 1 ? "s" : "", bw[nt], bw_buf_bytes >> 20);
    wk_pool_free (pool);
  }
  if (cold_steps)
    printf ("# steps timed from a cold cache (-C): medians of %d, each after "
        "reading %zu MiB\n", COLD_RUNS, bw_buf_bytes >> 20);
  printf ("%-26s %-5s %-8s %3s %10s %9s %7s %6s\n", "step (rows of X)",
      "type", "set", "thr", "ms", "MB read", "GB/s", "of bw");
  for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
    const int64_t d = dims[di].d;
    const int L = dims[di].layers;
    char name[64];
    uint16_t *kc, *vc;
    float *kcf = rand_buf_f16 (L * STEP_CTX * d, &kc);
    float *vcf = rand_buf_f16 (L * STEP_CTX * d, &vc);

    snprintf (name, sizeof name, "step %s d%ld L%d (%ld)", dims[di].name,
        (long) d, L, (long) n);
    free (kcf);
    free (vcf);
    if (!want_shape (name)) {
      free (kc);
      free (vc);
      continue;
    }
    for (int t = 0; t < 3; t++) {
      step_ctx c;
      int l, i;

      memset (&c, 0, sizeof c);
      c.dims = &dims[di];
      c.n = n;
      c.w = malloc ((size_t) L * sizeof *c.w);
      for (l = 0; l < L; l++)
        for (i = 0; i < 8; i++)
          c.w[l][i] = make_weight (types[t], i == 7 ? 4 * d : d,
              i == 6 ? 4 * d : i == 7 ? d : d);
      c.logits = make_weight (types[t], d, 51864);
      c.x = rand_buf (n * d);
      c.h = rand_buf (n * 4 * d);
      c.y = rand_buf (n * d);
      c.yl = rand_buf (n * 51864);
      c.kself = rand_buf (L * STEP_PAST * d);
      c.vself = rand_buf (L * STEP_PAST * d);
      c.kcross = kc;
      c.vcross = vc;
      for (int si = 0; si < n_sets; si++) {
        if (sets[si] == &wk_kernels_ref)
          continue;
        for (nt = 1; nt <= max_threads && nt < 9; nt++) {
          double ms, mb = step_bytes (&c) * 1e-6;
          c.pool = nt > 1 ? wk_pool_new (nt) : NULL;
          wk_kernels_set (sets[si]);
          ms = (cold_steps && bw_buf ? median_time_cold (run_step, &c)
              : median_time (run_step, &c, 1.0)) * 1e3;
          wk_kernels_set (NULL);
          printf ("%-26s %-5s %-8s %3d %10.3f %9.1f %7.1f %5.0f%%\n", name,
              wk_type_name (types[t]), sets[si]->name, nt, ms, mb,
              mb / ms, 100.0 * (mb / ms) / bw[nt]);
          fflush (stdout);
          wk_pool_free (c.pool);
          c.pool = NULL;
        }
      }
      for (l = 0; l < L; l++)
        for (i = 0; i < 8; i++)
          free ((void *) c.w[l][i].data);
      free (c.w);
      free ((void *) c.logits.data);
      free (c.x);
      free (c.h);
      free (c.y);
      free (c.yl);
      free (c.kself);
      free (c.vself);
    }
    free (kc);
    free (vc);
  }
}

typedef struct
{
  wk_pool *pool;
  const float *Q, *K, *V;
  float *O;
  int64_t n_q, n_kv;
} attn_ctx;

static void
run_attn (void *data)
{
  attn_ctx *c = data;
  /* with the encoder's work: a block of n_kv x 384 floats past Q, K, V */
  wk_attention_work (c->pool, 6, 64, c->n_q, c->n_kv, c->Q, 384, c->K, 384,
      c->V, 384, 0.125f, 0, c->O, 384, (float *) c->V + c->n_kv * 384,
      (size_t) (c->n_kv * 384));
}

/* The products of one encoder layer (q, k, v, out, mlp.0 with GELU, mlp.2
 * adding) for n frames of a model of width d, through the f32 weight
 * panels (work NULL) or the integer products (wk_linear_work). */
typedef struct
{
  wk_pool *pool;
  const wk_tensor *w;           /* [q k v o fc1 fc2] */
  const float *X;
  float *Y, *H;
  int64_t n, d;
  void *work;
} enc_layer_ctx;

static void
run_enc_layer (void *data)
{
  enc_layer_ctx *c = data;
  int i;

  for (i = 0; i < 4; i++)
    wk_linear_work (c->pool, &c->w[i], NULL, c->X, c->n, c->d, c->Y, c->d, 0,
        c->work);
  wk_linear_work (c->pool, &c->w[4], NULL, c->X, c->n, c->d, c->H, 4 * c->d,
      WK_LINEAR_GELU, c->work);
  wk_linear_work (c->pool, &c->w[5], NULL, c->H, c->n, 4 * c->d, c->Y, c->d,
      WK_LINEAR_ADD, c->work);
}

/* f32 panels against integer products for the encoder layers of tiny,
 * base and small at 1500 frames (30 s) and the shorter windows of live
 * use, in the same run: the crossover of linear_q_min_rows. */
static void
bench_enc_q (const wk_kernel_set ** sets, int n_sets, int max_threads)
{
  static const int64_t dims[] = { 384, 512, 768 };
  static const char *names[] = { "tiny", "base", "small" };
  static const int64_t frames[] = { 1500, 500, 150, 32, 8 };
  static const wk_type qtypes[] = { WK_TYPE_Q8_0, WK_TYPE_Q4_0 };
  float *X = rand_buf (1500 * 768), *Y = rand_buf (1500 * 768);
  float *H = rand_buf (1500 * 4 * 768);
  void *work = malloc (wk_linear_work_size (1500, 4 * 768));

  printf ("\n# encoder layer products (q k v o mlp.0 mlp.2), f32 weight "
      "panels against integer products (wk_linear_work), medians\n");
  printf ("%-6s %5s %-5s %-8s %3s %10s %10s %7s\n", "model", "n", "type",
      "set", "thr", "f32 ms", "int ms", "f32/int");
  for (int di = 0; di < 3; di++) {
    char name[64];
    snprintf (name, sizeof name, "encq %s", names[di]);
    if (!want_shape (name))
      continue;
    for (int t = 0; t < 2; t++) {
      int64_t d = dims[di];
      wk_tensor w[6];
      for (int i = 0; i < 4; i++)
        w[i] = make_weight (qtypes[t], d, d);
      w[4] = make_weight (qtypes[t], d, 4 * d);
      w[5] = make_weight (qtypes[t], 4 * d, d);
      for (int si = 0; si < n_sets; si++) {
        if (!sets[si]->linear_q)
          continue;
        wk_kernels_set (sets[si]);
        for (int f = 0; f < 5; f++) {
          for (int nt = 1; nt <= max_threads; nt++) {
            wk_pool *pool = nt > 1 ? wk_pool_new (nt) : NULL;
            enc_layer_ctx c = { pool, w, X, Y, H, frames[f], d, NULL };
            double ms_f, ms_q;
            ms_f = median_time (run_enc_layer, &c, 0.6) * 1e3;
            c.work = work;
            ms_q = median_time (run_enc_layer, &c, 0.6) * 1e3;
            printf ("%-6s %5ld %-5s %-8s %3d %10.3f %10.3f %7.2f\n",
                names[di], (long) frames[f], wk_type_name (qtypes[t]),
                sets[si]->name, nt, ms_f, ms_q, ms_f / ms_q);
            fflush (stdout);
            wk_pool_free (pool);
          }
        }
      }
      wk_kernels_set (NULL);
      for (int i = 0; i < 6; i++)
        free ((void *) w[i].data);
    }
  }
  free (X);
  free (Y);
  free (H);
  free (work);
}

#ifdef WK_BENCH_HAVE_BLAS
typedef struct
{
  const float *X, *W;
  float *Y;
  int n, m, k;
} blas_ctx;

static void
run_blas (void *data)
{
  blas_ctx *c = data;
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, c->n, c->m, c->k,
      1.0f, c->X, c->k, c->W, c->k, 0.0f, c->Y, c->m);
}
#endif

int
main (int argc, char **argv)
{
  static const wk_type types[] = { WK_TYPE_F32, WK_TYPE_F16, WK_TYPE_Q8_0,
    WK_TYPE_Q4_0
  };
  static const struct
  {
    const char *name;
    int64_t n, k, m;
    unsigned flags;
  } shapes[] = {
    {"enc qkvo  1500x384x384", 1500, 384, 384, 0},
    {"enc mlp.0 1500x384x1536", 1500, 384, 1536, WK_LINEAR_GELU},
    {"enc mlp.2 1500x1536x384", 1500, 1536, 384, WK_LINEAR_ADD},
    {"conv1     3000x240x384", 3000, 240, 384, WK_LINEAR_GELU},
    {"conv2     1500x1152x384", 1500, 1152, 384, WK_LINEAR_GELU},
    {"dec qkvo  1x384x384", 1, 384, 384, 0},
    {"dec mlp.0 1x384x1536", 1, 384, 1536, WK_LINEAR_GELU},
    {"dec mlp.2 1x1536x384", 1, 1536, 384, 0},
    {"logits    1x384x51864", 1, 384, 51864, 0},
    {"beam qkvo 5x384x384", 5, 384, 384, 0},
    {"beam log  5x384x51864", 5, 384, 51864, 0},
  };
  const wk_kernel_set *sets[6];
  double ceiling[6] = { 0 };
  int n_sets = 0, max_threads = 2, skip_ref = 0, i;
  float *X = rand_buf (3000 * 1536), *Y = rand_buf (3000 * 1536);
  float *Yl = rand_buf (5 * 51864), *bias = rand_buf (51864);

  for (i = 1; i < argc; i++) {
    if (strcmp (argv[i], "-t") == 0 && i + 1 < argc)
      max_threads = atoi (argv[++i]);
    else if (strcmp (argv[i], "-q") == 0)
      skip_ref = 1;
    else if (strcmp (argv[i], "-c") == 0)
      use_cpu_time = 1;
    else if (strcmp (argv[i], "-C") == 0)
      cold_steps = 1;
    else if (strcmp (argv[i], "-s") == 0 && i + 1 < argc && n_shape_filters
        < 16)
      shape_filters[n_shape_filters++] = argv[++i];
    else {
      fprintf (stderr, "usage: %s [-t max_threads] [-q] [-c] [-C] [-s shape]\n",
          argv[0]);
      return 2;
    }
  }
  if (max_threads < 1)
    max_threads = 1;

  if (!skip_ref)
    sets[n_sets++] = &wk_kernels_ref;
  if (getenv ("WK_KERNELS")) {
    /* just the one asked for */
    if (strcmp (wk_kernels_name (), "ref") != 0)
      sets[n_sets++] = wk_kernels_get ();
  } else {
    n_sets += wk_kernels_simd_sets (sets + n_sets, 5);
  }
  printf ("# kernels: %s by default; medians; GFLOP/s = 2 n k m / time\n",
      wk_kernels_name ());
  for (int si = 0; si < n_sets; si++)
    if ((ceiling[si] = fma_ceiling (sets[si])) > 0.0)
      printf ("# f32 %s ceiling of one core, %s: %.1f GFLOP/s (\"of FMA\": "
          "a product's GFLOP/s / (threads x this))\n",
          strcmp (sets[si]->name, "wasm") ? "FMA" : "multiply + add",
          sets[si]->name, ceiling[si]);
  printf ("%-26s %-5s %-5s %3s %10s %9s %7s\n", "shape", "type", "set", "thr",
      "ms", "GFLOP/s", "of FMA");

  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    if (!want_shape (shapes[s].name))
      continue;
    for (int t = 0; t < 4; t++) {
      wk_type type = types[t];
      wk_tensor W;
      if ((strncmp (shapes[s].name, "conv", 4) == 0) && type != WK_TYPE_F16)
        continue;
      W = make_weight (type, shapes[s].k, shapes[s].m);
      for (int si = 0; si < n_sets; si++) {
        for (int nt = 1; nt <= max_threads; nt++) {
          wk_pool *pool = nt > 1 ? wk_pool_new (nt) : NULL;
          linear_ctx c = { pool, &W, bias, X, Y, shapes[s].n,
            shapes[s].flags
          };
          double flop = 2.0 * shapes[s].n * shapes[s].k * shapes[s].m, ms;
          /* the reference is slow: one short budget */
          wk_kernels_set (sets[si]);
          ms = median_time (run_linear, &c, sets[si] == &wk_kernels_ref ?
              0.3 : 1.0) * 1e3;
          printf ("%-26s %-5s %-5s %3d %10.3f %9.1f", shapes[s].name,
              wk_type_name (type), sets[si]->name, nt, ms, flop / ms * 1e-6);
          /* the products through f32 panels (the encoder's) */
          if (ceiling[si] > 0.0 && shapes[s].n >= 1000)
            printf (" %6.0f%%", 100.0 * flop / ms * 1e-6 / (nt * ceiling[si]));
          printf ("\n");
          fflush (stdout);
          wk_pool_free (pool);
        }
      }
      wk_kernels_set (NULL);
      free ((void *) W.data);
    }
#ifdef WK_BENCH_HAVE_BLAS
    if (shapes[s].n >= 1000) {
      wk_tensor W = make_weight (WK_TYPE_F32, shapes[s].k, shapes[s].m);
      blas_ctx b = { X, W.data, Y, (int) shapes[s].n, (int) shapes[s].m,
        (int) shapes[s].k
      };
      for (int nt = 1; nt <= max_threads; nt++) {
        double flop = 2.0 * shapes[s].n * shapes[s].k * shapes[s].m, ms;
        openblas_set_num_threads (nt);
        ms = median_time (run_blas, &b, 1.0) * 1e3;
        printf ("%-26s %-5s %-5s %3d %10.3f %9.1f\n", shapes[s].name, "f32",
            "blas", nt, ms, flop / ms * 1e-6);
      }
      free ((void *) W.data);
    }
#endif
  }

  /* attention over all 6 heads of d_head 64 */
  for (int si = 0; si < n_sets; si++) {
    for (int nt = 1; nt <= max_threads; nt++) {
      static const int64_t nq[] = { 1500, 1, 4 };
      for (int a = 0; a < 3; a++) {
        wk_pool *pool = nt > 1 ? wk_pool_new (nt) : NULL;
        attn_ctx c = { pool, X, X + 1500 * 384, X + 2 * 1500 * 384, Y, nq[a],
          1500
        };
        char name[64];
        double flop = 4.0 * nq[a] * 1500 * 384, ms;
        snprintf (name, sizeof name, "attention %ldx1500 6x64", (long) nq[a]);
        if (!want_shape (name)) {
          wk_pool_free (pool);
          continue;
        }
        wk_kernels_set (sets[si]);
        ms = median_time (run_attn, &c, sets[si] == &wk_kernels_ref ?
            0.3 : 1.0) * 1e3;
        printf ("%-26s %-5s %-5s %3d %10.3f %9.1f\n", name, "f32",
            sets[si]->name, nt, ms, flop / ms * 1e-6);
        fflush (stdout);
        wk_pool_free (pool);
      }
    }
  }
  wk_kernels_set (NULL);

  bench_enc_q (sets, n_sets, max_threads);

  /* the decoder step of real model sizes (greedy, and 5 beams) */
  for (i = 0; i < n_shape_filters; i++)
    if (strncmp (shape_filters[i], "step", 4) == 0)
      break;
  if (n_shape_filters == 0 || i < n_shape_filters) {
    bench_step (sets, n_sets, max_threads, 1);
    bench_step (sets, n_sets, max_threads, 5);
  }
  free (X);
  free (Y);
  free (Yl);
  free (bias);
  return 0;
}
