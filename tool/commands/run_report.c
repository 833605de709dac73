/*
 * run_report.c: what `rehearsal run` says of a job that ran: the epoch table (gnuplot reads it as
 * is: `#` header lines, a units row), the summary (a step and its parts, the throughput against
 * the same GPUs with no communication, the buckets), the bottleneck, the failures, the checks'
 * verdicts, and the same as summary.json, epochs.txt, steps.csv and params.bin under --out.  A
 * run that stopped on an error says what it had done and why it stopped, and no performance
 * figure.
 */
#include "bottleneck.h"
#include "commands.h"
#include "interval_replay.h"
#include "output.h"
#include "run.h"
#include "incidents.h"
#include "sharding_what_if.h"
#include "trust.h"
#include "workload.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One bucket's line: what it runs and what that costs by the model. */
static void bucket_line(const rh_scenario *sc, int i, double bytes, const char *name,
                        double seconds, double negotiation) {
  /* the realistic network (SimGrid's LV08) has no closed form: its buckets are priced by the
   * exact network's alpha-beta model, and say so */
  bool realistic = sc->cluster.net_model == RH_NET_REALISTIC;
  printf("  bucket %-5d %.4g MB: %s, %.4f ms by the %s model%s", i, bytes / 1e6, name,
         seconds * 1e3, realistic ? "exact" : rh_net_model_names[sc->cluster.net_model],
         realistic ? " (realistic has no cost formula)" : "");
  if (negotiation > 0) printf(", after Horovod's negotiation %.4f ms", negotiation * 1e3);
  printf("\n");
}

/* What each gradient bucket of a step runs and costs, by the plan the runtime itself follows
 * (rank 0's view): a line for each of the few that cost most and one for the rest on the
 * console, an object per bucket in the JSON.  Returns the sum of the buckets' times and the
 * algorithm of the largest. */
static double bucket_plans(const rh_scenario *sc, const rh_train_result *res, json_t *jb,
                           char *largest, size_t len) {
  rh_scenario_view view;
  snprintf(largest, len, "-");
  int n = res->bucket_bytes ? res->buckets_per_step : 0;
  double *cost = calloc(2 * (size_t)(n ? n : 1), sizeof *cost), *model = cost + (n ? n : 1);
  if (!cost || rh_scenario_view_init(sc, &view) != RH_OK) {
    free(cost);
    return NAN;
  }
  double total = 0, most = -1, negotiation = rh_negotiation_seconds(sc, &view);
  for (int i = 0; i < n; i++) {
    double bytes = res->bucket_bytes[i];
    rh_plan plan = rh__plan(&view.ctx, RH_NC_ALLREDUCE, (size_t)bytes);
    char name[32];
    rh__plan_name(&plan, name, sizeof name);
    model[i] = plan.seconds;
    cost[i] = negotiation + plan.seconds;
    total += cost[i];
    if (bytes > most) {
      most = bytes;
      snprintf(largest, len, "%s", name);
    }
    const char *by = sc->cluster.net_model == RH_NET_REALISTIC ? "exact"
                                                              : rh_net_model_names[sc->cluster.net_model];
    json_t *jbk = json_pack("{s:f, s:s, s:f, s:s}", "bytes", bytes, "algorithm", name, "model_ms",
                            plan.seconds * 1e3, "priced_by", by);
    if (negotiation > 0) json_object_set_new(jbk, "negotiation_ms", json_real(negotiation * 1e3));
    json_array_append_new(jb, jbk);
  }
  int top[RH_REPORT_TOP + 1], shown = n > 0 ? rh_report_top(cost, n, RH_REPORT_TOP, top) : 0;
  double rest = total;
  for (int t = 0; t < shown; t++) {
    int i = top[t]; /* its algorithm as the JSON has it */
    const char *name = json_string_value(json_object_get(json_array_get(jb, i), "algorithm"));
    bucket_line(sc, i, res->bucket_bytes[i], name ? name : "-", model[i], negotiation);
    rest -= cost[i];
  }
  if (shown < n)
    printf("  bucket       %d more: %.4f ms together (every bucket in summary.json, buckets)\n",
           n - shown, 1e3 * fmax(rest, 0));
  free(cost);
  rh_topology_free(&view.topo);
  return total;
}


/* Samples an epoch's steps processed, each step at its world's size (from the record of the
 * runs of steps, which leaves out steps a failure cut short; the epoch's last size where there
 * is no record). */
static double epoch_samples(const rh_train_result *res, int e, double batch, int size) {
  const rh_epoch_stats *s = &res->epochs_stats[e];
  double samples = 0;
  long steps = 0;
  for (size_t i = 0; i < res->nruns; i++)
    if (res->runs[i].epoch == e) {
      samples += (double)res->runs[i].steps * res->runs[i].size * batch;
      steps += res->runs[i].steps;
    }
  return steps > 0 ? samples : (double)s->steps * batch * (s->size ? s->size : size);
}

/* commit_interval's verdict, and the replay of the job's failures for other intervals: the
 * goodput of the recipe's interval and of the best, beside Young's and Daly's. */
static void interval_study(const rh_scenario_launch *launch, const rh_train_config *cfg,
                           rh_train_result *res, const rh_failure_totals *ft, int size, int nodes,
                           double tolerance, double end, json_t *root) {
  const rh_fault_plan *plan = &launch->plan;
  /* the job's failure rate over the GPUs (size) and nodes it starts on, as the scenario gives */
  double rate = (plan->gpu_mtbf > 0 ? size / plan->gpu_mtbf : 0) +
                (plan->node_mtbf > 0 ? nodes / plan->node_mtbf : 0);
  long every = launch->has_elastic                 ? cfg->commit_every
               : cfg->checkpoint_every_steps > 0 ? cfg->checkpoint_every_steps
                                                 : cfg->checkpoint_every * res->steps_per_epoch;
  if (res->steps_per_epoch > 0 && (every <= 0 || every > res->steps_per_epoch) &&
      (launch->has_elastic || cfg->checkpoint_every > 0))
    every = res->steps_per_epoch; /* the end of each epoch commits (checkpoints) too */
  double count = launch->has_elastic ? (double)res->commits : (double)res->nckpt;
  double cost = count > 0 ? (launch->has_elastic ? ft->commit : ft->checkpoint) / count : 0;
  rh_interval_figures fig = {.elastic = launch->has_elastic, .steps = every,
                             .interval = (double)every * ft->step + cost, .cost = cost,
                             .mtbf = rate > 0 ? 1 / rate : 0};
  if (cfg->check[RH_CHECK_INTERVAL]) rh_train_verdict_interval(res, &fig, tolerance);
  if (!(rate > 0) || !(cost > 0) || !(ft->step > 0) || every <= 0) return;
  json_t *failures = root ? json_object_get(root, "failures") : NULL;
  const char *what = launch->has_elastic ? "commit" : "checkpoint";
  if (isnan(ft->recovery)) {
    printf("  interval     no failure was recovered from: no recovery time to replay other "
           "%s intervals with\n", what);
    return;
  }
  rh_replay_job job = {.steps = (double)res->steps_per_epoch * res->epochs, .step = ft->step,
                       .cost = cost, .recovery = ft->recovery, .failures = ft->struck,
                       .nfailures = ft->nstruck,
                       .horizon = end, .rate = rate, .seed = plan->seed};
  rh_interval_study study;
  rh_interval_study_run(&job, every, &study);
  rh_interval_study_report(stdout, failures, &job, &study, what, ft->time_goodput);
}


/* params.bin's index: its layout and each tensor's name, shape and offset, so that
 * numpy.fromfile(..., "<f4") and the shapes give the state_dict (and model.init_from reads it). */
static json_t *params_index(const rh_model *m) {
  json_t *tensors = json_array();
  for (int t = 0; t < m->ntensors; t++) {
    json_t *shape = json_array();
    for (int d = 0; d < m->tensors[t].ndim; d++)
      json_array_append_new(shape, json_integer(m->tensors[t].dims[d]));
    json_array_append_new(tensors, json_pack("{s:s, s:o, s:I}", "name", m->tensors[t].name,
                                             "shape", shape, "offset",
                                             (json_int_t)m->tensors[t].offset));
  }
  return json_pack("{s:s, s:s, s:I, s:o}", "file", "params.bin", "dtype", "float32 little-endian",
                   "count", (json_int_t)m->nparams, "tensors", tensors);
}


/* The steady step: the mean of rank 0's steps after the first `warmup` ones, at most half of
 * them.  A real run's first steps pay for set-up (cuBLAS's handle, NCCL's connections, the
 * allocator's first blocks: 130 ms on an H100 against 16 ms a step after), which Horovod's and
 * tf_cnn_benchmarks' synthetic benchmarks leave out the same way (num_warmup_batches, 10). */
/* A run's steps are added one by one, as they were when each had its record, up to this many
 * (the same sum to the last bit); a longer run adds its count times its step. */
#define STEADY_ONE_BY_ONE (1L << 20)

static double steady_step(const rh_train_result *res, int warmup, long *left_out, long *first,
                          long *last) {
  long skip = warmup < res->recorded / 2 ? warmup : res->recorded / 2, seen = 0;
  double sum = 0;
  *first = *last = 0;
  for (size_t i = 0; i < res->nsteps; i++) {
    const rh_step_record *r = &res->steps[i];
    long from = skip > seen ? skip - seen : 0, n = r->count - from; /* its steps past the skip */
    seen += r->count;
    if (n <= 0) continue;
    if (*first == 0) *first = r->global_step + from;
    *last = r->global_step + r->count - 1;
    double step = r->compute + r->wait;
    if (n > STEADY_ONE_BY_ONE) sum += (double)n * step;
    else
      for (long k = 0; k < n; k++) sum += step;
  }
  *left_out = skip;
  return res->recorded > skip ? sum / (double)(res->recorded - skip) : NAN;
}

/* steps.csv's rows at most: a row is some 55 bytes, so 55 MB; a longer run's steps.csv holds its
 * first steps and the run says so. */
#define STEPS_CSV_ROWS 1000000L

/* DIR/steps.csv: one row per step rank 0 took, with the lr the recipe gave it (the first
 * STEPS_CSV_ROWS); *rows: the rows written. */
static char *steps_csv(const rh_train_result *res, long *rows) {
  char *text = NULL;
  size_t len = 0;
  *rows = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  fprintf(f, "step,epoch,lr,loss,step_ms,compute_ms,wait_ms,ranks,start_s\n");
  for (size_t i = 0; i < res->nsteps && *rows < STEPS_CSV_ROWS; i++) {
    const rh_step_record *r = &res->steps[i];
    char loss[32] = "";
    if (!isnan(r->loss) && r->count == 1) snprintf(loss, sizeof loss, "%.9g", r->loss);
    for (long k = 0; k < r->count && *rows < STEPS_CSV_ROWS; k++, ++*rows) {
      double lr = k == 0 ? r->lr : rh_recipe_lr(&r->schedule, r->epoch, r->step + k,
                                                r->steps_per_epoch);
      fprintf(f, "%ld,%d,%.9g,%s,%.9g,%.9g,%.9g,%d,%.9f\n", r->global_step + k, r->epoch + 1, lr,
              loss, 1e3 * (r->compute + r->wait), 1e3 * r->compute, 1e3 * r->wait, r->size,
              r->start + (double)k * (r->compute + r->wait));
    }
  }
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}


/* ---- the report's stages ------------------------------------------------------------------- */

/* What the report works on: the job, and the figures its stages hand on. */
typedef struct report {
  run_job *j;
  const rh_train_config *cfg;
  int size;
  double batch;
  bool failures, simulated, stopped; /* stopped: the run ended on an error */
  char header[1024];
  char *table;
  size_t table_len;
  json_t *root;
  double total, compute, exposed, alone, samples; /* the epochs' sums (seconds, samples) */
  long steps;
  double fw, slow, fw_after, lost_step; /* a step's losses beside the network (losses.h) */
  double input;                          /* a step's wait for the input pipeline */
  double between;   /* seconds between steps: failures, commits, checkpoints, validation */
  double predicted; /* the buckets back to back by the cost model */
  rh_failure_totals ft;
} report;

/* The two header lines (printed; epochs.txt starts with them too). */
static void report_header(report *r) {
  const rh_scenario *sc = &r->j->sc;
  char rate[160];
  if (!r->cfg->real && sc->compute.kernels)
    snprintf(rate, sizeof rate, "kernels at %.4g TFLOP/s (%s) under %s", sc->compute.peak / 1e12,
             rh_precision_names[sc->model.precision],
             sc->framework.name ? sc->framework.name : "PyTorch 2 (eager)");
  else if (!r->cfg->real && sc->compute.roofline)
    snprintf(rate, sizeof rate, "a roofline of %.4g TFLOP/s (%s)", sc->compute.peak / 1e12,
             sc->compute.peak_from >= 0 ? rh_precision_names[sc->compute.peak_from] : "peak_tflops");
  else
    snprintf(rate, sizeof rate, "%.4g TFLOP/s", sc->cluster.gpu_flops / 1e12);
  long spe = r->j->res.steps_per_epoch;
  snprintf(r->header, sizeof r->header, "# rehearsal run: %s (%s)\n# %d GPU%s on %d node%s, %s "
           "each; batch %.0f per worker, %.0f global; %ld step%s per epoch\n", sc->name, sc->path,
           r->size, r->size == 1 ? "" : "s", sc->cluster.nodes, sc->cluster.nodes > 1 ? "s" : "",
           rate, r->batch, r->batch * r->size, spe, spe == 1 ? "" : "s");
  fputs(r->header, stdout);
  if (r->j->res.start_epoch > 0)
    printf("# resumed after epoch %d from %s\n", r->j->res.start_epoch, r->cfg->checkpoint_dir);
}

/* The epoch table's two header lines. */
static void table_head(const report *r, FILE *tab) {
  if (r->cfg->real)
    fprintf(tab, "#%5s %6s %11s %10s %10s %9s %11s %10s %9s %9s %9s %9s", "epoch", "steps", "time",
            "compute", "comm_wait", "step", "throughput", "lr", "loss", "accuracy", "val_loss",
            "val_acc");
  else
    fprintf(tab, "#%5s %6s %11s %10s %10s %9s %11s %10s", "epoch", "steps", "time", "compute",
            "comm_wait", "step", "throughput", "lr");
  /* with failures, two more columns: the time the epoch lost to them, and its ranks */
  if (r->failures) fprintf(tab, " %10s %6s", "lost", "ranks");
  fprintf(tab, "\n#%5s %6s %11s %10s %10s %9s %11s %10s", "", "", "(s)", "(s)", "(s)", "(ms)",
          "(samples/s)", "(last)");
  if (r->failures && r->cfg->real) fprintf(tab, " %9s %9s %9s %9s %10s", "", "", "", "", "(s)");
  else if (r->failures) fprintf(tab, " %10s", "(s)");
  fprintf(tab, "\n");
}

/* Epoch e's real-model columns: its loss and accuracy, then validation's, or gnuplot's
 * missing-value mark (an epoch the job's end cut short, or no validation). */
static void epoch_metrics(const rh_epoch_stats *s, FILE *tab, json_t *jep) {
  if (isnan(s->train_loss))
    fprintf(tab, " %9s %9s %9s %9s", "-", "-", "-", "-");
  else if (!isnan(s->val_loss))
    fprintf(tab, " %9.5f %9.5f %9.5f %9.5f", s->train_loss, s->train_accuracy, s->val_loss,
            s->val_accuracy);
  else
    fprintf(tab, " %9.5f %9.5f %9s %9s", s->train_loss, s->train_accuracy, "-", "-");
  if (!isnan(s->train_loss)) {
    json_object_set_new(jep, "train_loss", json_real(s->train_loss));
    json_object_set_new(jep, "train_accuracy", json_real(s->train_accuracy));
  }
  json_object_set_new(jep, "validation_steps", json_integer(s->val_steps));
  if (!isnan(s->val_loss)) {
    json_object_set_new(jep, "val_loss", json_real(s->val_loss));
    json_object_set_new(jep, "val_accuracy", json_real(s->val_accuracy));
  }
}

/* Epoch e's row of the table and its JSON object (`samples`: those its steps trained on). */
static void epoch_row(report *r, int e, double samples, FILE *tab, json_t *je) {
  run_job *j = r->j;
  rh_epoch_stats *s = &j->res.epochs_stats[e];
  double t = s->end - s->start, thr = samples / t;
  bool show_lr = r->cfg->real || j->sc.recipe.lr_written;
  fprintf(tab, "%6d %6ld %11.6f %10.6f %10.6f %9.4f %11.1f", e + 1, s->steps, t, s->compute,
          s->exposed_comm, 1e3 * t / (double)s->steps, thr);
  /* a timing run without a base_lr of its own has no learning rate to show */
  if (show_lr) fprintf(tab, " %10.6g", s->lr_last);
  else fprintf(tab, " %10s", "-");
  json_t *jep = json_pack("{s:i, s:I, s:f, s:f, s:f, s:f, s:f}", "epoch", e + 1,
                          "steps", (json_int_t)s->steps, "time_s", t, "compute_s", s->compute,
                          "comm_wait_s", s->exposed_comm, "step_ms", 1e3 * t / (double)s->steps,
                          "samples_per_s", thr);
  if (r->cfg->real) epoch_metrics(s, tab, jep);
  if (show_lr) {
    json_object_set_new(jep, "lr_first", json_real(s->lr_first));
    json_object_set_new(jep, "lr_last", json_real(s->lr_last));
  }
  if (r->failures) {
    /* lost time comes from the simulator's job log; real processes have none ("-") */
    double lost = r->simulated ? rh_failure_lost_within(j->in.launch.config.faults, j->lres.log,
                                                        &j->res, j->lres.end_time, s->start, s->end)
                               : NAN;
    if (r->simulated) fprintf(tab, " %10.6f %6d", lost, s->size);
    else fprintf(tab, " %10s %6d", "-", s->size);
    if (r->simulated) json_object_set_new(jep, "lost_s", json_real(lost));
    json_object_set_new(jep, "ranks", json_integer(s->size));
    json_object_set_new(jep, "commit_s", json_real(s->commit));
    json_object_set_new(jep, "checkpoint_s", json_real(s->checkpoint));
  }
  fprintf(tab, "\n");
  json_array_append_new(je, jep);
}

/* Adds epoch e's figures to the sums. */
static void epoch_sums(report *r, int e, double samples) {
  const rh_epoch_stats *s = &r->j->res.epochs_stats[e];
  r->total += s->end - s->start;
  r->compute += s->compute;
  r->exposed += s->exposed_comm;
  r->alone += s->alone;
  r->steps += s->steps;
  r->samples += samples;
}

/* The epoch table (printed, and kept for epochs.txt) and the epochs' sums.  A run that stopped
 * on an error has no table: its epochs' figures would be a performance figure of a failed run. */
static int report_epochs(report *r) {
  FILE *tab = open_memstream(&r->table, &r->table_len);
  if (!tab) return 1;
  json_t *je = json_array();
  if (r->stopped) {
    fprintf(tab, "# the run stopped on rank %d: %s\n", r->j->res.error_rank,
            rh_status_string(r->j->res.error));
  } else {
    table_head(r, tab);
  }
  for (int e = r->j->res.start_epoch; e < r->j->res.epochs; e++) {
    double samples = epoch_samples(&r->j->res, e, r->batch, r->size);
    if (!r->stopped) epoch_row(r, e, samples, tab, je);
    epoch_sums(r, e, samples);
  }
  if (r->stopped) json_decref(je);
  else json_object_set_new(r->root, "epochs", je);
  if (fclose(tab) != 0) return 1;
  if (!r->stopped) fputs(r->table, stdout);
  return 0;
}

/* A job that failed, recovered and went on ran steps its epochs' sums do not all hold (a
 * relaunch resumes an epoch's count at its checkpoint): rank 0's record of every step it ran
 * gives its steps' time, when the record is whole. */
static void sums_from_records(report *r) {
  const rh_train_result *res = &r->j->res;
  if (!r->failures || res->unrecorded || res->nsteps == 0) return;
  double compute = 0, wait = 0, alone = 0;
  long steps = 0;
  for (size_t i = 0; i < res->nsteps; i++) {
    const rh_step_record *k = &res->steps[i];
    compute += (double)k->count * k->compute;
    wait += (double)k->count * k->wait;
    alone += (double)k->count * k->alone;
    steps += k->count;
  }
  r->compute = compute, r->exposed = wait, r->alone = alone, r->steps = steps;
}

/* The losses beside the network (losses.h) run inside the step's compute; rank 0's last step's
 * stand for every step (they change only with the world's size).  They and what the steps
 * spent between them (failures, commits, checkpoints, validation) come out of the sums. */
static void step_parts(report *r) {
  const rh_train_result *res = &r->j->res;
  sums_from_records(r);
  double per = (double)r->steps;
  r->fw = r->simulated ? res->framework_step : 0;
  r->slow = r->simulated ? res->straggler_step : 0;
  r->fw_after = r->simulated ? res->framework_after : 0;
  r->input = r->simulated ? res->input_step : 0;
  if (!(r->steps > 0 && r->fw - r->fw_after + r->slow + r->input <= r->compute / per &&
        r->fw_after <= r->exposed / per))
    r->fw = r->slow = r->fw_after = r->input = 0;
  r->lost_step = r->fw + r->slow + r->input;
  r->compute -= (r->fw - r->fw_after + r->slow + r->input) * per;
  r->exposed -= r->fw_after * per;
  double steps_time = r->compute + r->exposed + r->lost_step * per;
  r->between = r->total - steps_time;
  if (!(r->between > 1e-9 * r->total)) r->between = 0; /* none: the sums' rounding */
}

/* The model line, and the accumulation and DDP lines that go with it. */
static void summary_model(const report *r) {
  const rh_scenario *sc = &r->j->sc;
  const rh_train_config *cfg = r->cfg;
  const char *kind = !cfg->real                       ? ""
                     : sc->model.kind == RH_KIND_SOFTMAX ? "softmax regression"
                     : sc->model.kind == RH_KIND_MLP     ? "MLP"
                                                        : rh_net_names[sc->model.network];
  const char *mname = sc->model.name ? sc->model.name : "";
  double gbytes = cfg->real ? 4 : rh_precision_grad_bytes(sc->model.precision);
  printf("  model        %s%s%s%s%s: %.0f parameters, %.1f MB of %s gradients, %.4g "
         "GFLOP/sample forward%s%s\n",
         kind, *kind && *mname ? " (" : "", mname, *kind && *mname ? ")" : "",
         !*kind && !*mname ? "(unnamed)" : "", cfg->parameters, cfg->parameters * gbytes / 1e6,
         gbytes == 2 ? "bf16" : "fp32", cfg->forward_flops / 1e9,
         cfg->real ? "" : ", ", cfg->real ? "" : rh_precision_names[sc->model.precision]);
  if (!cfg->real && sc->recipe.accumulation > 1)
    printf("  accumulate   %d micro-batches of %.0f a step; the allreduce runs in the last one's "
           "backward\n", (int)sc->recipe.accumulation, sc->recipe.micro_batch);
  if (!cfg->real && sc->recipe.framework == 1)
    printf("  buckets      PyTorch DDP: first %.4g MiB, then %.4g MiB (bucket_cap_mb), in reverse "
           "order of the layers\n", sc->recipe.first_bucket / 1048576, sc->recipe.bucket_cap / 1048576);
}

/* The fusion line and the buckets' plans; the algorithm of the largest into algo. */
static void summary_buckets(report *r, char *algo, size_t len) {
  const rh_scenario *sc = &r->j->sc;
  const rh_train_result *res = &r->j->res;
  bool ddp = !r->cfg->real && sc->recipe.framework == 1;
  printf("  fusion       %s %.4g MiB: %d bucket%s per step, largest %.4g MB; network "
         "model %s\n", ddp ? "ddp, cap" : "threshold",
         ddp ? sc->recipe.bucket_cap / 1048576 : sc->settings.value[RH_SETTING_FUSION_THRESHOLD] / 1048576,
         res->buckets_per_step, res->buckets_per_step == 1 ? "" : "s", res->bucket_bytes_max / 1e6,
         rh_net_model_names[sc->cluster.net_model]);
  json_t *jbuckets = json_array();
  r->predicted = bucket_plans(sc, res, jbuckets, algo, len);
  printf("  buckets      %.4f ms back to back; what a step waits is what backward does not hide\n",
         r->predicted * 1e3);
  json_object_set_new(r->root, "buckets", jbuckets);
}

/* The time line: a step and its parts; then, apart, what the job spent between its steps. */
static void summary_time(const report *r, double step_s, double compute_step) {
  double per = (double)r->steps;
  printf("  time         %.6f s %s over %ld steps: step %.4f ms = compute %.4f ms + ", r->total,
         r->simulated ? "simulated" : "measured", r->steps, 1e3 * step_s, 1e3 * compute_step);
  if (r->fw > 0) printf("framework %.4f ms + ", 1e3 * r->fw);
  if (r->slow > 0) printf("waiting for the slowest rank %.4f ms + ", 1e3 * r->slow);
  if (r->input > 0) printf("waiting for input %.4f ms + ", 1e3 * r->input);
  printf("waiting for gradients %.4f ms\n", 1e3 * r->exposed / per);
  if (r->between > 0)
    printf("  between      %.6f s (%.2f%% of the job) went to %s, outside the steps%s\n",
           r->between, 100 * r->between / r->total,
           r->failures ? "failures, commits and checkpoints" : "validation and checkpoints",
           r->failures ? ": what each cost is in the failures section" : "");
}

/* --compare's line, against the steady step. */
static void summary_compare(const report *r, double steady) {
  const run_flags *fl = r->j->fl;
  if (!fl->compare || !isfinite(steady)) return;
  double here = 1e3 * steady, other = r->j->other_step, err_pct = 100 * (here - other) / other;
  printf("  compared     steady step %.4f ms here (%s) against %.4f ms in %s (%s): %+.2f%%\n",
         here, r->simulated ? "simulator" : "measured", other, fl->compare, r->j->other_target,
         err_pct);
  json_object_set_new(r->root, "compared",
                      json_pack("{s:o, s:s, s:f, s:f, s:f}", "file", rh_json_text(fl->compare),
                                "target", r->j->other_target, "step_ms", other, "this_step_ms",
                                here, "error_percent", err_pct));
}

/* summary.json's summary object. */
static void summary_json(const report *r, double step_s, double compute_step, double thr,
                         double ideal, const char *algo, double steady, long warm) {
  const rh_scenario *sc = &r->j->sc;
  double per = (double)r->steps;
  json_t *js = json_pack(
      "{s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:s, s:f}", "time_s", r->total, "steps",
      (json_int_t)r->steps, "step_ms", 1e3 * step_s, "compute_ms", 1e3 * compute_step,
      "comm_wait_ms", 1e3 * r->exposed / per, "samples_per_s", thr, "ideal_samples_per_s", ideal,
      "scaling_efficiency", thr / ideal, "buckets_per_step", r->j->res.buckets_per_step,
      "gradient_bytes",
      r->cfg->parameters * (r->cfg->real ? 4 : rh_precision_grad_bytes(sc->model.precision)),
      "algorithm", algo, "predicted_allreduce_ms", r->predicted * 1e3);
  json_t *rates = json_object_get(r->root, "rates");
  if (rates) {
    json_object_update(js, rates);
    json_object_del(r->root, "rates");
  }
  if (r->lost_step > 0) {
    json_object_set_new(js, "framework_ms", json_real(1e3 * r->fw));
    json_object_set_new(js, "slowest_rank_ms", json_real(1e3 * r->slow));
    json_object_set_new(js, "input_ms", json_real(1e3 * r->input));
  }
  if (r->between > 0) {
    json_object_set_new(js, "between_steps_s", json_real(r->between));
    json_object_set_new(js, "between_steps", json_string(r->failures ? "failures, commits and checkpoints"
                                                                     : "validation and checkpoints"));
  }
  if (isfinite(steady)) {
    json_object_set_new(js, "steady_step_ms", json_real(1e3 * steady));
    json_object_set_new(js, "warmup_steps", json_integer(warm));
  }
  json_object_set_new(r->root, "summary", js);
}

/* The summary of a run that went to its end.  The step, its throughput and the scaling
 * efficiency are the steps' own, whatever failures cost between them (said apart); the
 * efficiency's baseline is the job's GPUs doing their work with no communication at all (no
 * collective's share of the GPU either), so every loss shows in the gap. */
static void report_summary(report *r) {
  const run_job *j = r->j;
  double per = (double)r->steps;
  double step_s = (r->compute + r->exposed) / per + r->lost_step, compute_step = r->compute / per;
  /* the samples the steps trained on (each at its world's size) over the time the GPUs' own
   * work of those steps takes */
  double alone = r->simulated && r->alone > 0 ? r->alone : r->compute;
  double thr = r->samples / (r->total - r->between), ideal = r->samples / alone;
  printf("\nsummary\n");
  summary_model(r);
  char algo[32];
  summary_buckets(r, algo, sizeof algo);
  summary_time(r, step_s, compute_step);
  char trust[400];
  printf("  throughput   %.1f samples/s; %d GPU%s without communication: %.1f; scaling "
         "efficiency %.2f%% %s\n", thr, r->size, r->size == 1 ? "" : "s", ideal, 100 * thr / ideal,
         rh_trust_note(&j->sc, RH_TRUST_THROUGHPUT, trust, sizeof trust));
  json_object_set_new(r->root, "trust", rh_trust_json(&j->sc));
  if (!r->cfg->real) rh_workload_report(stdout, r->root, &j->sc, thr, r->size);
  rh_cli_print_settings(stdout, &j->sc, j->fl->timeline, j->fl->timeline_env);
  for (int i = 0; i < j->opts->nsets; i++) printf("  --set        %s\n", j->opts->sets[i]);
  long warm = 0, steady_first, steady_last;
  double steady = steady_step(&j->res, j->fl->warmup, &warm, &steady_first, &steady_last);
  if (isfinite(steady))
    printf("  steady       step %.4f ms, the mean of steps %ld to %ld (warm-up left out)\n",
           1e3 * steady, steady_first, steady_last);
  summary_compare(r, steady);
  summary_json(r, step_s, compute_step, thr, ideal, algo, steady, warm);
}

/* What a run that stopped on an error had done: the steps rank 0 began (the one that failed
 * among them) and the job's time, no performance figure. */
static void report_stopped(report *r) {
  long steps = r->j->res.recorded > r->steps ? r->j->res.recorded : r->steps;
  double end = r->j->lres.end_time > r->total ? r->j->lres.end_time : r->total;
  printf("\nsummary\n  done         %ld step%s in %.6f s %s before the run stopped on rank %d "
         "(%s): a failed run gives no performance figure\n",
         steps, steps == 1 ? "" : "s", end, r->simulated ? "simulated" : "measured",
         r->j->res.error_rank, rh_status_string(r->j->res.error));
  json_object_set_new(r->root, "done", json_pack("{s:I, s:f}", "steps", (json_int_t)steps,
                                                 "time_s", end));
}

/* The bottleneck and what-if, of a simulated run that went to its end. */
static void report_bottleneck(report *r) {
  if (r->stopped || r->steps <= 0 || !r->simulated) return;
  double per = (double)r->steps;
  rh_step_split split = {.step = (r->compute + r->exposed) / per + r->lost_step,
                         .compute = r->compute / per, .framework = r->fw, .slowest = r->slow,
                         .input = r->input,
                         .wait = r->exposed / per, .buckets = r->predicted};
  bool what_if = r->j->fl->what_if && !r->failures;
  rh_sharding_alts alts = {.n = 0};
  if (what_if) rh_sharding_what_if(r->j, &alts);
  rh_bottleneck_report(stdout, r->root, &r->j->sc, &r->j->res, &split, what_if, &alts);
}

/* The checks that need the whole run: accuracy against one worker's, and the memory. */
static void report_late_checks(report *r) {
  run_job *j = r->j;
  const rh_train_config *cfg = r->cfg;
  rh_train_result *res = &j->res;
  if (cfg->check[RH_CHECK_ACCURACY] && cfg->real && res->error == RH_OK) {
    /* the last epoch's validation accuracy against one worker's of the same recipe */
    double acc = res->epochs > 0 ? res->epochs_stats[res->epochs - 1].val_accuracy : NAN;
    char given[1024], source[1200];
    const char *base_file = j->sc.checks.accuracy_baseline;
    if (base_file) run__data_path(&j->sc, base_file, given, sizeof given);
    double base[100];
    int nbase = isnan(acc) ? 0 : rh_accuracy_baseline(j->file, j->opts, base_file ? given : NULL,
                                                      j->fl->out, j->sc.checks.accuracy_seeds, base,
                                                      source, sizeof source);
    rh_train_verdict_accuracy(res, acc, base, nbase, j->sc.checks.accuracy_within, source);
  }
  if (cfg->check[RH_CHECK_FITS_MEMORY]) {
    rh_memory_use mem, alt;
    rh_workload_memory(&j->sc, &mem);
    double cap = j->sc.compute.capacity;
    char fits[160] = "";
    bool ac = false;
    int s = cap > 0 && mem.total > cap ? rh_workload_sharding_that_fits(&j->sc, cap, &alt, &ac) : -1;
    if (s >= 0)
      snprintf(fits, sizeof fits, "recipe.sharding: %s (%s) over %d ranks%s would fit, %.2f GB "
               "per GPU", rh_sharding_names[s], rh_sharding_titles[s], alt.degree,
               ac ? " with activation_checkpointing: full" : "", alt.total / 1e9);
    if (cap > 0) rh_train_verdict_memory(res, &mem, cap, fits);
  }
}

/* On real processes: the job log is the simulator's, so the elastic driver reports the failures
 * and the verdicts that need the log are left to the simulator. */
static void failures_measured(report *r) {
  rh_train_result *res = &r->j->res;
  double commit = 0, checkpoint = 0;
  for (int e = 0; e < res->epochs; e++) {
    commit += res->epochs_stats[e].commit;
    checkpoint += res->epochs_stats[e].checkpoint;
  }
  printf("\nfailures\n  on real processes `rehearsal elastic` reports each failure and reset "
         "(its stderr); commits %.6f s, checkpoints %.6f s\n", commit, checkpoint);
  if (res->error != RH_OK) /* what ended the job where no driver could say it */
    printf("  the job ended on rank %d: %s\n", res->error_rank, res->error_detail);
  const rh_check_id log_checks[] = {RH_CHECK_NOTICED, RH_CHECK_INTERVAL};
  for (size_t i = 0; i < sizeof log_checks / sizeof log_checks[0]; i++)
    if (r->cfg->check[log_checks[i]]) {
      res->checks[log_checks[i]] = (rh_check_result){.skipped = true};
      snprintf(res->checks[log_checks[i]].detail, sizeof res->checks[0].detail,
               "judged on the simulator, from its job log");
    }
}

/* The failures: what each cost, and the verdicts that need the whole job. */
static void report_failures(report *r) {
  run_job *j = r->j;
  if (!r->failures) return;
  if (!r->simulated) {
    failures_measured(r);
    return;
  }
  rh_failure_report(stdout, r->root, j->in.launch.config.faults, j->in.launch.config.elastic,
                    j->lres.log, &j->res, j->lres.end_time, &r->ft);
  if (r->cfg->check[RH_CHECK_NOTICED])
    rh_train_verdict_noticed(&j->res, &j->in.launch.plan, j->lres.log, j->lres.end_time);
  interval_study(&j->in.launch, r->cfg, &j->res, &r->ft, r->size, j->sc.cluster.nodes,
                 j->sc.checks.interval_tolerance, r->ft.end, r->root);
}

/* The replay at scale (failures.horizon_days): the job's wall time, its failures drawn from the
 * causes, at the pace this run sampled (its steady step, its checkpoint's bytes). */
static void report_at_scale(report *r) {
  run_job *j = r->j;
  if (!(j->sc.failures.horizon_s > 0) || r->stopped || !r->simulated) return;
  long warm, first, last;
  double step = steady_step(&j->res, j->fl->warmup, &warm, &first, &last);
  rh_incident_job job;
  rh_incident_replay rep;
  if (rh_incident_job_from(&j->sc, isfinite(step) ? step : 0, j->res.state_bytes, &job) != 0)
    return;
  if (rh_incident_replay_run(&job, &rep) == 0) {
    rh_incident_report(stdout, r->root, &job, &rep);
    rh_incident_replay_free(&rep);
  }
  rh_incident_plan plan;
  if (rh_incident_plan_run(&job, &plan) == 0) {
    json_t *failures = r->root ? json_object_get(r->root, "failures") : NULL;
    rh_incident_plan_report(stdout, failures ? json_object_get(failures, "at_scale") : NULL, &job,
                            &plan);
  }
  rh_incident_plan_free(&plan);
  rh_incident_job_free(&job);
}

/* Whether the run's error is one the scenario expected (the failure of a check it names). */
static bool error_expected(const report *r) {
  const rh_train_result *res = &r->j->res;
  unsigned expect = r->j->sc.checks.expect_fail;
  const rh_check_id which[] = {RH_CHECK_COLLECTIVES, RH_CHECK_METRICS};
  for (size_t i = 0; res->error != RH_OK && i < sizeof which / sizeof which[0]; i++)
    if (res->checks[which[i]].ran && !res->checks[which[i]].passed && (expect & (1u << which[i])))
      return true;
  return false;
}

/* The checks' verdicts: a check fails the run unless the scenario expects it to fail; checks
 * that an expected failure kept from running do not count.  The number of checks that went
 * against the scenario. */
static int report_verdicts(report *r, bool explained) {
  const rh_train_config *cfg = r->cfg;
  rh_train_result *res = &r->j->res;
  unsigned expect = r->j->sc.checks.expect_fail;
  int unexpected = 0;
  json_t *jchecks = json_object();
  bool any = expect != 0;
  for (int i = 0; i < RH_CHECK_COUNT; i++) any = any || cfg->check[i];
  if (any) printf("\nchecks\n");
  for (int i = 0; i < RH_CHECK_COUNT; i++) {
    bool expect_fail = expect & (1u << i);
    if (!cfg->check[i] && !expect_fail) continue;
    rh_check_result *c = &res->checks[i];
    bool passed = cfg->check[i] && c->ran && c->passed;
    const char *word = !cfg->check[i] ? "OFF " : c->skipped ? "SKIP" : !c->ran ? "----" : passed ? "PASS" : "FAIL";
    const char *detail = !cfg->check[i] ? "switched off in the scenario"
                         : c->ran || c->skipped ? c->detail : "did not run";
    /* an expected failure must really happen; otherwise a check must pass, or not apply, or not
     * have run because an expected failure stopped the run first */
    bool ok = expect_fail ? cfg->check[i] && c->ran && !c->passed
                          : passed || c->skipped || (!c->ran && explained);
    if (!ok) unexpected++;
    printf("  %s  %-22s %s%s\n", word, rh_check_names[i], detail,
           expect_fail ? (ok ? "  [expected]" : "  [expected to fail: UNEXPECTED]") : "");
    json_object_set_new(jchecks, rh_check_names[i],
                        json_pack("{s:b, s:b, s:b, s:b, s:s}", "ran", c->ran, "passed", passed,
                                  "applicable", !c->skipped && cfg->check[i], "expected_to_fail",
                                  expect_fail, "detail", detail));
  }
  json_object_set_new(r->root, "checks", jchecks);
  return unexpected;
}

/* How the job ended: early (elastic, or no node left), on an error, with its final parameters. */
static void report_end(report *r) {
  const rh_train_result *res = &r->j->res;
  json_t *root = r->root;
  if (res->ended != RH_OK) {
    printf("\nthe elastic job ended before its last step: %s\n", rh_status_string(res->ended));
    json_object_set_new(root, "ended", json_string(rh_status_string(res->ended)));
  } else if (r->ft.none_left) {
    printf("\nthe job ended before its last step: no node was left, every worker died\n");
    json_object_set_new(root, "ended", json_string("no node was left"));
  }
  if (res->error != RH_OK) {
    printf("\nthe run stopped on rank %d: %s\n", res->error_rank, rh_status_string(res->error));
    if (res->error_detail[0]) printf("  %s\n", res->error_detail);
    json_object_set_new(root, "error",
                        json_pack("{s:i, s:s, s:s}", "rank", res->error_rank, "status",
                                  rh_status_string(res->error), "detail", res->error_detail));
  }
  json_object_set_new(root, "end_time_s", json_real(r->ft.none_left ? r->ft.end : r->j->lres.end_time));
  json_object_set_new(root, "target", json_string(r->j->lres.target ? r->j->lres.target : "simulator"));
  if (r->cfg->real && res->error == RH_OK && res->ended != RH_OK) /* no world holds parameters */
    printf("\nfinal parameters: none, the job ended below min_np\n");
  else if (r->cfg->real && res->error == RH_OK) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)res->params_hash);
    json_object_set_new(root, "final_parameters_fnv1a", json_string(hex));
    printf("\nfinal parameters: FNV-1a %s\n", hex);
  }
}

/* The files under --out, together or none: summary.json, epochs.txt, steps.csv (every step up
 * to its cap, said; none when steps went unrecorded, said) and params.bin (the final
 * parameters, when the run ended with them; an earlier run's is removed where this one writes
 * none).  The run's exit status, from rc. */
static int write_files(report *r, int rc) {
  const char *out = r->j->fl->out;
  const rh_train_result *res = &r->j->res;
  long rows = 0;
  char *steps = res->unrecorded ? NULL : steps_csv(res, &rows);
  bool params = steps && r->cfg->real && res->final_params && res->error == RH_OK;
  if (params) json_object_set_new(r->root, "parameters_file", params_index(&r->cfg->model));
  else {
    char stale[4200];
    snprintf(stale, sizeof stale, "%s/params.bin", out);
    unlink(stale);
  }
  rh_remove_stale_samples(out, r->j->fl->samples ? r->cfg->max_size : 0); /* an earlier run's record */
  if (steps && rows < res->recorded)
    json_object_set_new(r->root, "steps_csv", json_pack("{s:I, s:I}", "rows", (json_int_t)rows,
                                                        "steps", (json_int_t)res->recorded));
  char *text = json_dumps(r->root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
  char *epochs = malloc(strlen(r->header) + r->table_len + 1);
  if (epochs) sprintf(epochs, "%s%s", r->header, r->table);
  const char *names[] = {"summary.json", "epochs.txt", "steps.csv", "params.bin"},
             *texts[] = {text, epochs, steps, (const char *)res->final_params};
  size_t sizes[] = {(size_t)-1, (size_t)-1, (size_t)-1,
                    r->cfg->real ? r->cfg->model.nparams * sizeof(float) : 0};
  if (res->unrecorded) {
    printf("\nsteps.csv not written: no memory was left to record %ld of the steps\n",
           res->unrecorded);
    rc = 1;
  }
  if (!text || !epochs || (!steps && !res->unrecorded) ||
      rh_write_outputs_sized(out, steps ? (params ? 4 : 3) : 2, names, texts, sizes) != 0)
    rc = 1;
  else if (!steps)
    printf("\nwrote %s/summary.json and epochs.txt\n", out);
  else if (rows < res->recorded)
    printf("\nwrote %s/summary.json, epochs.txt and steps.csv (its first %ld steps of %ld: a "
           "row each up to %ld)\n", out, rows, res->recorded, STEPS_CSV_ROWS);
  else printf("\nwrote %s/summary.json, epochs.txt%s steps.csv%s\n", out,
              params ? "," : " and", params ? " and params.bin" : "");
  free(text);
  free(epochs);
  free(steps);
  return rc;
}

/* summary.json's first objects: the scenario and its cluster. */
static json_t *report_root(const rh_scenario *sc, const rh_train_config *cfg, int size) {
  json_t *root = json_object();
  json_object_set_new(root, "scenario", json_string(sc->name));
  json_object_set_new(root, "file", rh_json_text(sc->path));
  json_t *slots = json_array();
  for (int n = 0; n < sc->cluster.nodes; n++)
    json_array_append_new(slots, json_integer(sc->cluster.gpus_per_node[n]));
  json_object_set_new(root, "cluster",
                      json_pack("{s:i, s:i, s:o, s:f, s:f, s:f, s:i, s:f, s:f, s:s}", "ranks", size,
                                "nodes", sc->cluster.nodes, "gpus_per_node", slots, "gpu_tflops",
                                sc->cluster.gpu_flops / 1e12, "intra_GBps", sc->cluster.intra_bw / 1e9,
                                "intra_latency_us", sc->cluster.intra_lat * 1e6, "nics_per_node",
                                sc->cluster.nics_per_node, "nic_Gbps", sc->cluster.nic_bw * 8 / 1e9,
                                "nic_latency_us", sc->cluster.nic_lat * 1e6, "network_model",
                                rh_net_model_names[sc->cluster.net_model]));
  json_object_set_new(root, "model", json_pack("{s:I}", "parameters", (json_int_t)cfg->parameters));
  return root;
}

/* The settings, the variables nothing read, and the command line's overrides. */
static void report_settings_json(const report *r) {
  const run_job *j = r->j;
  json_object_set_new(r->root, "settings", rh_cli_settings_json(&j->sc, j->fl->timeline, j->fl->timeline_env));
  json_object_set_new(r->root, "ignored_variables", rh_cli_ignored_json(&j->sc));
  json_t *jsets = json_array();
  for (int i = 0; i < j->opts->nsets; i++) json_array_append_new(jsets, rh_json_text(j->opts->sets[i]));
  json_object_set_new(r->root, "overrides", jsets);
}

int run__report(run_job *j) {
  report r = {.j = j, .cfg = &j->in.cfg, .size = rh_scenario_size(&j->sc),
              .batch = (double)j->in.cfg.batch, .simulated = j->lres.rank < 0,
              .stopped = j->res.error != RH_OK};
  r.failures = j->in.launch.has_plan || j->in.launch.has_elastic || j->in.launch.has_restart;
  report_header(&r);
  if (j->fl->resume && j->res.error == RH_OK && j->res.start_epoch >= j->epochs_cap) {
    printf("nothing to resume: the checkpoints in %s already hold all %d epochs\n",
           r.cfg->checkpoint_dir, j->epochs_cap);
    return 0; /* the finished run's summary.json stays as it was */
  }
  r.root = report_root(&j->sc, r.cfg, r.size);
  if (report_epochs(&r) != 0) {
    json_decref(r.root);
    return 1;
  }
  step_parts(&r);
  if (r.stopped) report_stopped(&r);
  else if (r.steps > 0) report_summary(&r);
  report_settings_json(&r);
  report_bottleneck(&r);
  report_late_checks(&r);
  report_failures(&r);
  report_at_scale(&r);
  bool explained = error_expected(&r);
  int unexpected = report_verdicts(&r, explained);
  report_end(&r);
  rh_failure_totals_free(&r.ft);
  int rc = (unexpected || (j->launch_rc != 0 && !explained)) ? 1 : 0;
  if (j->fl->out) rc = write_files(&r, rc);
  free(r.table);
  if (j->fl->timeline && j->lres.rank <= 0 && access(j->fl->timeline, F_OK) == 0)
    printf("%swrote the timeline %s (open it in ui.perfetto.dev)\n", j->fl->out ? "" : "\n",
           j->fl->timeline);
  json_decref(r.root);
  return rc;
}
