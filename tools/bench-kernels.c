/* wk-bench-kernels: times the kernels on whisper-tiny-sized shapes (d =
 * 384) for each weight type, kernel set and thread count, and prints
 * medians and GFLOP/s. Figures only, no assertions.
 *
 *   wk-bench-kernels [-t max_threads] [-q] [-c] [-s shape-substring]
 *
 * Every SIMD set built in and usable here is timed (WK_KERNELS=name: only
 * that one). -q skips the (slow) reference kernels; -c reports the process's CPU time
 * instead of wall time (steadier on a busy machine, but it counts every
 * thread's time and no waiting, so use it with one thread). Built with OpenBLAS (meson finds
 * it when libopenblas-dev is installed) it also times cblas_sgemm on the
 * encoder shapes with the same threads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

typedef void (*bench_fn) (void *ctx);

/* Median wall time of fn over runs sized to about budget_s in all (at
 * least 3, at most 101). */
static double
median_time (bench_fn fn, void *ctx, double budget_s)
{
  double t[101], t0 = now_s (), one;
  int reps, i;

  fn (ctx);                     /* warm up (and size the runs) */
  one = now_s () - t0;
  reps = one > 0 ? (int) (budget_s / one) : 101;
  if (reps < 3)
    reps = 3;
  if (reps > 101)
    reps = 101;
  for (i = 0; i < reps; i++) {
    t0 = now_s ();
    fn (ctx);
    t[i] = now_s () - t0;
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

/* The decoder's weights for one token: per layer q, k, v, out of the self
 * attention, q and out of the cross attention, mlp.0, mlp.2; then the
 * logits against the token embedding. */
typedef struct
{
  wk_pool *pool;
  wk_tensor sq, fc1, fc2, logits;
  const float *x, *h;
  float *y, *yl;
  int64_t n;
  int layers;
} token_ctx;

static void
run_token (void *data)
{
  token_ctx *c = data;
  int l, i;
  for (l = 0; l < c->layers; l++) {
    for (i = 0; i < 6; i++)
      wk_linear (c->pool, &c->sq, NULL, c->x, c->n, 384, c->y, 384);
    wk_linear_ex (c->pool, &c->fc1, NULL, c->x, c->n, 384, c->y, 1536,
        WK_LINEAR_GELU);
    wk_linear (c->pool, &c->fc2, NULL, c->h, c->n, 1536, c->y, 384);
  }
  wk_linear (c->pool, &c->logits, NULL, c->x, c->n, 384, c->yl, 51864);
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
  wk_attention (c->pool, 6, 64, c->n_q, c->n_kv, c->Q, 384, c->K, 384, c->V,
      384, 0.125f, 0, c->O, 384);
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

static const char *shape_filter;

static int
want_shape (const char *name)
{
  return !shape_filter || strstr (name, shape_filter) != NULL;
}

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
    else if (strcmp (argv[i], "-s") == 0 && i + 1 < argc)
      shape_filter = argv[++i];
    else {
      fprintf (stderr, "usage: %s [-t max_threads] [-q] [-c] [-s shape]\n",
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
    n_sets += wk_kernels_simd_sets (sets + n_sets, 4);
  }
  printf ("# kernels: %s by default; medians; GFLOP/s = 2 n k m / time\n",
      wk_kernels_name ());
  printf ("%-26s %-5s %-5s %3s %10s %9s\n", "shape", "type", "set", "thr",
      "ms", "GFLOP/s");

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
          printf ("%-26s %-5s %-5s %3d %10.3f %9.1f\n", shapes[s].name,
              wk_type_name (type), sets[si]->name, nt, ms, flop / ms * 1e-6);
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

  /* all the decoder's weight products for one token (4 layers) */
  if (want_shape ("token")) {
    for (int t = 0; t < 4; t++) {
      for (int nt = 1; nt <= max_threads; nt++) {
        const wk_kernel_set *ks = sets[n_sets - 1];
        token_ctx c;
        double ms;
        memset (&c, 0, sizeof c);
        c.pool = nt > 1 ? wk_pool_new (nt) : NULL;
        c.sq = make_weight (types[t], 384, 384);
        c.fc1 = make_weight (types[t], 384, 1536);
        c.fc2 = make_weight (types[t], 1536, 384);
        c.logits = make_weight (types[t], 384, 51864);
        c.x = X;
        c.h = X;
        c.y = Y;
        c.yl = Yl;
        c.n = 1;
        c.layers = 4;
        wk_kernels_set (ks);
        ms = median_time (run_token, &c, 1.0) * 1e3;
        wk_kernels_set (NULL);
        printf ("%-26s %-5s %-5s %3d %10.3f %9s\n", "token (4 layers+logits)",
            wk_type_name (types[t]), ks->name, nt, ms, "-");
        fflush (stdout);
        free ((void *) c.sq.data);
        free ((void *) c.fc1.data);
        free ((void *) c.fc2.data);
        free ((void *) c.logits.data);
        wk_pool_free (c.pool);
      }
    }
  }
  free (X);
  free (Y);
  free (Yl);
  free (bias);
  return 0;
}
