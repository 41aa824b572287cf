// What tutorial 03's structure allows on this CPU, measured without Tritium: a C model of
// the code the CPU backend generates for it (`scripts/dev model [SIZE] [ROUNDS]`).
//
// Each program owns a BM x BN block of C. At every K step it copies its BM x 64 slice of
// `a` into a row-major buffer and its 64 x BN slice of `b` into 16-column panels (what
// codegen `packing` does), then runs the 6 x 16 AVX2 micro-kernel of codegen `dot` over
// the block with its accumulators loaded and stored once per step. BLAS packs each panel
// once for many blocks; a Triton program cannot share its copies with other programs.
//
// Rows, one thread, interleaved rounds (best, as `bench_table` reports, and median):
//   FMA peak                 12 independent FMA chains
//   micro-kernel             the `dot` on one hot 96 x 64 block, K = 64 (its own ceiling)
//   BMxBNx64 hot             the structure with the packed tiles reused (no copies)
//   BMxBNx64 warm            the copies, always from the first K slice (in cache)
//   BMxBNx64 fresh           the real thing: fresh slices from memory every step
//   cblas_sgemm              OpenBLAS on one thread
// Ratios (of the best rounds) are to `cblas_sgemm` and to the FMA peak. Needs AVX2 and FMA (Zen 3 here), clang 19 and OpenBLAS.
#include <cblas.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MR = 6, NR = 16, BK = 64, MAX_ROUNDS = 99 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// C[rows x n] (row stride ldc) += A[rows x k] (row-major) * B (panels [n/16][k][16]).
__attribute__((noinline)) static void dot(float *c, const float *a, const float *b, int rows,
                                          int k, int n, int ldc) {
  for (int jb = 0; jb < n / NR; jb++) {
    const float *bp = b + (size_t)jb * k * NR;
    for (int ib = 0; ib < rows / MR; ib++) {
      float *cb = c + ib * MR * ldc + jb * NR;
      const float *ab = a + ib * MR * k;
      __m256 acc[MR][2];
      for (int r = 0; r < MR; r++)
        for (int v = 0; v < 2; v++) acc[r][v] = _mm256_loadu_ps(cb + r * ldc + v * 8);
#pragma clang loop unroll(disable)
      for (int kk = 0; kk < k; kk++) {
        __m256 b0 = _mm256_loadu_ps(bp + kk * NR), b1 = _mm256_loadu_ps(bp + kk * NR + 8);
        for (int r = 0; r < MR; r++) {
          __m256 x = _mm256_broadcast_ss(ab + r * k + kk);
          acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
        }
      }
      for (int r = 0; r < MR; r++)
        for (int v = 0; v < 2; v++) _mm256_storeu_ps(cb + r * ldc + v * 8, acc[r][v]);
    }
  }
}

__attribute__((noinline)) static float fma_chains(long n) {
  __m256 a[12];
  for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps(i * 1e-3f);
  __m256 m = _mm256_set1_ps(0.999f), d = _mm256_set1_ps(1e-4f);
  for (long i = 0; i < n; i++)
    for (int j = 0; j < 12; j++) a[j] = _mm256_fmadd_ps(a[j], m, d);
  float s = 0, t[8];
  for (int i = 0; i < 12; i++) {
    _mm256_storeu_ps(t, a[i]);
    s += t[0];
  }
  return s;
}

typedef enum { HOT, WARM, FRESH } Copies;
static const char *copies_name[] = {"hot", "warm", "fresh"};

static float *ap, *bp, *cp;

// One program: block (pm, pn) of c = a @ b, all m x n x k row-major.
static void program(float *c, const float *a, const float *b, int n, int k, int pm, int pn,
                    int bm, int bn, Copies copies) {
  memset(cp, 0, (size_t)bm * bn * 4);
  for (int kb = 0; kb < k / BK; kb++) {
    int from = copies == WARM ? 0 : kb;
    if (copies != HOT || kb == 0) {
      for (int i = 0; i < bm; i++)
        memcpy(ap + i * BK, a + (size_t)(pm * bm + i) * k + from * BK, BK * 4);
      for (int r = 0; r < BK; r++) {
        const float *src = b + (size_t)(from * BK + r) * n + pn * bn;
        for (int jb = 0; jb < bn / NR; jb++) memcpy(bp + (jb * BK + r) * NR, src + jb * NR, NR * 4);
      }
    }
    dot(cp, ap, bp, bm, BK, bn, bn);
  }
  for (int i = 0; i < bm; i++) memcpy(c + (size_t)(pm * bm + i) * n + pn * bn, cp + i * bn, bn * 4);
}

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int main(int argc, char **argv) {
  int size = argc > 1 ? atoi(argv[1]) : 1024, rounds = argc > 2 ? atoi(argv[2]) : 9;
  if (size < 256 || size % 128 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "usage: matmul_model [SIZE (a multiple of 128, >= 256)] [ROUNDS (1-99)]\n");
    return 2;
  }
  // m is a multiple of both block heights (96, 192); n and k are `size`.
  int m = size / 192 * 192, n = size, k = size;
  struct { int bm, bn; Copies copies; } rows[] = {
      {96, 128, HOT}, {96, 128, WARM}, {96, 128, FRESH},
      {192, 128, HOT}, {192, 128, WARM}, {192, 128, FRESH},
  };
  enum { STRUCTS = sizeof rows / sizeof rows[0], PEAK = STRUCTS, MICRO, BLAS, ROWS };
  float *a = aligned_alloc(64, (size_t)m * k * 4), *b = aligned_alloc(64, (size_t)k * n * 4);
  float *c = aligned_alloc(64, (size_t)m * n * 4), *want = aligned_alloc(64, (size_t)m * n * 4);
  ap = aligned_alloc(64, 192 * BK * 4);
  bp = aligned_alloc(64, (size_t)BK * 128 * 4);
  cp = aligned_alloc(64, 192 * 128 * 4);
  for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)(i % 17) / 17 - 0.5f;
  for (size_t i = 0; i < (size_t)k * n; i++) b[i] = (float)(i % 13) / 13 - 0.5f;
  openblas_set_num_threads(1);
  double g[ROWS][MAX_ROUNDS];
  double flops = 2.0 * m * n * k;
  for (int r = 0; r < rounds; r++) {
    double t = now();
    long chains = 20000000;
    volatile float sink = fma_chains(chains);
    (void)sink;
    g[PEAK][r] = chains * 12 * 16 / (now() - t) / 1e9;
    // The micro-kernel alone: 96 x 64 += 96 x 64 @ 64 x 64, hot.
    long reps = (long)(flops / (2.0 * 96 * 64 * BK));
    t = now();
    for (long i = 0; i < reps; i++) dot(cp, ap, bp, 96, BK, 64, 64);
    g[MICRO][r] = reps * 2.0 * 96 * 64 * BK / (now() - t) / 1e9;
    for (int s = 0; s < STRUCTS; s++) {
      t = now();
      for (int pm = 0; pm < m / rows[s].bm; pm++)
        for (int pn = 0; pn < n / rows[s].bn; pn++)
          program(c, a, b, n, k, pm, pn, rows[s].bm, rows[s].bn, rows[s].copies);
      g[s][r] = flops / (now() - t) / 1e9;
    }
    t = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, want, n);
    g[BLAS][r] = flops / (now() - t) / 1e9;
  }
  // The last structure row computed the whole product from fresh slices: check it.
  double worst = 0;
  for (size_t i = 0; i < (size_t)m * n; i++) {
    double d = c[i] - want[i];
    worst = d > worst ? d : -d > worst ? -d : worst;
  }
  if (worst > 1e-2 * k) {
    fprintf(stderr, "matmul_model: the model differs from cblas_sgemm by %g\n", worst);
    return 1;
  }
  for (int s = 0; s < ROWS; s++) qsort(g[s], rounds, sizeof(double), by_value);
  double blas = g[BLAS][rounds - 1], peak = g[PEAK][rounds - 1];
  printf("matmul model, %dx%dx%d f32, one thread, %d interleaved rounds\n", m, n, k, rounds);
  printf("  %-24s %9s %9s %9s %9s\n", "row", "best", "median", "/ cblas", "/ peak");
  for (int s = 0; s < ROWS; s++) {
    char name[32];
    if (s < STRUCTS)
      snprintf(name, sizeof name, "%dx%dx%d %s", rows[s].bm, rows[s].bn, BK,
               copies_name[rows[s].copies]);
    else
      snprintf(name, sizeof name, "%s",
               s == PEAK ? "FMA peak" : s == MICRO ? "micro-kernel (hot)" : "cblas_sgemm");
    double best = g[s][rounds - 1];
    printf("  %-24s %9.1f %9.1f %9.2f %9.2f\n", name, best, g[s][rounds / 2], best / blas,
           best / peak);
  }
  return 0;
}
