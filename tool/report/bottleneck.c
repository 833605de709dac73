/*
 * bottleneck.c: the answer to "is the network the bottleneck?" for a finished run.
 *
 * - Where a step goes: compute, and the wait for gradients after backward, bucket by bucket
 *   (rank 0's last full step: the time each bucket's wait blocked).
 * - The busiest links: what each kind of link carries per step at least (an allreduce of S bytes
 *   over k parties sends 2(k-1)/k S through each party's link, whatever the algorithm), over the
 *   step's time and the link's line rate.
 * - What if: an infinitely fast network leaves compute alone; no overlap adds every bucket's
 *   allreduce to compute; twice the network (the NIC's, or NVLink's on one node) keeps the step's
 *   buckets and when backward closed them, and replays their allreduces one after another (as a
 *   worker's background runner does) at the cost model's times on the doubled link: the wait it
 *   saves against the same replay on today's link comes off the simulated step.  Nothing is
 *   simulated again, so the answer costs microseconds whatever the job's size.
 */
#include "bottleneck.h"
#include "memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The doubled link as an override, and the words for it. */
static void doubled(const rh_scenario *sc, char *set, size_t len, const char **what) {
  if (sc->cluster.nodes > 1) {
    snprintf(set, len, "cluster.network.nic_Gbps=%.17g", 2 * sc->cluster.nic_bw * 8 / 1e9);
    *what = "2x NIC bandwidth";
  } else {
    snprintf(set, len, "cluster.intra.bandwidth_GBps=%.17g", 2 * sc->cluster.intra_bw / 1e9);
    *what = "2x NVLink bandwidth";
  }
}

/* The wait after backward of rank 0's last full step, replayed: each bucket's allreduce starts
 * when backward closed it or when the one before ended, at the cost model's time for `sc`'s
 * cluster.  NAN when the cluster has no cost model's view or the step's buckets were not kept. */
double rh_negotiation_seconds(const rh_scenario *sc, rh_scenario_view *view) {
  if (sc->model.kind != 0 || sc->recipe.framework != 0 || view->topo.size <= 1) return 0;
  return rh__plan(&view->ctx, RH_NC_ALLREDUCE, (size_t)view->topo.size * sizeof(float)).seconds;
}

static double replayed_wait(const rh_scenario *sc, const rh_train_result *res) {
  if (res->buckets_per_step <= 0 || !res->bucket_ready) return NAN;
  rh_scenario_view view;
  if (rh_scenario_view_init(sc, &view) != RH_OK) return NAN;
  double end = 0, negotiation = rh_negotiation_seconds(sc, &view);
  for (int i = 0; i < res->buckets_per_step; i++) {
    rh_plan plan = rh__plan(&view.ctx, RH_NC_ALLREDUCE, (size_t)res->bucket_bytes[i]);
    end = fmax(end, res->bucket_ready[i]) + negotiation + plan.seconds;
  }
  rh_topology_free(&view.topo);
  return fmax(0, end - res->backward);
}

/* The step on twice the network, in seconds (see the top of this file), or NAN. */
static double doubled_step(const rh_scenario *sc, const rh_train_result *res, const rh_step_split *sp) {
  rh_scenario twice = *sc; /* read only: its pointers stay sc's */
  if (sc->cluster.nodes > 1) twice.cluster.nic_bw *= 2;
  else twice.cluster.intra_bw *= 2;
  double now = replayed_wait(sc, res), then = replayed_wait(&twice, res);
  if (isnan(now) || isnan(then)) return NAN;
  return sp->compute + sp->framework + sp->slowest + fmax(0, sp->wait - (now - then));
}

/* One link kind's load: bytes per step through each, and its share of the line rate. */
static json_t *link_load(FILE *f, const char *name, double bytes, double bw, double step) {
  double util = bw > 0 && step > 0 ? bytes / (bw * step) : NAN;
  fprintf(f, "  link         %-28s %9.4g MB per step each way, %5.1f%% of %.4g GB/s over the step\n",
          name, bytes / 1e6, 100 * util, bw / 1e9);
  return json_pack("{s:s, s:f, s:f, s:f}", "link", name, "bytes_per_step", bytes, "line_rate_GBps",
                   bw / 1e9, "utilisation", util);
}

int rh_report_top(const double *v, int n, int k, int *top) {
  if (n <= k + 1) {
    for (int i = 0; i < n; i++) top[i] = i;
    return n;
  }
  int m = 0;
  for (int i = 0; i < n; i++) {
    /* its rank among the others: how many are larger, or as large and before it */
    int above = 0;
    for (int j = 0; j < n && above < k; j++) above += v[j] > v[i] || (v[j] == v[i] && j < i);
    if (above < k) top[m++] = i;
  }
  return m;
}

/* The exposed wait of each bucket: the largest few on the console, all in the JSON. */
static void exposed_buckets(FILE *f, json_t *jb, const rh_train_result *res) {
  int n = res->bucket_wait ? res->buckets_per_step : 0, top[RH_REPORT_TOP + 1];
  json_t *jw = json_array();
  double all = 0;
  for (int i = 0; i < n; i++) {
    all += res->bucket_wait[i];
    json_array_append_new(jw, json_pack("{s:i, s:f, s:f}", "bucket", i, "bytes", res->bucket_bytes[i],
                                        "exposed_ms", 1e3 * res->bucket_wait[i]));
  }
  int shown = n > 0 ? rh_report_top(res->bucket_wait, n, RH_REPORT_TOP, top) : 0;
  double rest = all;
  for (int t = 0; t < shown; t++) {
    int i = top[t];
    if (!(res->bucket_wait[i] > 0) && shown < n) { /* a bucket that kept the step no time */
      top[t] = -1;
      continue;
    }
    rest -= res->bucket_wait[i];
    fprintf(f, "  exposed      bucket %d (%.4g MB): %.4f ms\n", i, res->bucket_bytes[i] / 1e6,
            1e3 * res->bucket_wait[i]);
  }
  int listed = 0;
  for (int t = 0; t < shown; t++) listed += top[t] >= 0;
  if (listed < n)
    fprintf(f, "  exposed      %d more bucket%s: %.4f ms together; %.4f ms in all (every bucket in "
               "summary.json, bottleneck.exposed_by_bucket)\n", n - listed, n - listed == 1 ? "" : "s",
            1e3 * fmax(rest, 0), 1e3 * all);
  json_object_set_new(jb, "exposed_by_bucket", jw);
}

/* A sharded step's collectives of the state: how many, their bytes, what the step waited. */
static void sharded_collectives(FILE *f, json_t *jb, const rh_scenario *sc,
                                const rh_train_result *res) {
  if (res->shard_gathers + res->shard_scatters == 0) return;
  int stage = sc->recipe.state_sharding;
  const char *scatter = sc->recipe.reduce_scatter ? "reduce-scatters" : "allreduces";
  char across[160] = "";
  if (res->shard_allreduces > 0)
    snprintf(across, sizeof across, ", then %d allreduces of the shards across groups (%.4g GB)",
             res->shard_allreduces, res->shard_allreduce_bytes / 1e9);
  fprintf(f, "  sharded      %s (%s): %d allgathers of the parameters (%.4g GB) and %d %s of the "
          "gradients (%.4g GB)%s a step; waited %.4f ms for allgathers, %.4f ms for %s\n",
          rh_sharding_names[stage], rh_sharding_titles[stage], res->shard_gathers,
          res->shard_gather_bytes / 1e9, res->shard_scatters, scatter,
          res->shard_scatter_bytes / 1e9, across, 1e3 * res->shard_gather_wait,
          1e3 * res->shard_scatter_wait, res->shard_allreduces > 0 ? "the gradients' collectives" : scatter);
  json_t *js = json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:I}", "sharding",
                         rh_sharding_names[stage], "allgathers", res->shard_gathers,
                         "reduce_scatters", res->shard_scatters, "allgather_GB",
                         res->shard_gather_bytes / 1e9, "reduce_scatter_GB",
                         res->shard_scatter_bytes / 1e9, "allgather_wait_ms",
                         1e3 * res->shard_gather_wait, "reduce_scatter_wait_ms",
                         1e3 * res->shard_scatter_wait, "worked_out_steps",
                         (json_int_t)res->shard_worked_out);
  json_object_set_new(js, "allreduces_across_groups", json_integer(res->shard_allreduces));
  json_object_set_new(js, "allreduce_GB", json_real(res->shard_allreduce_bytes / 1e9));
  json_object_set_new(jb, "sharded", js);
}

/* The sharding what-ifs: a line each, and what_if.sharding in the JSON. */
static void sharding_alternatives(FILE *f, json_t *jwi, const rh_sharding_alts *alts, double step) {
  json_t *list = json_array();
  for (int k = 0; alts && k < alts->n; k++) {
    const rh_sharding_alt *a = &alts->alt[k];
    fprintf(f, "%s%-10s %s (%s): ", k ? "               sharding " : "  what if      sharding ",
            rh_sharding_names[a->sharding], a->relation, rh_sharding_titles[a->sharding]);
    if (!(a->step > 0)) {
      fprintf(f, "the run gave no step (%s)\n", a->ran ? "no summary" : "it failed");
      continue;
    }
    bool fits = !(a->capacity > 0) || a->memory <= a->capacity;
    fprintf(f, "step %.4f ms (%+.1f%%)", 1e3 * a->step, 100 * (a->step - step) / step);
    if (a->tokens_per_s > 0) fprintf(f, ", %.4g tokens/s", a->tokens_per_s);
    fprintf(f, ", %.2f GB per GPU%s\n", a->memory / 1e9,
            a->capacity > 0 ? (fits ? " (fits)" : " (does NOT fit)") : "");
    json_t *rec = json_pack("{s:s, s:s, s:f, s:f, s:b}", "sharding", rh_sharding_names[a->sharding],
                            "relation", a->relation, "step_ms", 1e3 * a->step, "memory_GB",
                            a->memory / 1e9, "fits", fits);
    if (a->tokens_per_s > 0) json_object_set_new(rec, "tokens_per_s", json_real(a->tokens_per_s));
    json_array_append_new(list, rec);
  }
  if (alts && alts->n > 0) json_object_set_new(jwi, "sharding", list);
  else json_decref(list);
}

void rh_bottleneck_report(FILE *f, json_t *root, const rh_scenario *sc, const rh_train_result *res,
                          const rh_step_split *sp, bool what_if, const rh_sharding_alts *alts) {
  json_t *jb = json_object();
  fprintf(f, "\nbottleneck\n");
  double exposed_share = sp->step > 0 ? sp->wait / sp->step : 0;
  double lost = sp->framework + sp->slowest + sp->input;
  fprintf(f, "  step         %.4f ms: compute %.4f ms (%.1f%%), ", 1e3 * sp->step, 1e3 * sp->compute,
          100 * sp->compute / sp->step);
  if (sp->framework > 0)
    fprintf(f, "framework %.4f ms (%.1f%%), ", 1e3 * sp->framework, 100 * sp->framework / sp->step);
  if (sp->slowest > 0)
    fprintf(f, "waiting for the slowest rank %.4f ms (%.1f%%), ", 1e3 * sp->slowest,
            100 * sp->slowest / sp->step);
  if (sp->input > 0)
    fprintf(f, "waiting for input %.4f ms (%.1f%%), ", 1e3 * sp->input, 100 * sp->input / sp->step);
  bool sharded = res->shard_gathers + res->shard_scatters > 0;
  fprintf(f, "waiting for %s %.4f ms (%.1f%%)\n", sharded ? "the state's collectives" : "gradients",
          1e3 * sp->wait, 100 * exposed_share);
  json_object_set_new(jb, "input_ms", json_real(1e3 * sp->input));
  json_object_set_new(jb, "step_ms", json_real(1e3 * sp->step));
  json_object_set_new(jb, "compute_ms", json_real(1e3 * sp->compute));
  json_object_set_new(jb, "framework_ms", json_real(1e3 * sp->framework));
  json_object_set_new(jb, "slowest_rank_ms", json_real(1e3 * sp->slowest));
  json_object_set_new(jb, "waiting_for_gradients_ms", json_real(1e3 * sp->wait));
  exposed_buckets(f, jb, res);
  sharded_collectives(f, jb, sc, res);

  /* the least each link carries: 2(k-1)/k of every bucket, k the parties on that link (a
   * sharded step's allgathers and reduce-scatters (k-1)/k each) */
  double grads = 0;
  for (int i = 0; i < res->buckets_per_step && res->bucket_bytes; i++) grads += res->bucket_bytes[i];
  if (res->shard_gathers + res->shard_scatters > 0)
    grads = (res->shard_gather_bytes + res->shard_scatter_bytes) / 2;
  const rh_cluster *cl = &sc->cluster;
  int nodes = cl->nodes, local = cl->gpus_per_node[0];
  json_t *jl = json_array();
  double busiest = 0;
  if (local > 1) {
    double u = 2.0 * (local - 1) / local * grads;
    json_array_append_new(jl, link_load(f, "NVLink/PCIe of each GPU", u, cl->intra_bw, sp->step));
    busiest = u / (cl->intra_bw * sp->step);
  }
  if (nodes > 1) {
    double bw = cl->nic_bw * (cl->nics_per_node > 0 ? cl->nics_per_node : 1);
    double u = 2.0 * (nodes - 1) / nodes * grads;
    if (res->shard_allreduces > 0) { /* hybrid: each GPU's shards across the R groups, and the
                                      * group's own rings where a group spans nodes */
      int G = sc->recipe.shard_group > 0 ? sc->recipe.shard_group : local, R = nodes * local / G;
      u = 2.0 * (R - 1) / R * res->shard_allreduce_bytes * local;
      if (G > local) u += (double)(G - 1) / G * 2 * grads;
    }
    json_array_append_new(jl, link_load(f, "network uplink of each node", u, bw, sp->step));
    if (u / (bw * sp->step) > busiest) busiest = u / (bw * sp->step);
  }
  json_object_set_new(jb, "links", jl);

  /* what if */
  /* an infinitely fast network still pays the losses beside it; no overlap pays them too */
  double inf = sp->compute + lost, none = sp->compute + lost + sp->buckets, twice = NAN;
  char set[128];
  const char *what = "";
  doubled(sc, set, sizeof set, &what);
  if (what_if) twice = doubled_step(sc, res, sp);
  /* a sharded step's collectives are not the buckets' allreduces the replays price: neither the
   * step without overlap nor the one on twice the network is replayed */
  bool unbucketed = res->shard_gathers + res->shard_scatters > 0;
  if (unbucketed) none = twice = NAN;
  fprintf(f, "  what if      infinitely fast network: step %.4f ms (%+.1f%%)", 1e3 * inf,
          100 * (inf - sp->step) / sp->step);
  if (!unbucketed)
    fprintf(f, "; no overlap: %.4f ms (%+.1f%%)", 1e3 * none, 100 * (none - sp->step) / sp->step);
  if (!isnan(twice))
    fprintf(f, "; %s, the same buckets: %.4f ms (%+.1f%%)", what, 1e3 * twice,
            100 * (twice - sp->step) / sp->step);
  /* without the framework's work and the slowest rank's wait: their time off the step (the
   * buckets they delayed would have gone as much earlier) */
  double bare = sp->step - lost;
  if (lost > 0)
    fprintf(f, ";\n               no framework loss: %.4f ms (%+.1f%%)", 1e3 * bare,
            100 * (bare - sp->step) / sp->step);
  /* a doubled NIC that saves nothing of a wait there is: say what bounds the allreduce instead */
  const char *bound = NULL;
  char why[160] = "";
  if (!isnan(twice) && sp->wait > 0 && sp->step - twice < 0.01 * sp->wait && sc->cluster.nodes > 1) {
    double pcie = sc->cluster.fabric.pcie_bw;
    if (sc->cluster.net_model == RH_NET_NCCL && pcie > 0 && pcie < 2 * sc->cluster.nic_bw)
      snprintf(why, sizeof why, "each NIC is capped by its PCIe slot: intra.pcie_GBps, %.4g GB/s",
               pcie / 1e9);
    else
      snprintf(why, sizeof why, "the NICs do not bound these allreduces (the links inside a node "
                                "or the latency do)");
    bound = why;
    fprintf(f, "\n               (%s)", why);
  }
  fprintf(f, "\n");
  json_t *jwi = json_pack("{s:f, s:o, s:f}", "infinite_network_step_ms", 1e3 * inf,
                          "no_overlap_step_ms", isnan(none) ? json_null() : json_real(1e3 * none),
                          "no_framework_loss_step_ms", 1e3 * bare);
  if (!isnan(twice)) {
    json_object_set_new(jwi, "double_network_step_ms", json_real(1e3 * twice));
    json_object_set_new(jwi, "double_network", json_string(set));
    if (bound) json_object_set_new(jwi, "double_network_bound", json_string(bound));
    json_object_set_new(jwi, "double_network_method",
                        json_string("the step's buckets kept, their allreduces replayed at the cost "
                                    "model's times; the wait saved comes off the simulated step"));
  }
  sharding_alternatives(f, jwi, alts, sp->step);
  json_object_set_new(jb, "what_if", jwi);

  /* the verdict: the share of a step an infinitely fast network would save */
  char verdict[256];
  double saved = sp->step > 0 ? (sp->step - inf) / sp->step : 0;
  if (sp->input >= 0.05 * sp->step && sp->input > sp->step - inf)
    snprintf(verdict, sizeof verdict, "input-bound: %.0f%% of each step waits for the input "
             "pipeline (data.loader: %.0f samples/s a GPU), %.1f%% for gradients", 100 * sp->input / sp->step,
             rh_scenario_input_rate(sc), 100 * saved);
  else if (saved >= 0.05 && res->shard_gathers + res->shard_scatters > 0)
    snprintf(verdict, sizeof verdict, "%snetwork-bound: %.0f%% of each step waits for the sharded "
             "state's collectives, the most for its %s (busiest link %.0f%% used)",
             saved >= 0.25 ? "" : "partly ", 100 * saved,
             res->shard_gather_wait >= res->shard_scatter_wait ? "allgathers of the parameters"
             : res->shard_allreduces > 0 ? "reduce-scatters and cross-group allreduces of the gradients"
             : sc->recipe.reduce_scatter ? "reduce-scatters of the gradients"
                                         : "allreduces of the gradients", 100 * busiest);
  else if (saved >= 0.25)
    snprintf(verdict, sizeof verdict, "network-bound: %.0f%% of each step waits for gradients "
             "(busiest link %.0f%% used)", 100 * saved, 100 * busiest);
  else if (saved >= 0.05)
    snprintf(verdict, sizeof verdict, "partly network-bound: %.0f%% of each step waits for gradients "
             "(busiest link %.0f%% used)", 100 * saved, 100 * busiest);
  else if (lost >= 0.05 * sp->step && lost > sp->step - inf)
    snprintf(verdict, sizeof verdict, "framework-bound: %.0f%% of each step is the framework's work "
             "and the wait for the slowest rank, %.1f%% waits for gradients (busiest link %.0f%% "
             "used)", 100 * lost / sp->step, 100 * saved, 100 * busiest);
  else
    snprintf(verdict, sizeof verdict, "compute-bound: the network is not the bottleneck, %.1f%% of "
             "each step waits for gradients (busiest link %.0f%% used)", 100 * saved, 100 * busiest);
  fprintf(f, "  verdict      %s\n", verdict);
  json_object_set_new(jb, "verdict", json_string(verdict));
  json_object_set_new(jb, "waiting_share", json_real(saved));
  json_object_set_new(root, "bottleneck", jb);
}
