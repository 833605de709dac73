/*
 * run.c: `rehearsal run FILE [--out DIR]`.  Loads the scenario, replays its training on the
 * simulated cluster, prints a per-epoch table (gnuplot reads it as is: `#` header lines, a units
 * row) and a summary, and writes the same as summary.json under DIR.
 */
#include "commands.h"
#include "scenario.h"
#include "train.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The cost model's view of the job, from rank 0's point of view (for the summary). */
static void predict(const rh_scenario *sc, double bytes, const char **algo, double *seconds) {
  rh_topology topo;
  *algo = "?";
  *seconds = NAN;
  if (rh_topology_init(&topo, sc->cluster.gpus_per_node, sc->cluster.nodes) != RH_OK) return;
  rh_ctx ctx;
  rh_ctx_init(&ctx, 0, &topo, &sc->settings, &sc->cluster, NULL, NULL);
  rh_algo a = rh__choose_allreduce(&ctx, (size_t)bytes);
  *algo = a == RH_ALG_ALLREDUCE_HIERARCHICAL ? "hierarchical" : "ring";
  *seconds = topo.size > 1 ? rh__predict(&ctx, a, (size_t)bytes) : 0;
  rh_topology_free(&topo);
}

static int usage(void) {
  fprintf(stderr, "usage: rehearsal run FILE [--out DIR]\n");
  return 2;
}

int rh_cmd_run(int argc, char **argv) {
  const char *file = NULL, *out = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
    else if (argv[i][0] == '-') return usage();
    else if (!file) file = argv[i];
    else return usage();
  }
  if (!file) return usage();

  rh_scenario sc;
  char err[1024];
  if (rh_scenario_load(file, &sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  rh_run run;
  if (rh_run_init(&run, &sc) != RH_OK) {
    rh_scenario_free(&sc);
    return 1;
  }
  rh_launch_config cfg = {.cluster = &sc.cluster, .settings = &sc.settings};
  rh_launch_result res = {0};
  int rc = rh__launch(&cfg, rh_train_rank, &run, &res);

  int size = rh_scenario_size(&sc), epochs = (int)sc.recipe.epochs;
  double batch = sc.recipe.batch, global = batch * size;
  long steps = rh_scenario_steps_per_epoch(&sc);
  const char *algo;
  double predicted;
  predict(&sc, sc.model.parameters * 4, &algo, &predicted);

  json_t *root = json_object();
  json_object_set_new(root, "scenario", json_string(sc.name));
  json_object_set_new(root, "file", json_string(sc.path));
  json_t *jc = json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:s}", "ranks", size, "nodes",
                         sc.cluster.nodes, "gpu_tflops", sc.cluster.gpu_flops / 1e12,
                         "intra_GBps", sc.cluster.intra_bw / 1e9, "intra_latency_us",
                         sc.cluster.intra_lat * 1e6, "nics_per_node", sc.cluster.nics_per_node,
                         "nic_Gbps", sc.cluster.nic_bw * 8 / 1e9, "nic_latency_us",
                         sc.cluster.nic_lat * 1e6, "network_model",
                         sc.cluster.exact_network ? "exact" : "realistic");
  json_t *slots = json_array();
  for (int n = 0; n < sc.cluster.nodes; n++)
    json_array_append_new(slots, json_integer(sc.cluster.gpus_per_node[n]));
  json_object_set_new(jc, "gpus_per_node", slots);
  json_object_set_new(root, "cluster", jc);

  printf("# rehearsal run: %s (%s)\n", sc.name, sc.path);
  printf("# %d GPUs on %d node%s, %.4g TFLOP/s each; batch %.0f per worker, %.0f global; "
         "%ld steps per epoch\n",
         size, sc.cluster.nodes, sc.cluster.nodes > 1 ? "s" : "", sc.cluster.gpu_flops / 1e12,
         batch, global, steps);
  if (rc != 0) {
    const char *why = run.error != RH_OK ? rh_status_string(run.error) : "a rank did not finish";
    fprintf(stderr, "rehearsal: the run failed on rank %d: %s\n", run.error_rank, why);
    json_decref(root);
    rh_run_free(&run);
    rh_scenario_free(&sc);
    return 1;
  }

  printf("#%5s %7s %12s %12s %12s %10s %12s %8s\n", "epoch", "steps", "time", "compute",
         "comm_wait", "step", "throughput", "effic");
  printf("#%5s %7s %12s %12s %12s %10s %12s %8s\n", "", "", "(s)", "(s)", "(s)", "(ms)",
         "(samples/s)", "(%)");
  json_t *je = json_array();
  double total = 0, compute = 0, exposed = 0;
  for (int e = 0; e < epochs; e++) {
    rh_epoch_stats *s = &run.epochs[e];
    double t = s->end - s->start;
    double thr = s->steps * global / t, eff = 100 * s->compute / t;
    printf("%6d %7ld %12.6f %12.6f %12.6f %10.4f %12.1f %8.2f\n", e + 1, s->steps, t, s->compute,
           s->exposed_comm, 1e3 * t / s->steps, thr, eff);
    json_array_append_new(je, json_pack("{s:i, s:I, s:f, s:f, s:f, s:f, s:f}", "epoch", e + 1,
                                        "steps", (json_int_t)s->steps, "time_s", t, "compute_s",
                                        s->compute, "comm_wait_s", s->exposed_comm,
                                        "step_ms", 1e3 * t / s->steps, "samples_per_s", thr));
    total += t;
    compute += s->compute;
    exposed += s->exposed_comm;
  }
  json_object_set_new(root, "epochs", je);

  long all_steps = steps * epochs;
  double step_s = total / all_steps, compute_step = compute / all_steps;
  double thr = all_steps * global / total, ideal = size * batch / compute_step;
  printf("\nsummary\n");
  printf("  model        %s: %.0f parameters, %.1f MB of fp32 gradients, %.4g GFLOP/sample forward\n",
         sc.model.name ? sc.model.name : "(unnamed)", sc.model.parameters,
         run.gradient_bytes / 1e6, sc.model.forward_flops / 1e9);
  printf("  fusion       threshold %.4g MiB: %d bucket%s per step, largest %.1f MB; algorithm %s "
         "(model: %.4f ms for the whole gradient)\n",
         sc.settings.value[RH_SETTING_FUSION_THRESHOLD] / 1048576, run.buckets_per_step,
         run.buckets_per_step == 1 ? "" : "s", run.bucket_bytes_max / 1e6, algo, predicted * 1e3);
  printf("  time         %.6f s simulated over %ld steps: step %.4f ms = compute %.4f ms + "
         "waiting for gradients %.4f ms\n",
         total, all_steps, 1e3 * step_s, 1e3 * compute_step, 1e3 * exposed / all_steps);
  printf("  throughput   %.1f samples/s; %d GPUs without communication: %.1f; scaling "
         "efficiency %.2f%%\n",
         thr, size, ideal, 100 * thr / ideal);

  json_object_set_new(root, "summary",
                      json_pack("{s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:s, s:f}",
                                "time_s", total, "steps", (json_int_t)all_steps, "step_ms",
                                1e3 * step_s, "compute_ms", 1e3 * compute_step, "comm_wait_ms",
                                1e3 * exposed / all_steps, "samples_per_s", thr,
                                "ideal_samples_per_s", ideal, "scaling_efficiency", thr / ideal,
                                "buckets_per_step", run.buckets_per_step, "gradient_bytes",
                                run.gradient_bytes, "algorithm", algo, "predicted_allreduce_ms",
                                predicted * 1e3));
  json_object_set_new(root, "end_time_s", json_real(res.end_time));
  if (out) {
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text || rh_write_output(out, "summary.json", text) != 0) rc = 1;
    else printf("\nwrote %s/summary.json\n", out);
    free(text);
  }
  json_decref(root);
  rh_run_free(&run);
  rh_scenario_free(&sc);
  return rc;
}
