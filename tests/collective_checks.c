/*
 * collective_checks.c: every collective checked for exact results on the ranks of whatever target
 * runs it (the simulator in test_collectives, MPI processes in test_mpi_collectives).  Each rank
 * checks its own results against values it folds in double itself; failures are counted in
 * rh_test_failures and described on stderr.
 */
#include "collective_checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rh_test_failures;
#define failures rh_test_failures

static const size_t counts[] = {1, 3, 7, 257, 1031};
#define NCOUNTS (sizeof counts / sizeof counts[0])


#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond) && failures++ < 20) {                                                              \
      fprintf(stderr, "rank %d: ", rh_rank(ctx));                                                  \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

/* Values rank r contributes: small integers, exact in every type and every sum for n <= 64. */
static double value(rh_op op, int r, size_t i, int n) {
  if (op == RH_SUM || op == RH_AVERAGE) return 1 + (double)((r + (int)(i % 61)) % 2);
  double v = (double)(r + 1) * (double)(i % 3 + 1);
  return (i % 2) ? v : -v - (double)(n - r);
}

static void store(void *buf, size_t i, rh_dtype t, double v) {
  if (t == RH_FLOAT32) ((float *)buf)[i] = (float)v;
  else if (t == RH_FLOAT64) ((double *)buf)[i] = v;
  else if (t == RH_FLOAT16) ((uint16_t *)buf)[i] = rh_float_to_half((float)v);
  else ((int32_t *)buf)[i] = (int32_t)v;
}

static double load(const void *buf, size_t i, rh_dtype t) {
  if (t == RH_FLOAT32) return ((const float *)buf)[i];
  if (t == RH_FLOAT64) return ((const double *)buf)[i];
  if (t == RH_FLOAT16) return rh_half_to_float(((const uint16_t *)buf)[i]);
  return ((const int32_t *)buf)[i];
}

static double expected(rh_op op, rh_dtype t, size_t i, int n) {
  double acc = value(op, 0, i, n);
  for (int r = 1; r < n; r++) {
    double v = value(op, r, i, n);
    acc = op == RH_MIN ? fmin(acc, v) : op == RH_MAX ? fmax(acc, v) : acc + v;
  }
  if (op == RH_AVERAGE) acc = t == RH_INT32 ? trunc(acc / n) : acc / n;
  return acc;
}

static bool close_enough(rh_op op, rh_dtype t, double got, double want) {
  if (op != RH_AVERAGE || t == RH_INT32) return got == want;
  double ulp = t == RH_FLOAT16 ? 0x1p-10 : t == RH_FLOAT32 ? 0x1p-23 : 0x1p-52;
  return fabs(got - want) <= 2 * ulp * fabs(want);
}

static void check_allreduce(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  for (size_t c = 0; c < NCOUNTS; c++)
    for (int op = 0; op < RH_OP_COUNT; op++)
      for (int t = 0; t < RH_DTYPE_COUNT; t++) {
        size_t count = counts[c], esz = rh_dtype_size((rh_dtype)t);
        char *in = malloc(count * esz), *out = malloc(count * esz);
        for (size_t i = 0; i < count; i++) store(in, i, (rh_dtype)t, value((rh_op)op, me, i, n));
        bool in_place = c % 2 == 1;
        if (in_place) memcpy(out, in, count * esz);
        rh_status st = rh_allreduce(ctx, in_place ? out : in, out, count, (rh_dtype)t, (rh_op)op,
                                    NULL);
        CHECK(st == RH_OK, "allreduce %s %s count %zu: %s", rh_op_name(op), rh_dtype_name(t),
              count, rh_status_string(st));
        for (size_t i = 0; i < count && st == RH_OK; i++) {
          double got = load(out, i, (rh_dtype)t), want = expected((rh_op)op, (rh_dtype)t, i, n);
          CHECK(close_enough((rh_op)op, (rh_dtype)t, got, want),
                "allreduce %s %s count %zu [%zu]: got %.17g want %.17g", rh_op_name(op),
                rh_dtype_name(t), count, i, got, want);
        }
        free(in);
        free(out);
      }
}

static void check_scaling_and_compression(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  size_t count = 1031;
  double *d = malloc(count * sizeof *d);
  for (size_t i = 0; i < count; i++) d[i] = value(RH_SUM, me, i, n);
  rh_reduce_opts o = {.prescale = 3.0, .postscale = 0.5, .compression = RH_COMPRESS_NONE};
  rh_status st = rh_allreduce(ctx, d, d, count, RH_FLOAT64, RH_SUM, &o);
  CHECK(st == RH_OK, "scaled allreduce: %s", rh_status_string(st));
  for (size_t i = 0; i < count; i++)
    CHECK(d[i] == 1.5 * expected(RH_SUM, RH_FLOAT64, i, n), "scaled [%zu]: %.17g", i, d[i]);
  /* fp16 on the wire: the values and sums are exact in half, so the float result is exact */
  float *f = malloc(count * sizeof *f);
  for (size_t i = 0; i < count; i++) f[i] = (float)value(RH_SUM, me, i, n) * 0.25f;
  o = (rh_reduce_opts){.prescale = 1, .postscale = 1, .compression = RH_COMPRESS_FP16};
  st = rh_allreduce(ctx, f, f, count, RH_FLOAT32, RH_SUM, &o);
  CHECK(st == RH_OK, "fp16 allreduce: %s", rh_status_string(st));
  for (size_t i = 0; i < count; i++)
    CHECK(f[i] == (float)(0.25 * expected(RH_SUM, RH_FLOAT32, i, n)), "fp16 [%zu]: %.9g", i, f[i]);
  /* a value that fp16 cannot hold shows the compression really happened */
  f[0] = 1.0f + 0x1p-20f;
  st = rh_allreduce(ctx, f, f, 1, RH_FLOAT32, RH_MAX, &o);
  CHECK(st == RH_OK && f[0] == 1.0f, "fp16 rounding: %.9g", f[0]);
  free(d);
  free(f);
}

static void check_broadcast(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  int roots[] = {0, 1, n / 2, n - 1};
  for (int k = 0; k < 4; k++) {
    int root = roots[k] % n;
    for (size_t c = 0; c < NCOUNTS; c++)
      for (int t = 0; t < RH_DTYPE_COUNT; t++) {
        size_t count = counts[c];
        char *buf = malloc(count * rh_dtype_size((rh_dtype)t));
        for (size_t i = 0; i < count; i++)
          store(buf, i, (rh_dtype)t, me == root ? value(RH_MAX, root, i, n) : -7);
        rh_status st = rh_broadcast(ctx, buf, count, (rh_dtype)t, root);
        CHECK(st == RH_OK, "broadcast root %d: %s", root, rh_status_string(st));
        for (size_t i = 0; i < count; i++)
          CHECK(load(buf, i, (rh_dtype)t) == value(RH_MAX, root, i, n),
                "broadcast root %d %s count %zu [%zu]: %g", root, rh_dtype_name(t), count, i,
                load(buf, i, (rh_dtype)t));
        free(buf);
      }
  }
}

static void check_allgather(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  for (size_t c = 0; c < NCOUNTS; c++)
    for (int t = 0; t < RH_DTYPE_COUNT; t++) {
      size_t count = counts[c], esz = rh_dtype_size((rh_dtype)t);
      char *in = malloc(count * esz), *out = malloc(count * esz * (size_t)n);
      for (size_t i = 0; i < count; i++) store(in, i, (rh_dtype)t, value(RH_MAX, me, i, n));
      rh_status st = rh_allgather(ctx, in, count, out, (rh_dtype)t);
      CHECK(st == RH_OK, "allgather: %s", rh_status_string(st));
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
          CHECK(load(out, (size_t)r * count + i, (rh_dtype)t) == value(RH_MAX, r, i, n),
                "allgather %s count %zu block %d [%zu]", rh_dtype_name(t), count, r, i);
      free(in);
      free(out);
    }
  /* unequal blocks, some empty */
  size_t *cnt = malloc((size_t)n * sizeof *cnt), total = 0;
  for (int r = 0; r < n; r++) total += cnt[r] = (size_t)((r * 5 + 1) % 7);
  double *in = malloc(cnt[me] * 8 + 8), *out = malloc(total * 8 + 8);
  for (size_t i = 0; i < cnt[me]; i++) in[i] = value(RH_MIN, me, i, n);
  rh_status st = rh_allgatherv(ctx, in, out, cnt, RH_FLOAT64);
  CHECK(st == RH_OK, "allgatherv: %s", rh_status_string(st));
  size_t off = 0;
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < cnt[r]; i++, off++)
      CHECK(out[off] == value(RH_MIN, r, i, n), "allgatherv block %d [%zu]", r, i);
  free(in);
  free(out);
  free(cnt);
}

/* Rank me's block of the reduction of every rank's n x count buffer: element i of it is element
 * me x count + i of the whole, each rank's values folded in double as for allreduce.  Counts
 * alternate between a separate recv (send checked unchanged) and recv inside send (in place). */
static void check_reduce_scatter(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  for (size_t c = 0; c < NCOUNTS; c++)
    for (int op = 0; op < RH_OP_COUNT; op++)
      for (int t = 0; t < RH_DTYPE_COUNT; t++) {
        size_t count = counts[c], esz = rh_dtype_size((rh_dtype)t), all = count * (size_t)n;
        char *in = malloc(all * esz), *out = malloc(count * esz);
        for (size_t i = 0; i < all; i++) store(in, i, (rh_dtype)t, value((rh_op)op, me, i, n));
        bool in_place = c % 2 == 1;
        char *recv = in_place ? in + (size_t)me * count * esz : out;
        rh_status st = rh_reduce_scatter(ctx, in, recv, count, (rh_dtype)t, (rh_op)op, NULL);
        CHECK(st == RH_OK, "reduce_scatter %s %s count %zu: %s", rh_op_name(op),
              rh_dtype_name(t), count, rh_status_string(st));
        for (size_t i = 0; i < count && st == RH_OK; i++) {
          size_t at = (size_t)me * count + i;
          double got = load(recv, i, (rh_dtype)t), want = expected((rh_op)op, (rh_dtype)t, at, n);
          CHECK(close_enough((rh_op)op, (rh_dtype)t, got, want),
                "reduce_scatter %s %s count %zu [%zu]: got %.17g want %.17g", rh_op_name(op),
                rh_dtype_name(t), count, i, got, want);
        }
        for (size_t i = 0; i < all && !in_place; i++)
          CHECK(load(in, i, (rh_dtype)t) == value((rh_op)op, me, i, n),
                "reduce_scatter changed its send buffer [%zu]", i);
        free(in);
        free(out);
      }
  /* scaled and non-blocking: (3 x sum) / 2 of rank me's block */
  size_t count = 257;
  double *d = malloc(count * (size_t)n * sizeof *d), *mine = malloc(count * sizeof *mine);
  for (size_t i = 0; i < count * (size_t)n; i++) d[i] = value(RH_SUM, me, i, n);
  rh_reduce_opts o = {.prescale = 3.0, .postscale = 0.5, .compression = RH_COMPRESS_NONE};
  rh_request *req = NULL;
  rh_status st = rh_ireduce_scatter(ctx, d, mine, count, RH_FLOAT64, RH_SUM, &o, &req);
  if (st == RH_OK) st = rh_wait(req);
  CHECK(st == RH_OK, "scaled ireduce_scatter: %s", rh_status_string(st));
  for (size_t i = 0; i < count && st == RH_OK; i++)
    CHECK(mine[i] == 1.5 * expected(RH_SUM, RH_FLOAT64, (size_t)me * count + i, n),
          "scaled reduce_scatter [%zu]: %.17g", i, mine[i]);
  free(d);
  free(mine);
}

static void check_barrier(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  /* rank r arrives r milliseconds late; nobody may leave before the last one arrived (by the
   * job's clock: one clock on the simulator, rank 0's origin on the processes of one host) */
  rh_compute(ctx, me * 1e-3 * (ctx->cluster ? ctx->cluster->gpu_flops : 0));
  double arrived = rh_time(ctx);
  rh_status st = rh_barrier(ctx);
  double left = rh_time(ctx);
  CHECK(st == RH_OK, "barrier: %s", rh_status_string(st));
  double *all = calloc((size_t)n, sizeof *all), last = 0;
  st = rh_check_allgather(ctx, &arrived, sizeof arrived, all);
  CHECK(st == RH_OK, "gathering arrivals: %s", rh_status_string(st));
  for (int r = 0; r < n && st == RH_OK; r++)
    if (all[r] > last) last = all[r];
  CHECK(left >= last, "left the barrier at %.9g, before the last rank came at %.9g", left, last);
  free(all);
}

static void check_nonblocking(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  enum { C = 1031 };
  float a[C], b[C];
  double g[64 * 2];
  int32_t bc[C];
  for (size_t i = 0; i < C; i++) {
    a[i] = (float)value(RH_SUM, me, i, n);
    b[i] = (float)value(RH_MAX, me, i, n);
    bc[i] = me == 0 ? (int32_t)i : -1;
  }
  double mine[2] = {me, -me};
  size_t gc[64];
  for (int r = 0; r < n; r++) gc[r] = 2;
  rh_request *r1, *r2, *r3, *r4;
  rh_status st = rh_iallreduce(ctx, a, a, C, RH_FLOAT32, RH_SUM, NULL, &r1);
  if (st == RH_OK) st = rh_iallreduce(ctx, b, b, C, RH_FLOAT32, RH_MAX, NULL, &r2);
  if (st == RH_OK) st = rh_ibroadcast(ctx, bc, C, RH_INT32, 0, &r3);
  if (st == RH_OK) st = rh_iallgatherv(ctx, mine, g, gc, RH_FLOAT64, &r4);
  CHECK(st == RH_OK, "issue: %s", rh_status_string(st));
  if (st != RH_OK) return;
  /* waited in reverse order */
  CHECK(rh_wait(r4) == RH_OK, "wait allgatherv");
  CHECK(rh_wait(r3) == RH_OK, "wait broadcast");
  CHECK(rh_wait(r2) == RH_OK, "wait max");
  CHECK(rh_wait(r1) == RH_OK, "wait sum");
  for (size_t i = 0; i < C; i++) {
    CHECK(a[i] == (float)expected(RH_SUM, RH_FLOAT32, i, n), "iallreduce sum [%zu]", i);
    CHECK(b[i] == (float)expected(RH_MAX, RH_FLOAT32, i, n), "iallreduce max [%zu]", i);
    CHECK(bc[i] == (int32_t)i, "ibroadcast [%zu]", i);
  }
  for (int r = 0; r < n; r++) CHECK(g[2 * r] == r && g[2 * r + 1] == -r, "iallgatherv %d", r);
}

/* A blocking collective issued while a request is in flight runs after it, in issue order, even
 * 256 collectives later (when the tags wrap around), and its numbers are right. */
static void check_ordering(rh_ctx *ctx) {
  int n = rh_size(ctx);
  rh_request *req;
  char *name = malloc(16);
  snprintf(name, 16, "background");
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = name;
  rh_status st = rh_iallreduce(ctx, NULL, NULL, (size_t)1 << 20, RH_FLOAT32, RH_SUM, &o, &req);
  free(name); /* the request keeps its own copy of the name */
  for (int i = 0; i < 255 && st == RH_OK; i++) st = rh_barrier(ctx);
  float v[8];
  for (int i = 0; i < 8; i++) v[i] = (float)(rh_rank(ctx) + 1);
  if (st == RH_OK) st = rh_allreduce(ctx, v, v, 8, RH_FLOAT32, RH_SUM, NULL);
  rh_status w = rh_wait(req);
  CHECK(st == RH_OK && w == RH_OK, "ordering: %s / %s", rh_status_string(st), rh_status_string(w));
  for (int i = 0; i < 8; i++) CHECK(v[i] == (float)(n * (n + 1) / 2), "ordering [%d]: %g", i, v[i]);
  /* a rank that contributes nothing may pass no send buffer */
  size_t sizes[64];
  for (int r = 0; r < n; r++) sizes[r] = r == 0 ? 0 : 2;
  double mine[2] = {rh_rank(ctx), rh_rank(ctx)}, all[128];
  st = rh_allgatherv(ctx, rh_rank(ctx) == 0 ? NULL : mine, all, sizes, RH_FLOAT64);
  CHECK(st == RH_OK, "allgatherv with an empty NULL contribution: %s", rh_status_string(st));
  for (int r = 1; r < n && st == RH_OK; r++) CHECK(all[2 * (r - 1)] == r, "allgatherv block %d", r);
}

/* A model's every gradient tensor in flight at once, as Horovod and DDP queue them: 600
 * requests issued before the first wait (a fixed window of 255 refused the 256th), waited in
 * the reverse order, each sum exact (rank r gives i + r to tensor i: n·i + n(n-1)/2). */
static void check_many_requests(rh_ctx *ctx) {
  enum { N = 600 };
  int n = rh_size(ctx), me = rh_rank(ctx);
  rh_request **req = calloc(N, sizeof *req);
  float *v = malloc(N * sizeof *v);
  CHECK(req && v, "out of host memory");
  rh_status st = req && v ? RH_OK : RH_ERR_NOMEM;
  int issued = 0;
  for (; issued < N && st == RH_OK; issued++) {
    v[issued] = (float)(issued + me);
    st = rh_iallreduce(ctx, &v[issued], &v[issued], 1, RH_FLOAT32, RH_SUM, NULL, &req[issued]);
  }
  CHECK(st == RH_OK, "request %d of %d: %s (%s)", issued, N, rh_status_string(st), ctx->last_error);
  if (st != RH_OK) issued--;
  for (int i = issued - 1; i >= 0; i--) {
    rh_status w = rh_wait(req[i]);
    CHECK(w == RH_OK, "wait %d: %s", i, rh_status_string(w));
    float want = (float)n * (float)i + (float)(n * (n - 1) / 2);
    if (w == RH_OK) CHECK(v[i] == want, "request %d: %g, expected %g", i, v[i], want);
  }
  free(req);
  free(v);
}

static void check_arguments(rh_ctx *ctx) {
  float x = 1;
  CHECK(rh_allreduce(ctx, &x, &x, 1, RH_DTYPE_COUNT, RH_SUM, NULL) == RH_ERR_INVALID, "dtype");
  CHECK(rh_allreduce(ctx, &x, &x, 1, RH_FLOAT32, RH_OP_COUNT, NULL) == RH_ERR_INVALID, "op");
  CHECK(rh_allreduce(ctx, &x, NULL, 1, RH_FLOAT32, RH_SUM, NULL) == RH_ERR_INVALID, "one NULL");
  CHECK(rh_broadcast(ctx, &x, 1, RH_FLOAT32, rh_size(ctx)) == RH_ERR_INVALID, "root");
  CHECK(rh_compute(ctx, -1) == RH_ERR_INVALID, "negative flops");
  CHECK(rh_compute_priced(ctx, -1, 0) == RH_ERR_INVALID, "negative priced flops");
  CHECK(rh_compute_priced(ctx, 0, -1) == RH_ERR_INVALID, "negative priced seconds");
  /* timing-only forms move simulated bytes and carry nothing */
  CHECK(rh_allreduce(ctx, NULL, NULL, 1 << 20, RH_FLOAT32, RH_AVERAGE, NULL) == RH_OK, "timing");
  CHECK(rh_broadcast(ctx, NULL, 1 << 12, RH_FLOAT32, 0) == RH_OK, "timing broadcast");
  /* after all of it the ranks still agree */
  CHECK(rh_allreduce(ctx, &x, &x, 1, RH_FLOAT32, RH_SUM, NULL) == RH_OK && x == rh_size(ctx),
        "after: %g", x);
}

/* Tensors where the target keeps them (the GPU's memory on the GPU target): a fused group of odd
 * sizes, an fp16-compressed average, a broadcast and an allgather, each read back exact. */
static void check_tensors(rh_ctx *ctx) {
  int n = rh_size(ctx), me = rh_rank(ctx);
  enum { K = 3 };
  const size_t sizes[K] = {1031, 3, 4099};
  void *t[K];
  float *host = malloc(4099 * sizeof(float)), *all = malloc((size_t)n * 4099 * sizeof(float));
  CHECK(host && all, "out of host memory");
  if (!host || !all) return;
  for (int k = 0; k < K; k++) {
    t[k] = rh_tensor_alloc(ctx, sizes[k] * sizeof(float));
    CHECK(t[k] != NULL, "tensor %d not allocated", k);
    if (!t[k]) return;
    for (size_t i = 0; i < sizes[k]; i++) host[i] = (float)value(RH_SUM, me + k, i, n);
    CHECK(rh_tensor_write(ctx, t[k], host, sizes[k] * sizeof(float)) == RH_OK, "write %d", k);
  }
  rh_status st = rh_allreduce_group(ctx, t, sizes, K, RH_FLOAT32, RH_SUM, NULL);
  CHECK(st == RH_OK, "group allreduce: %s", rh_status_string(st));
  for (int k = 0; k < K && st == RH_OK; k++) {
    CHECK(rh_tensor_read(ctx, host, t[k], sizes[k] * sizeof(float)) == RH_OK, "read %d", k);
    for (size_t i = 0; i < sizes[k]; i++) {
      double want = 0;
      for (int r = 0; r < n; r++) want += value(RH_SUM, r + k, i, n);
      CHECK(host[i] == (float)want, "group tensor %d [%zu]: %g, not %g", k, i, host[i], want);
    }
  }
  /* tensor 2 holds sums of small integers: exact in fp16, and the average rounds as on the host */
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.compression = RH_COMPRESS_FP16;
  st = rh_allreduce(ctx, t[2], t[2], sizes[2], RH_FLOAT32, RH_AVERAGE, &o);
  CHECK(st == RH_OK, "fp16 average: %s", rh_status_string(st));
  CHECK(rh_tensor_read(ctx, host, t[2], sizes[2] * sizeof(float)) == RH_OK, "read back");
  for (size_t i = 0; i < sizes[2] && st == RH_OK; i++) {
    double sum = 0;
    for (int r = 0; r < n; r++) sum += value(RH_SUM, r + 2, i, n);
    float want = (float)(n * sum) * (float)(1.0 / n); /* the fp16 sum, then the 1/n postscale */
    CHECK(host[i] == want, "fp16 average [%zu]: %.9g, not %.9g", i, host[i], want);
  }
  /* broadcast from the last rank, then every rank's tensor 0 gathered */
  for (size_t i = 0; i < sizes[0]; i++) host[i] = (float)(me * 10000 + (int)i);
  rh_tensor_write(ctx, t[0], host, sizes[0] * sizeof(float));
  st = rh_broadcast(ctx, t[0], sizes[0], RH_FLOAT32, n - 1);
  CHECK(st == RH_OK, "tensor broadcast: %s", rh_status_string(st));
  rh_tensor_read(ctx, host, t[0], sizes[0] * sizeof(float));
  for (size_t i = 0; i < sizes[0] && st == RH_OK; i++)
    CHECK(host[i] == (float)((n - 1) * 10000 + (int)i), "tensor broadcast [%zu]: %g", i, host[i]);
  for (size_t i = 0; i < sizes[0]; i++) host[i] = (float)(me * 10000 + (int)i);
  rh_tensor_write(ctx, t[0], host, sizes[0] * sizeof(float));
  void *gathered = rh_tensor_alloc(ctx, (size_t)n * sizes[0] * sizeof(float));
  st = gathered ? rh_allgather(ctx, t[0], sizes[0], gathered, RH_FLOAT32) : RH_ERR_NOMEM;
  CHECK(st == RH_OK, "tensor allgather: %s", rh_status_string(st));
  if (st == RH_OK) rh_tensor_read(ctx, all, gathered, (size_t)n * sizes[0] * sizeof(float));
  for (int r = 0; r < n && st == RH_OK; r++)
    for (size_t i = 0; i < sizes[0]; i++)
      CHECK(all[(size_t)r * sizes[0] + i] == (float)(r * 10000 + (int)i), "tensor allgather %d [%zu]",
            r, i);
  /* tensors of two memories in one group are refused on every rank alike */
  void *mixed[2] = {t[1], host};
  size_t two[2] = {3, 3};
  st = rh_allreduce_group(ctx, mixed, two, 2, RH_FLOAT32, RH_SUM, NULL);
  CHECK(st == (rh_on_device(ctx) ? RH_ERR_INVALID : RH_OK), "mixed group: %s", rh_status_string(st));
  rh_tensor_free(ctx, gathered);
  for (int k = 0; k < K; k++) rh_tensor_free(ctx, t[k]);
  free(host);
  free(all);
}

/* The world ranks of this rank's group of `scope`, in group order, for shard groups of G
 * consecutive ranks (Horovod fills hosts in turn, so G = a node's ranks is its node): shard group
 * k holds ranks kG..kG+G-1, and the replica group of place p holds p, p+G, p+2G... */
static int group_members(const rh_ctx *ctx, rh_scope scope, int G, int *ranks, int *me) {
  int r = rh_rank(ctx), n = scope == RH_SCOPE_SHARD ? G : rh_size(ctx) / G;
  for (int i = 0; i < n; i++) ranks[i] = scope == RH_SCOPE_SHARD ? r / G * G + i : r % G + i * G;
  *me = scope == RH_SCOPE_SHARD ? r % G : r / G;
  return n;
}

/* Sum (or average) of element i over the group's members, each contributing value(). */
static double group_sum(const int *ranks, int n, size_t i, bool average) {
  double acc = 0;
  for (int k = 0; k < n; k++) acc += value(RH_SUM, ranks[k], i, 64);
  return average ? acc / n : acc;
}

/* The three scoped collectives over shard groups of G ranks and their replica groups. */
static void check_scoped_groups(rh_ctx *ctx, int G, bool formed, int *ranks, double *in,
                                double *out) {
  size_t count = 37;
  for (int scope = RH_SCOPE_SHARD; scope <= RH_SCOPE_REPLICA; scope++) {
    rh_status want = !formed ? RH_ERR_INVALID : rh_on_device(ctx) ? RH_ERR_UNSUPPORTED : RH_OK;
    int me = 0, n = formed ? group_members(ctx, (rh_scope)scope, G, ranks, &me) : 1;
    if (formed) {
      CHECK(rh_scope_size(ctx, (rh_scope)scope) == n && rh_scope_rank(ctx, (rh_scope)scope) == me,
            "scope %d of groups of %d: size %d rank %d", scope, G,
            rh_scope_size(ctx, (rh_scope)scope), rh_scope_rank(ctx, (rh_scope)scope));
    }
    for (size_t i = 0; i < count * (size_t)n; i++) in[i] = value(RH_SUM, rh_rank(ctx), i, 64);
    rh_request *req = NULL;
    rh_status st = rh_iallreduce_in(ctx, (rh_scope)scope, in, out, count, RH_FLOAT64, RH_AVERAGE,
                                    NULL, &req);
    if (st == RH_OK) st = rh_wait(req);
    CHECK(st == want, "scope %d allreduce: %s", scope, rh_status_string(st));
    for (size_t i = 0; i < count && st == RH_OK; i++)
      CHECK(fabs(out[i] - group_sum(ranks, n, i, true)) <= 1e-15 * fabs(out[i]),
            "scope %d allreduce [%zu]: %.17g", scope, i, out[i]);
    st = rh_ireduce_scatter_in(ctx, (rh_scope)scope, in, out, count, RH_FLOAT64, RH_SUM, NULL, NULL);
    CHECK(st == want, "scope %d reduce_scatter: %s", scope, rh_status_string(st));
    for (size_t i = 0; i < count && st == RH_OK; i++)
      CHECK(out[i] == group_sum(ranks, n, (size_t)me * count + i, false),
            "scope %d reduce_scatter [%zu]: %.17g", scope, i, out[i]);
    st = rh_iallgather_in(ctx, (rh_scope)scope, in, count, out, RH_FLOAT64, NULL);
    CHECK(st == want, "scope %d allgather: %s", scope, rh_status_string(st));
    for (int k = 0; k < n && st == RH_OK; k++)
      for (size_t i = 0; i < count; i++)
        CHECK(out[(size_t)k * count + i] == value(RH_SUM, ranks[k], i, 64),
              "scope %d allgather block %d [%zu]", scope, k, i);
    st = rh_iallgather_in(ctx, (rh_scope)scope, NULL, count, NULL, RH_FLOAT32, NULL);
    CHECK(st == want, "scope %d timing-only allgather: %s", scope, rh_status_string(st));
  }
}

/* Allreduce, reduce-scatter and allgather inside each shard group and across them: a node's
 * ranks and the ranks of a local rank across nodes by default, then groups of two nodes where
 * the nodes are even; each rank's result is its own group's, worked out here from the members'
 * world ranks.  Nodes of unequal sizes form no groups (invalid on every rank); a group that is
 * not whole nodes is refused; a GPU target runs the world's collectives alone. */
static void check_scoped(rh_ctx *ctx) {
  int L = rh_local_size(ctx), size = rh_size(ctx);
  bool uniform = size % L == 0 && rh_cross_size(ctx) * L == size;
  int *ranks = malloc((size_t)size * sizeof *ranks);
  double *in = malloc(37 * (size_t)size * sizeof *in), *out = malloc(37 * (size_t)size * sizeof *out);
  check_scoped_groups(ctx, L, uniform, ranks, in, out);
  if (uniform && L > 1)
    CHECK(rh_set_shard_group(ctx, L + 1) == RH_ERR_INVALID, "a shard group of %d ranks on nodes "
          "of %d taken", L + 1, L);
  if (uniform && (size / L) % 2 == 0) {
    CHECK(rh_set_shard_group(ctx, 2 * L) == RH_OK, "groups of two nodes refused");
    check_scoped_groups(ctx, 2 * L, true, ranks, in, out);
    CHECK(rh_set_shard_group(ctx, 0) == RH_OK, "groups of a node refused");
  }
  free(ranks);
  free(in);
  free(out);
}

int rh_test_all_collectives(rh_ctx *ctx, void *arg) {
  (void)arg;
  check_allreduce(ctx);
  check_scaling_and_compression(ctx);
  check_broadcast(ctx);
  check_allgather(ctx);
  check_reduce_scatter(ctx);
  check_scoped(ctx);
  check_barrier(ctx);
  check_nonblocking(ctx);
  check_tensors(ctx);
  check_ordering(ctx);
  check_many_requests(ctx);
  check_arguments(ctx);
  return failures ? 1 : 0;
}

