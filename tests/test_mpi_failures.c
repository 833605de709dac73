/*
 * test_mpi_failures.c: on real processes a hung or absent peer never hangs the job.  The last
 * rank hangs past the collective timeout: the others fail their allreduce with RH_ERR_TIMEOUT and
 * a stall report naming that rank and the tensor.  Or the last rank issues another collective:
 * every rank fails it at once with RH_ERR_MISMATCH naming both tensors.  The job ends normally.
 */
#include "harness.h"

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

/* The last rank hangs (sleeps past the timeout) while the others reduce "loss". */
static int hung_peer(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx), n = rh_size(ctx);
  if (me == n - 1) {
    struct timespec ts = {3, 0};
    nanosleep(&ts, NULL);
    return 0;
  }
  double v = me, t0 = rh_time(ctx);
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = "loss";
  rh_status st = rh_allreduce(ctx, &v, &v, 1, RH_FLOAT64, RH_AVERAGE, &o);
  double waited = rh_time(ctx) - t0;
  char want[64];
  snprintf(want, sizeof want, "ranks %d never issued it", n - 1);
  EXPECT(st == RH_ERR_TIMEOUT, "rank %d: a hung peer gave %s", me, rh_status_string(st));
  EXPECT(strstr(rh_last_error(ctx), "allreduce 'loss'") && strstr(rh_last_error(ctx), want),
         "rank %d: stall report: %s", me, rh_last_error(ctx));
  EXPECT(waited >= 2.0 && waited < 3.0, "rank %d: waited %.3f s for a 2 s timeout", me, waited);
  printf("rank %d after %.3f s: %s\n", me, waited, rh_last_error(ctx));
  return failures ? 1 : 0;
}

/* The last rank goes on to another collective: every rank learns which, at once. */
static int other_tensor(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx), n = rh_size(ctx);
  double v = me;
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = me == n - 1 ? "accuracy" : "loss";
  rh_status st = rh_allreduce(ctx, &v, &v, 1, RH_FLOAT64, RH_AVERAGE, &o);
  EXPECT(st == RH_ERR_MISMATCH, "rank %d: another tensor gave %s", me, rh_status_string(st));
  EXPECT(strstr(rh_last_error(ctx), "'accuracy'") && strstr(rh_last_error(ctx), "'loss'"),
         "rank %d: report: %s", me, rh_last_error(ctx));
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  int provided, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rh_cluster cl = rh_test_cluster(1, size, NULL);
  rh_settings s = rh_test_settings(2.0);
  rh_launch_config cfg = {.cluster = &cl, .settings = &s};
  rh_launch_result res;
  /* one job per process: the case comes from the command line */
  bool hung = argc > 1 && strcmp(argv[1], "hung") == 0;
  int rc = rh__launch(&cfg, hung ? hung_peer : other_tensor, NULL, &res);
  if (res.rank == 0)
    printf("mpi failures (%s): %d passed, %d failed\n", hung ? "hung peer" : "other tensor",
           rc == 0 ? 1 : 0, rc == 0 ? 0 : 1);
  free(cl.gpus_per_node);
  return rc;
}
