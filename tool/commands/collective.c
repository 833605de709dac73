/*
 * collective.c: `rehearsal collective FILE`, nccl-tests on the scenario's cluster.  It takes
 * nccl-tests' flags (-b/-e with -f or -i for the sizes, -n/-w, -c, -o, -d, -r, -g) beside its own
 * long ones, and prints nccl-tests' table: for each size an out-of-place and an in-place run, each
 * with its time, algbw, busbw and #wrong, then the algorithm the runtime's plan runs at that size.
 *
 * Every result carrying real numbers is checked against values each rank computes on its own
 * (#wrong); a size whose checked run would not fit the memory limit runs timing-only and shows
 * N/A.
 * Time is the slowest rank's, from a common start after a barrier, the mean over -n iterations
 * after -w untimed ones.  On real processes the defaults are nccl-tests' (-w 1 -n 20); on the
 * simulator a run is deterministic, so one iteration and no warm-up say all (-w 0 -n 1).
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "progress.h"
#include "scenario.h"
#include "internal.h"

#include <jansson.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { COLL_ALLREDUCE, COLL_BROADCAST, COLL_ALLGATHER, COLL_REDUCE_SCATTER } coll_kind;
static const char *const coll_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                         NULL};
static const rh_nccl_coll coll_models[] = {RH_NC_ALLREDUCE, RH_NC_BROADCAST, RH_NC_ALLGATHER,
                                           RH_NC_REDUCE_SCATTER};

/* A reduction: allreduce or reduce-scatter (an op, sums checked as allreduce's). */
static bool reduces(coll_kind k) { return k == COLL_ALLREDUCE || k == COLL_REDUCE_SCATTER; }
/* rh_op order; nccl-tests' names */
static const char *const op_names[] = {"sum", "avg", "min", "max", NULL};
/* rh_dtype order, with the names nccl-tests and NCCL give the same types */
static const struct { const char *name; rh_dtype type; } type_names[] = {
    {"float", RH_FLOAT32},  {"float32", RH_FLOAT32}, {"double", RH_FLOAT64},
    {"float64", RH_FLOAT64}, {"half", RH_FLOAT16},    {"float16", RH_FLOAT16},
    {"int32", RH_INT32},    {"int", RH_INT32},       {NULL, 0}};

enum { OUT_OF_PLACE, IN_PLACE, PLACES };
static const char *const place_names[PLACES] = {"out-of-place", "in-place"};

/* Rank 0's figures for one size. */
typedef struct result {
  double bytes;          /* the largest buffer, as nccl-tests prints it */
  double count;          /* elements per rank */
  double time[PLACES];   /* seconds per iteration, the slowest rank's */
  long wrong[PLACES];    /* -1: not checked (timing-only, or -c 0) */
  char algo[32];         /* what ran, by the plan the runtime follows ("ring/simple", ...) */
} result;

typedef struct bench {
  const rh_scenario *sc;
  coll_kind coll;
  rh_dtype dtype;
  rh_op op;
  int root;
  double *sizes; /* bytes asked for, in order */
  int nsizes;
  double mem_limit;
  int warmup, iters; /* < 0: the target's default */
  int checks;        /* checked runs per size and placement; 0: none */
  /* what rank 0 reports */
  int warmup_used, iters_used;
  int rows;
  result *res;
  rh_status error;
  rh_progress *progress;
  /* the simulator's ranks, actors of one process: each row's figures, handed to rank 0 */
  struct { double seconds[PLACES]; int32_t wrong[PLACES]; } *ranks;
  /* the expected allreduce results of one period (check()): they depend on the collective, op,
   * type and rank count alone, so they are worked out once per job, not once per rank and size
   * (ranks share this structure on the simulator) */
  double want[1024];
  size_t want_len;
  int want_n;
} bench;

/* The value rank r contributes at element i, in double; exact in every type for <= 1024 ranks. */
static double value(const bench *b, int r, size_t i, int n) {
  if (reduces(b->coll) && (b->op == RH_SUM || b->op == RH_AVERAGE))
    return 1 + (double)((r + (int)(i % 1024)) % 2);
  double v = (double)(r + 1) * (double)(i % 3 + 1);
  return (i % 2) ? v : -v - (double)(n - r);
}

static void store(void *buf, size_t i, rh_dtype t, double v) {
  switch (t) {
  case RH_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case RH_FLOAT64: ((double *)buf)[i] = v; break;
  case RH_FLOAT16: ((uint16_t *)buf)[i] = rh_float_to_half((float)v); break;
  case RH_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  default: break;
  }
}

static double load(const void *buf, size_t i, rh_dtype t) {
  switch (t) {
  case RH_FLOAT32: return ((const float *)buf)[i];
  case RH_FLOAT64: return ((const double *)buf)[i];
  case RH_FLOAT16: return rh_half_to_float(((const uint16_t *)buf)[i]);
  case RH_INT32: return ((const int32_t *)buf)[i];
  default: return NAN;
  }
}

/* The value as the type holds it (what the rank really sent). */
static double as_type(double v, rh_dtype t) {
  switch (t) {
  case RH_FLOAT32: return (float)v;
  case RH_FLOAT16: return rh_half_to_float(rh_float_to_half((float)v));
  case RH_INT32: return (int32_t)v;
  default: return v;
  }
}

/* Expected allreduce result at element i, folded in double over the values as sent. */
static double expected_reduce(const bench *b, size_t i, int n) {
  double acc = as_type(value(b, 0, i, n), b->dtype);
  for (int r = 1; r < n; r++) {
    double v = as_type(value(b, r, i, n), b->dtype);
    if (b->op == RH_MIN) acc = v < acc ? v : acc;
    else if (b->op == RH_MAX) acc = v > acc ? v : acc;
    else acc += v;
  }
  if (b->op == RH_AVERAGE) acc = b->dtype == RH_INT32 ? trunc(acc / n) : acc / n;
  return acc;
}

/* Tolerance: exact, but an average may differ from acc / n by the rounding of the type. */
static bool matches(const bench *b, double got, double want) {
  if (reduces(b->coll) && b->op == RH_AVERAGE && b->dtype != RH_INT32) {
    double ulp = b->dtype == RH_FLOAT16 ? 0x1p-10 : b->dtype == RH_FLOAT32 ? 0x1p-23 : 0x1p-52;
    return fabs(got - want) <= 2 * ulp * fabs(want);
  }
  return got == want;
}

/* count: the input's elements (a reduce-scatter's result is this rank's 1/n of them) */
static long check(bench *b, const rh_ctx *ctx, const void *out, size_t count) {
  int n = rh_size(ctx);
  long wrong = 0;
  if (reduces(b->coll)) {
    size_t first = 0;
    if (b->coll == COLL_REDUCE_SCATTER) {
      count /= (size_t)n;
      first = (size_t)rh_rank(ctx) * count;
    }
    /* value() depends on the element only through i % 1024 (sum, avg) or i % 6 (min, max):
     * the expected results of one period, folded over the ranks once, serve every element */
    size_t period = b->op == RH_SUM || b->op == RH_AVERAGE ? 1024 : 6;
    if (b->want_n != n || b->want_len != period) {
      for (size_t j = 0; j < period; j++) b->want[j] = expected_reduce(b, j, n);
      b->want_n = n;
      b->want_len = period;
    }
    for (size_t i = 0; i < count; i++)
      if (!matches(b, load(out, i, b->dtype), b->want[(first + i) % period])) wrong++;
  } else if (b->coll == COLL_BROADCAST) {
    for (size_t i = 0; i < count; i++)
      if (load(out, i, b->dtype) != as_type(value(b, b->root, i, n), b->dtype)) wrong++;
  } else {
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++)
        if (load(out, (size_t)r * count + i, b->dtype) != as_type(value(b, r, i, n), b->dtype))
          wrong++;
  }
  return wrong;
}

/* Only simulators model time (model_sync is theirs alone): there a run is deterministic. */
static bool simulated(const rh_ctx *ctx) {
  return !rh_on_device(ctx) && ctx->ops->model_sync != NULL;
}

/* One size's buffers on one rank.  in/out: host memory (this rank's input; the result read
 * back); tin/tout: tensor memory (the GPU's on the GPU target), what the collective runs on.
 * All NULL when the size runs timing-only. */
typedef struct buffers {
  size_t count, out_count, esz;
  void *in, *out, *tin, *tout;
} buffers;

/* Where a placement reads its input and writes its result, as nccl-tests places them.  The
 * runtime's broadcast works in one buffer (as Horovod's does): out of place, the root sends from
 * its input buffer and the others receive into their output buffer; in place, everyone's input
 * buffer is the one broadcast. */
typedef struct place {
  void *send, *recv;
  size_t recv_count;
} place;

static place place_of(const bench *b, int me, int where, const buffers *u) {
  bool in_place = where == IN_PLACE;
  switch (b->coll) {
  case COLL_ALLREDUCE: return (place){in_place ? u->tout : u->tin, u->tout, u->count};
  case COLL_ALLGATHER:
    return (place){in_place && u->tout ? (char *)u->tout + (size_t)me * u->count * u->esz : u->tin,
                   u->tout, u->out_count};
  case COLL_REDUCE_SCATTER: /* in place: the result in this rank's block of the input */
    return (place){u->tin, in_place && u->tin ? (char *)u->tin + (size_t)me * u->out_count * u->esz
                                              : u->tout,
                   u->out_count};
  default:
    return (place){u->tin, in_place || me == b->root ? u->tin : u->tout, u->count};
  }
}

/* Runs the collective once on a placement (timing-only when the buffers are NULL). */
static rh_status run_once(rh_ctx *ctx, const bench *b, const place *p, size_t count) {
  if (b->coll == COLL_ALLREDUCE) return rh_allreduce(ctx, p->send, p->recv, count, b->dtype, b->op, NULL);
  if (b->coll == COLL_BROADCAST) return rh_broadcast(ctx, p->recv, count, b->dtype, b->root);
  if (b->coll == COLL_REDUCE_SCATTER)
    return rh_reduce_scatter(ctx, p->send, p->recv, count / (size_t)rh_size(ctx), b->dtype, b->op,
                             NULL);
  return rh_allgather(ctx, p->send, count, p->recv, b->dtype);
}

/* Fills the result buffer with a value no collective gives (so a result that never arrived is
 * counted wrong), then the input with this rank's values; untimed. */
static rh_status prepare(rh_ctx *ctx, const bench *b, const buffers *u, const place *p) {
  if (!u->tin) return RH_OK;
  int me = rh_rank(ctx), n = rh_size(ctx);
  for (size_t i = 0; i < p->recv_count; i++) store(u->out, i, b->dtype, -7);
  for (size_t i = 0; i < u->count; i++) store(u->in, i, b->dtype, value(b, me, i, n));
  rh_status st = rh_tensor_write(ctx, p->recv, u->out, p->recv_count * u->esz);
  if (st == RH_OK) st = rh_tensor_write(ctx, p->send, u->in, u->count * u->esz);
  return st;
}

/* Whether repeated runs leave a placement's result as one run does (then the timed runs' own
 * result can be checked): everything but an in-place sum or average, which reduces its result
 * again on each run. */
static bool repeatable(const bench *b, int where) {
  return !(where == IN_PLACE && reduces(b->coll) && (b->op == RH_SUM || b->op == RH_AVERAGE));
}

/* One placement of one size: warm-up, timed iterations, then the checks.  *seconds: this rank's
 * mean per iteration; *wrong: wrong elements over the checked runs (-1: none checked). */
static rh_status measure(rh_ctx *ctx, bench *b, const buffers *u, int where, int warmup,
                         int iters, double *seconds, long *wrong) {
  place p = place_of(b, rh_rank(ctx), where, u);
  rh_status st = prepare(ctx, b, u, &p);
  for (int i = 0; i < warmup && st == RH_OK; i++) st = run_once(ctx, b, &p, u->count);
  if (warmup > 0 && st == RH_OK) st = prepare(ctx, b, u, &p); /* warm-ups may have changed it */
  if (st == RH_OK) st = rh_barrier(ctx);
  double t0 = rh_time(ctx);
  for (int i = 0; i < iters && st == RH_OK; i++) st = run_once(ctx, b, &p, u->count);
  *seconds = (rh_time(ctx) - t0) / iters;
  *wrong = -1;
  if (!u->tin) return st;
  for (int k = 0; k < b->checks && st == RH_OK; k++) {
    if (k > 0 || (iters > 1 && !repeatable(b, where))) { /* a fresh, untimed run to check */
      st = prepare(ctx, b, u, &p);
      if (st == RH_OK) st = run_once(ctx, b, &p, u->count);
    }
    if (st == RH_OK) st = rh_tensor_read(ctx, u->out, p.recv, p.recv_count * u->esz);
    if (st == RH_OK) *wrong = (*wrong < 0 ? 0 : *wrong) + check(b, ctx, u->out, u->count);
  }
  return st;
}

static void release(rh_ctx *ctx, buffers *u) {
  rh_tensor_free(ctx, u->tin);
  rh_tensor_free(ctx, u->tout);
  free(u->in);
  free(u->out);
}

/* What a checked size may take at its peak, for --mem-limit: a size is checked only when this
 * stays within the limit.  Each rank holds its input and its result twice, in host memory (where
 * the numbers are made and read back) and in tensor memory (where the collective runs).  On the
 * simulator, where all ranks are one process, at most once more in the messages it has in flight
 * (SimGrid carries a copy of each payload until it is received; a ring's scratch is one chunk),
 * and the estimate adds SIM_BASE and SIM_PER_RANK a rank for SimGrid, the platform and the
 * actors (measured timing-only: 40 MiB at 256 ranks, 58 MiB at 1,024).  Measured peaks of
 * checked allreduces of floats on the default scenario's nodes, against this estimate: 256 ranks
 * at 64 KiB 121 MiB (144 MiB), at 512 KiB 623 MiB (816 MiB); 1,024 ranks at 128 KiB 680 MiB
 * (864 MiB), at 256 KiB 1.21 GiB (1.59 GiB), at 512 KiB 2.34 GiB (3.09 GiB). */
enum { SIM_BASE = 32 << 20, SIM_PER_RANK = 64 << 10 };

static double peak_estimate(const buffers *u, int n, bool sim) {
  double copies = sim ? 3.0 : 2.0, each = (double)(u->count + u->out_count) * (double)u->esz;
  return copies * each * n + (sim ? SIM_BASE + (double)SIM_PER_RANK * n : 0);
}

/* The slowest rank's times and all ranks' wrong results, at rank 0.  On the simulator the ranks
 * are actors of one process: each leaves its figures in memory and rank 0 reads them after a
 * barrier, where an allreduce of these few bytes would be a ring of 2(p-1) steps of p messages
 * (hours at 16,384 ranks).  Elsewhere, two allreduces. */
static rh_status gather_row(rh_ctx *ctx, bench *b, bool sim, double *seconds, int32_t *w) {
  if (!sim || !b->ranks) {
    rh_status st = rh_allreduce(ctx, seconds, seconds, PLACES, RH_FLOAT64, RH_MAX, NULL);
    return st == RH_OK ? rh_allreduce(ctx, w, w, PLACES, RH_INT32, RH_SUM, NULL) : st;
  }
  int me = rh_rank(ctx), n = rh_size(ctx);
  for (int k = 0; k < PLACES; k++) {
    b->ranks[me].seconds[k] = seconds[k];
    b->ranks[me].wrong[k] = w[k];
  }
  rh_status st = rh_barrier(ctx);
  for (int r = 1; r < n && me == 0 && st == RH_OK; r++)
    for (int k = 0; k < PLACES; k++) {
      seconds[k] = fmax(seconds[k], b->ranks[r].seconds[k]);
      w[k] += b->ranks[r].wrong[k];
    }
  return st;
}

static int bench_rank(rh_ctx *ctx, void *arg) {
  bench *b = arg;
  int n = rh_size(ctx), me = rh_rank(ctx);
  bool sim = simulated(ctx);
  int warmup = b->warmup >= 0 ? b->warmup : sim ? 0 : 1;
  int iters = b->iters > 0 ? b->iters : sim ? 1 : 20;
  size_t esz = rh_dtype_size(b->dtype);
  rh_status st = RH_OK;
  for (int row = 0; row < b->nsizes && st == RH_OK; row++) {
    /* count: the input's elements (allgather: the output holds n of them; reduce-scatter: the
     * input holds n results, a whole number of elements each) */
    buffers u = {.count = (size_t)(b->sizes[row] / esz), .esz = esz};
    if (b->coll == COLL_ALLGATHER) u.count /= (size_t)n;
    if (b->coll == COLL_REDUCE_SCATTER) u.count -= u.count % (size_t)n;
    u.out_count = b->coll == COLL_ALLGATHER ? u.count * (size_t)n
                  : b->coll == COLL_REDUCE_SCATTER ? u.count / (size_t)n : u.count;
    size_t largest = u.count > u.out_count ? u.count : u.out_count;
    bool real = peak_estimate(&u, n, sim) <= b->mem_limit;
    if (real) {
      /* the numbers are made on the host and run from tensor memory (the GPU's, on the GPU
       * target), so what is timed is the collective alone */
      u.in = malloc(u.count * esz + 1);
      u.out = malloc(u.out_count * esz + 1);
      u.tin = rh_tensor_alloc(ctx, u.count * esz + 1);
      u.tout = rh_tensor_alloc(ctx, u.out_count * esz + 1);
      if (!u.in || !u.out || !u.tin || !u.tout) st = RH_ERR_NOMEM;
    }
    double seconds[PLACES] = {0, 0};
    long wrong[PLACES] = {-1, -1};
    for (int where = 0; where < PLACES && st == RH_OK; where++) {
      if (where == IN_PLACE && sim && !real) {
        /* timing-only, the two placements are the same call on no buffers: one run says both */
        seconds[IN_PLACE] = seconds[OUT_OF_PLACE];
        break;
      }
      st = measure(ctx, b, &u, where, warmup, iters, &seconds[where], &wrong[where]);
    }
    release(ctx, &u);
    /* the slowest rank's times, and the wrong results of all ranks */
    int32_t w[PLACES];
    for (int k = 0; k < PLACES; k++) w[k] = (int32_t)(wrong[k] < 0 ? 0 : wrong[k]);
    if (st == RH_OK) st = gather_row(ctx, b, sim, seconds, w);
    if (me == 0 && st == RH_OK) {
      result *r = &b->res[row];
      rh_plan plan = rh__plan(ctx, coll_models[b->coll], largest * esz);
      rh__plan_name(&plan, r->algo, sizeof r->algo);
      r->bytes = (double)(largest * esz);
      r->count = (double)(b->coll == COLL_REDUCE_SCATTER ? u.out_count : u.count);
      for (int k = 0; k < PLACES; k++) {
        r->time[k] = seconds[k];
        r->wrong[k] = wrong[k] < 0 ? -1 : w[k];
      }
      b->rows = row + 1;
      b->warmup_used = warmup;
      b->iters_used = iters;
      rh_progress_update(b->progress, row + 1, sim ? rh_time(ctx) : NAN);
    }
  }
  if (st != RH_OK && b->error == RH_OK) b->error = st;
  return st == RH_OK ? 0 : 1;
}

/* ---- the cluster, in words and in the figure busbw is read against ------------------------ */

/* "2 nodes x 4 GPUs, 20 GB/s intra-node, 25 Gb/s NIC" (one line, for tables and plot titles). */
static void cluster_line(const rh_cluster *cl, char *buf, size_t len) {
  size_t n = 0;
  bool even = true;
  for (int i = 1; i < cl->nodes; i++) even = even && cl->gpus_per_node[i] == cl->gpus_per_node[0];
#define ADD(...)                                                                                   \
  do {                                                                                             \
    if (n < len) n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                             \
  } while (0)
  if (even) {
    ADD("%d node%s x %d GPU%s", cl->nodes, cl->nodes == 1 ? "" : "s", cl->gpus_per_node[0],
        cl->gpus_per_node[0] == 1 ? "" : "s");
  } else {
    ADD("%d nodes (", cl->nodes);
    for (int i = 0; i < cl->nodes; i++) ADD("%s%d", i ? "+" : "", cl->gpus_per_node[i]);
    ADD(" GPUs)");
  }
  ADD(", %.4g GB/s intra-node", cl->intra_bw / 1e9);
  if (cl->nodes > 1 || cl->spares > 0) {
    int nics = cl->nics_per_node > 0 ? cl->nics_per_node : 1;
    if (nics > 1) ADD(", %d x %.4g Gb/s NICs", nics, cl->nic_bw * 8 / 1e9);
    else ADD(", %.4g Gb/s NIC", cl->nic_bw * 8 / 1e9);
  }
  if (cl->spares > 0) ADD(", %d spare node%s", cl->spares, cl->spares == 1 ? "" : "s");
  if (cl->fabric.topology != RH_TOPO_SWITCH && cl->nodes + cl->spares > 1)
    ADD(", %s of %d-node leaves at %.3g:1%s", cl->fabric.topology == RH_TOPO_RAIL ? "rails" : "fat-tree",
        cl->fabric.nodes_per_leaf, cl->fabric.oversubscription,
        cl->fabric.placement == RH_PLACE_SCATTERED ? ", scattered" : "");
#undef ADD
}

/* The bandwidth a busbw is read against: the bottleneck link of a ring over the job's ranks, by
 * the model that times the job; `what` names it.  Under the NCCL model it is the figure that
 * model prices (rh__nccl_bus_bound: a node's NVLink or PCIe under NCCL's ceiling inside a node;
 * across nodes the node's NICs at the transport's achievable rate, over any leaf
 * oversubscription).  Under the exact and realistic networks it is the links as the simulator
 * builds them, as decision.c charges a ring: the GPU's link to its node's switch (intra_bw, or
 * the node's shared backbone over its GPUs when that is smaller), and across nodes the node's
 * uplink, nic_bw x nics_per_node (under rails one NIC), which the ring crosses once each way, over
 * the oversubscription where its nodes are scattered over leaves.  busbw is the bus
 * bandwidth of a ring, so this is the figure a ring approaches at large sizes; Horovod's
 * hierarchical allreduce, NCCL's tree and NVLS (which reduces in the switch) move fewer bytes
 * over the bottleneck and may pass it. */
static double line_rate(const rh_cluster *cl, int ranks, char *what, size_t len) {
  int ppn = cl->nodes > 0 ? ranks / cl->nodes : ranks;
  if (ranks < 2) {
    snprintf(what, len, "none: one rank moves nothing");
    return 0;
  }
  if (cl->net_model == RH_NET_NCCL) {
    double bound = rh__nccl_bus_bound(cl, ranks, cl->nodes, RH_NA_RING);
    double intra = ppn > 1 ? rh__nccl_bus_bound(cl, ppn, 1, RH_NA_RING) : INFINITY;
    bool net = cl->nodes > 1 && bound < intra;
    snprintf(what, len, "%s (NCCL model)",
             net ? "the node's NICs at the transport's achievable rate" : "intra-node, per GPU");
    return bound;
  }
  double intra = cl->intra_bw;
  if (cl->intra_backbone_bw > 0 && ppn > 0) intra = fmin(intra, cl->intra_backbone_bw / ppn);
  if (cl->nodes < 2) {
    snprintf(what, len, "intra-node, per GPU");
    return intra;
  }
  /* a node's port: its NICs together, or under rails the one NIC of the next GPU's rail; where
   * the ring's neighbours sit on other leaves, each port's share of its leaf's uplinks */
  double nic = rh_fabric_port_bw(cl);
  bool rail = cl->fabric.topology == RH_TOPO_RAIL;
  bool spines = rh_fabric_leaves(cl) > 1 && cl->fabric.placement == RH_PLACE_SCATTERED &&
                cl->fabric.oversubscription > 1;
  if (spines) nic /= cl->fabric.oversubscription;
  snprintf(what, len, nic >= intra ? "intra-node, per GPU"
                      : spines     ? "a node's share of its leaf's uplinks"
                      : rail       ? "one NIC (a rail)"
                                   : "the node's NICs");
  return fmin(intra, nic);
}

/* ---- the command line ------------------------------------------------------------------------ */

static const char usage_text[] =
    "usage: rehearsal collective FILE [options]\n"
    "nccl-tests on the scenario's cluster: for each message size an out-of-place and an in-place\n"
    "run, with time, algbw, busbw and wrong elements (every result checked), and the algorithm.\n"
    "  -b, --minbytes SIZE     smallest size (default 8 B; also --min)\n"
    "  -e, --maxbytes SIZE     largest size (default 64 MiB; also --max)\n"
    "  -f, --stepfactor N      multiply the size by N each row (default 2)\n"
    "  -i, --stepbytes SIZE    add SIZE each row instead (give -f or -i, not both)\n"
    "  -n, --iters N           timed iterations, the time is their mean (default 20 on real\n"
    "                          GPUs and processes, 1 on the simulator, which is deterministic;\n"
    "                          at most 1000 there, 1000000 on real targets)\n"
    "  -w, --warmup_iters N    untimed iterations first (default 1 on real targets, 0 simulated;\n"
    "                          at most as -n)\n"
    "  -c, --check N           check the results of N runs per size (default 1; 0: no check)\n"
    "  -o, --op OP             sum, avg, min or max (default sum)\n"
    "  -d, --datatype TYPE     float, double, half or int32 (also float32, float64, float16,\n"
    "                          int; --dtype)\n"
    "  -r, --root R            the broadcast's root rank (default 0)\n"
    "  -g, --ngpus 1           GPUs per process: always 1 (one process per GPU)\n"
    "  -t, --nthreads 1        threads per process: always 1\n"
    "      --coll C            allreduce, broadcast, allgather or reduce_scatter\n"
    "                          (default allreduce)\n"
    "      --mem-limit SIZE    a size is checked only when its checked run's estimated peak over\n"
    "                          all ranks fits (input and result in host and tensor memory; on the\n"
    "                          simulator once more in flight, and 32 MiB + 64 KiB a rank);\n"
    "                          otherwise timing-only, #wrong N/A (default 2 GiB)\n"
    "      --out DIR           write DIR/collective.txt and DIR/collective.json\n"
    "      --set KEY=VALUE     override a scenario key (e.g. cluster.network.nic_Gbps=100)\n"
    "      --help, --version\n"
    "SIZE: 1 B to 1 TiB, in bytes, with K, M, G, T as nccl-tests (powers of 1024), or B, KiB,\n"
    "MiB, GiB, TiB, KB, MB, GB.\n"
    "Exit status: 0 every result right, 1 a wrong element or the job failed, 2 bad input.\n";

enum { OPT_COLL = 0x200, OPT_MEM_LIMIT, OPT_OUT };

typedef struct options {
  bench *b;
  double min_bytes, max_bytes, step_bytes;
  long factor; /* 0: not given */
  int ngpus, nthreads;
  const char *out;
  bool help;
} options;

/* A size as nccl-tests writes it (a number, then K, M, G or T in powers of 1024) or with the
 * units the scenario files use; whole bytes from 1 B to 1 TiB (what the settings take). */
static bool parse_size(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  bool ok = end != s && !errno && end[0] && (!end[1] || strcmp(end + 1, "iB") == 0) &&
            strchr("KkMmGgTt", end[0]);
  if (ok) { /* K as nccl-tests writes it, KiB as the scenarios do: the same */
    int shift = 10 * (int)(strchr("KMGT", toupper((unsigned char)end[0])) - "KMGT" + 1);
    *out = floor(ldexp(v, shift));
  } else {
    ok = rh_settings_parse(RH_SETTING_FUSION_THRESHOLD, s, out) == RH_OK;
    if (ok) *out = floor(*out);
  }
  if (ok && isfinite(*out) && *out >= 1 && *out <= RH_SETTING_MAX_BYTES) return true;
  rh_cli_why("a size is whole bytes from 1 B to 1 TiB: a number, with K, M, G or T as in "
             "nccl-tests (powers of 1024), or B, KiB, MiB, GiB, TiB, KB, MB, GB");
  return false;
}

#define BIG 1000000000L

/* A whole number from lo to hi; else says the range, and why `hi` when `why_hi` says. */
static bool parse_count(const char *s, long lo, long hi, const char *why_hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) {
    bool above = end != s && !*end && v > hi;
    rh_cli_why("expected a whole number from %ld to %ld%s%s", lo, hi,
               above && why_hi ? ": " : "", above && why_hi ? why_hi : "");
    return false;
  }
  *out = v;
  return true;
}

static int find(const char *const *names, const char *s) {
  for (int i = 0; names[i]; i++)
    if (strcasecmp(names[i], s) == 0) return i;
  return -1;
}

static int find_type(const char *s, rh_dtype *out) {
  for (int i = 0; type_names[i].name; i++)
    if (strcasecmp(type_names[i].name, s) == 0) {
      *out = type_names[i].type;
      return 1;
    }
  return 0;
}

/* A name not among `names`: says which are, and returns 2. */
static int refuse_name(const char *const *names) {
  char list[256] = "";
  for (int i = 0; names[i]; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
             i == 0 ? "" : !names[i + 1] ? " or " : ", ", names[i]);
  rh_cli_why("expected %s", list);
  return 2;
}

/* One flag (rh_cli_parse's callback): 0 to go on, 2 when its value is refused. */
static int option(int c, const char *v, void *arg) {
  options *o = arg;
  bench *b = o->b;
  long k;
  /* every iteration is simulated again, though the simulator's are all alike (-n 1 is exact):
   * 1000 of a large size already take minutes */
  bool sim = strcmp(rh_cli_target, "simulator") == 0;
  long iters_max = sim ? 1000 : 1000000;
  const char *iters_why = sim ? "the simulator is deterministic, so every iteration takes the "
                                "same time (-n 1 is exact) and each more is simulated again"
                              : NULL;
  switch (c) {
  case 'b': return parse_size(v, &o->min_bytes) ? 0 : 2;
  case 'e': return parse_size(v, &o->max_bytes) ? 0 : 2;
  case 'i': return parse_size(v, &o->step_bytes) ? 0 : 2;
  case 'f': return parse_count(v, 2, BIG, NULL, &o->factor) ? 0 : 2;
  case 'n': return parse_count(v, 1, iters_max, iters_why, &k) ? (b->iters = (int)k, 0) : 2;
  case 'w': return parse_count(v, 0, iters_max, iters_why, &k) ? (b->warmup = (int)k, 0) : 2;
  case 'c': return parse_count(v, 0, BIG, NULL, &k) ? (b->checks = (int)k, 0) : 2;
  case 'r': return parse_count(v, 0, BIG, NULL, &k) ? (b->root = (int)k, 0) : 2;
  case 'g': return parse_count(v, 0, BIG, NULL, &k) ? (o->ngpus = (int)k, 0) : 2;
  case 't': return parse_count(v, 0, BIG, NULL, &k) ? (o->nthreads = (int)k, 0) : 2;
  case 'o': return (k = find(op_names, v)) >= 0 ? (b->op = (rh_op)k, 0) : refuse_name(op_names);
  case 'd':
    if (find_type(v, &b->dtype)) return 0;
    rh_cli_why("expected float, double, half or int32 (or float32, float64, float16, int)");
    return 2;
  case 'h': o->help = true; return 0;
  case OPT_COLL:
    return (k = find(coll_names, v)) >= 0 ? (b->coll = (coll_kind)k, 0) : refuse_name(coll_names);
  case OPT_MEM_LIMIT: return parse_size(v, &b->mem_limit) ? 0 : 2;
  case OPT_OUT: o->out = v; return 0;
  default: return 2;
  }
}

/* The sizes, as nccl-tests steps them: from -b, times -f or plus -i, up to -e. */
#define MAX_SIZES 10000
static int size_list(const options *o, double **sizes) {
  int n = 0;
  double *list = malloc(MAX_SIZES * sizeof *list);
  if (!list) return -1;
  for (double s = o->min_bytes; s <= o->max_bytes && n < MAX_SIZES;
       s = o->factor ? s * (double)o->factor : s + o->step_bytes)
    list[n++] = s;
  *sizes = list;
  return n;
}

/* "8 B", "64 MiB": a size in its largest whole binary unit. */
static void size_text(double bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && fmod(bytes, 1024) == 0) bytes /= 1024, u++;
  snprintf(buf, len, "%.0f %s", bytes, units[u]);
}

/* ---- output ------------------------------------------------------------------------------- */

static void wrong_text(long wrong, char *buf, size_t len) {
  if (wrong < 0) snprintf(buf, len, "N/A");
  else snprintf(buf, len, "%ld", wrong);
}

/* The table (nccl-tests' columns, '#' header lines for gnuplot) and its JSON rows; returns the
 * wrong elements over all rows. */
static long report(const bench *b, const options *o, int n, const char *cluster, double rate,
                   const char *rate_what, const char *target, char **table_out, json_t *jrows,
                   double *avg_busbw) {
  const rh_scenario *sc = b->sc;
  double factor = rh__nccl_bus_factor(coll_models[b->coll], n);
  size_t cap = 4096 + (size_t)b->rows * 256, len = 0;
  char *table = malloc(cap);
  if (!table) return -1;
#define EMIT(...) len += (size_t)snprintf(table + len, cap - len, __VA_ARGS__)
  char lo[32], hi[32], step[48];
  size_text(o->min_bytes, lo, sizeof lo);
  size_text(o->max_bytes, hi, sizeof hi);
  if (o->factor) snprintf(step, sizeof step, "x%ld", o->factor);
  else size_text(o->step_bytes, step + 1, sizeof step - 1), step[0] = '+';
  EMIT("# rehearsal collective: %s on %s: %d ranks on %d node%s, network model %s\n",
       coll_names[b->coll], sc->name, n, sc->cluster.nodes, sc->cluster.nodes > 1 ? "s" : "",
       rh_net_model_names[sc->cluster.net_model]);
  if (rate > 0) EMIT("# cluster: %s; line rate %.4g GB/s (%s)\n", cluster, rate / 1e9, rate_what);
  else EMIT("# cluster: %s\n", cluster);
  EMIT("# target %s; sizes %s to %s by %s; warmup iters: %d iters: %d check: %d\n", target, lo,
       hi, step, b->warmup_used, b->iters_used, b->checks);
  /* the placements' names centred over their four columns, as nccl-tests prints them */
  char over[PLACES][48];
  for (int k = 0; k < PLACES; k++) {
    int w = (int)strlen(place_names[k]), pad = (40 - w) / 2;
    snprintf(over[k], sizeof over[k], "%*s%s%*s", pad, "", place_names[k],
             k == IN_PLACE ? 0 : 40 - w - pad, "");
  }
  EMIT("#%49s %s %s\n", "", over[OUT_OF_PLACE], over[IN_PLACE]);
  EMIT("#%14s %12s %7s %6s %5s %12s %9s %9s %7s %12s %9s %9s %7s  %s\n", "size", "count", "type",
       "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
       "algorithm");
  EMIT("#%14s %12s %7s %6s %5s %12s %9s %9s %7s %12s %9s %9s\n", "(B)", "(elements)", "", "",
       "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)");
  long total_wrong = 0;
  double busbw_sum = 0;
  for (int r = 0; r < b->rows; r++) {
    const result *res = &b->res[r];
    double algbw[PLACES], busbw[PLACES];
    char wrong[PLACES][24];
    for (int k = 0; k < PLACES; k++) {
      algbw[k] = res->time[k] > 0 ? res->bytes / res->time[k] / 1e9 : 0;
      busbw[k] = algbw[k] * factor;
      wrong_text(res->wrong[k], wrong[k], sizeof wrong[k]);
      if (res->wrong[k] > 0) total_wrong += res->wrong[k];
      busbw_sum += busbw[k] / PLACES; /* nccl-tests averages both placements */
    }
    EMIT("%15.0f %12.0f %7s %6s %5d %12.3f %9.3f %9.3f %7s %12.3f %9.3f %9.3f %7s  %s\n",
         res->bytes, res->count, rh_dtype_name(b->dtype),
         reduces(b->coll) ? rh_op_name(b->op) : "none",
         b->coll == COLL_BROADCAST ? b->root : -1, res->time[0] * 1e6, algbw[0], busbw[0],
         wrong[0], res->time[1] * 1e6, algbw[1], busbw[1], wrong[1], res->algo);
    json_array_append_new(
        jrows, json_pack("{s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:I, s:s}", "bytes",
                         res->bytes, "count", res->count, "time_us", res->time[0] * 1e6,
                         "algbw_GBps", algbw[0], "busbw_GBps", busbw[0], "wrong",
                         (json_int_t)res->wrong[0], "in_place_time_us", res->time[1] * 1e6,
                         "in_place_algbw_GBps", algbw[1], "in_place_busbw_GBps", busbw[1],
                         "in_place_wrong", (json_int_t)res->wrong[1], "algorithm", res->algo));
  }
  *avg_busbw = b->rows ? busbw_sum / b->rows : 0;
  EMIT("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  EMIT("# Avg bus bandwidth    : %.3f\n", *avg_busbw);
#undef EMIT
  *table_out = table;
  return total_wrong;
}

static int write_outputs(const bench *b, const char *dir, const char *table, json_t *jrows,
                         int n, const char *cluster, double rate, const char *rate_what,
                         const char *target, long wrong, double avg_busbw) {
  const rh_scenario *sc = b->sc;
  json_t *root = json_pack(
      "{s:s, s:o, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:s, s:f, s:s, s:i, s:i, s:i, s:I, "
      "s:f, s:O}",
      "scenario", sc->name, "file", rh_json_text(sc->path ? sc->path : ""), "collective", coll_names[b->coll],
      "type", rh_dtype_name(b->dtype), "op", rh_op_name(b->op), "ranks", n, "nodes",
      sc->cluster.nodes, "cluster", cluster, "network_model",
      rh_net_model_names[sc->cluster.net_model], "line_rate_GBps", rate > 0 ? json_real(rate / 1e9) : json_null(), "line_rate_link",
      rate_what, "busbw_factor", rh__nccl_bus_factor(coll_models[b->coll], n), "target", target,
      "warmup_iters", b->warmup_used, "iters", b->iters_used, "check", b->checks,
      "out_of_bounds", (json_int_t)wrong, "avg_busbw_GBps", avg_busbw, "rows", jrows);
  char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) : NULL;
  const char *names[] = {"collective.txt", "collective.json"}, *texts[] = {table, text};
  int rc = !text || rh_write_outputs(dir, 2, names, texts);
  free(text);
  json_decref(root);
  return rc;
}

/* Checks what the flags say together; returns 0, or 2 after naming the problem. */
static int check_options(options *o) {
  static const char cmd[] = "collective";
  if (o->ngpus != 1)
    return rh_cli_error(cmd, "-g/--ngpus %d: each rank is one process with one GPU here, as under "
                             "mpirun -np N with -g 1; give -g 1 or leave it out", o->ngpus);
  if (o->nthreads != 1)
    return rh_cli_error(cmd, "-t/--nthreads %d: each rank is one process with one thread here; "
                             "give -t 1 or leave it out", o->nthreads);
  if (o->factor && o->step_bytes > 0)
    return rh_cli_error(cmd, "-f/--stepfactor and -i/--stepbytes both given: the sizes grow by a "
                             "factor or by a step, give one");
  if (!o->factor && !(o->step_bytes > 0)) o->factor = 2;
  if (o->min_bytes > o->max_bytes)
    return rh_cli_error(cmd, "-b/--minbytes %.0f is above -e/--maxbytes %.0f", o->min_bytes,
                        o->max_bytes);
  double rows = o->factor ? floor(log((o->max_bytes / o->min_bytes) * (1 + 1e-12)) /
                                  log((double)o->factor)) + 1
                          : floor((o->max_bytes - o->min_bytes) / o->step_bytes) + 1;
  if (rows > MAX_SIZES)
    return rh_cli_error(cmd, "-b, -e and -i give %.0f sizes; at most %d in one run", rows,
                        MAX_SIZES);
  return 0;
}

/* The command line into b and o; *file: the scenario.  Returns -1 to go on, or the exit code. */
static int parse(int argc, char **argv, options *o, rh_scenario_opts *sopts, const char **file) {
  static const struct option longopts[] = {
      {"minbytes", required_argument, NULL, 'b'},   {"min", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},   {"max", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'}, {"stepbytes", required_argument, NULL, 'i'},
      {"iters", required_argument, NULL, 'n'},      {"warmup_iters", required_argument, NULL, 'w'},
      {"check", required_argument, NULL, 'c'},      {"op", required_argument, NULL, 'o'},
      {"datatype", required_argument, NULL, 'd'},   {"dtype", required_argument, NULL, 'd'},
      {"root", required_argument, NULL, 'r'},       {"ngpus", required_argument, NULL, 'g'},
      {"nthreads", required_argument, NULL, 't'},   {"coll", required_argument, NULL, OPT_COLL},
      {"mem-limit", required_argument, NULL, OPT_MEM_LIMIT},
      {"out", required_argument, NULL, OPT_OUT},    {NULL, 0, NULL, 0}};
  int first = argc;
  int rc = rh_cli_parse("collective", usage_text, argc, argv, "b:e:f:i:n:w:c:o:d:r:g:t:h",
                        longopts, option, o, sopts, &first);
  if (rc >= 0) return rc;
  if (o->help) { /* -h, as nccl-tests takes it */
    fputs(usage_text, stdout);
    return 0;
  }
  if ((rc = check_options(o)) != 0) return rc;
  if (argc - first != 1)
    return argc == first ? rh_cli_error("collective", "a scenario FILE is needed")
                         : rh_cli_error("collective", "one scenario FILE, not %d", argc - first);
  *file = argv[first];
  return -1;
}

int rh_cmd_collective(int argc, char **argv) {
  bench b = {.coll = COLL_ALLREDUCE, .dtype = RH_FLOAT32, .op = RH_SUM, .mem_limit = 2.0 * 1073741824,
             .warmup = -1, .iters = -1, .checks = 1, .error = RH_OK};
  options o = {.b = &b, .min_bytes = 8, .max_bytes = 64.0 * 1048576, .ngpus = 1, .nthreads = 1};
  rh_scenario_opts sopts = {.cluster_only = true};
  const char *file = NULL;
  int rc = parse(argc, argv, &o, &sopts, &file);
  if (rc < 0 && o.out && rh_output_dir_ok(o.out) != 0) rc = 2;
  if (rc >= 0) {
    rh_cli_opts_free(&sopts);
    return rc;
  }

  rh_scenario sc;
  char err[1024];
  rh_status lst = rh_scenario_load_opts(file, &sopts, &sc, err, sizeof err);
  rh_cli_opts_free(&sopts);
  if (lst != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  int n = rh_scenario_size(&sc);
  if (b.root >= n) {
    fprintf(stderr, "rehearsal collective: --root %d is not a rank of %d\n", b.root, n);
    rh_scenario_free(&sc);
    return 2;
  }
  b.sc = &sc;
  b.nsizes = size_list(&o, &b.sizes);
  b.res = calloc(b.nsizes > 0 ? (size_t)b.nsizes : 1, sizeof *b.res);
  bool on_simulator = strcmp(rh_cli_target, "simulator") == 0;
  if (on_simulator) b.ranks = calloc((size_t)n, sizeof *b.ranks);
  if (b.nsizes < 0 || !b.res || (on_simulator && !b.ranks)) {
    free(b.ranks);
    free(b.sizes);
    free(b.res);
    rh_scenario_free(&sc);
    return 1;
  }
  rh_cli_platform_note(&sc);
  b.progress = rh_progress_start("collective", b.nsizes, "sizes");
  rh_launch_config cfg = {.cluster = &sc.cluster, .settings = &sc.settings};
  rh_launch_result lres = {0};
  rc = rh__launch(&cfg, bench_rank, &b, &lres);
  rh_progress_end(b.progress);
  rh__joblog_free(lres.log); /* the tables need none of what happened */
  free(lres.log);
  if (lres.rank > 0 || rc == 2 || rc == 77) { /* under a launcher rank 0 reports */
    free(b.sizes);
    free(b.ranks);
    free(b.res);
    rh_scenario_free(&sc);
    return rc;
  }

  char cluster[256], rate_what[128];
  cluster_line(&sc.cluster, cluster, sizeof cluster);
  double rate = line_rate(&sc.cluster, n, rate_what, sizeof rate_what);
  const char *target = lres.target ? lres.target : "simulator";
  char *table = NULL;
  double avg_busbw = 0;
  json_t *jrows = json_array();
  long wrong = report(&b, &o, n, cluster, rate, rate_what, target, &table, jrows, &avg_busbw);
  if (!table) {
    json_decref(jrows);
    rc = 1;
  } else {
    fputs(table, stdout);
    if (rc != 0 || b.error != RH_OK) {
      fprintf(stderr, "rehearsal collective: failed: %s\n",
              rh_status_string(b.error != RH_OK ? b.error : RH_ERR_BACKEND));
      rc = 1;
    } else if (wrong) {
      rc = 1;
    }
    if (o.out && rc == 0 &&
        write_outputs(&b, o.out, table, jrows, n, cluster, rate, rate_what, target, wrong,
                      avg_busbw))
      rc = 1;
    json_decref(jrows);
  }
  free(table);
  free(b.sizes);
  free(b.ranks);
  free(b.res);
  rh_scenario_free(&sc);
  return rc;
}
