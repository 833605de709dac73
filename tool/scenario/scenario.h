/*
 * scenario.h: a scenario file (YAML) describes the cluster, the model and data, the recipe and the
 * collective settings of one rehearsal.  Parsing is driven by one schema table; any problem is
 * reported as "FILE:LINE: FIELD: what is wrong" and nothing is run.
 */
#ifndef REHEARSAL_SCENARIO_H
#define REHEARSAL_SCENARIO_H

#include "internal.h"
#include "train/train.h"
#include "families/family.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <sys/stat.h>

/* The precisions a model trains in (model.precision): the GEMMs' peak rate, the bytes of each
 * activation value and of each gradient value. */
typedef enum rh_precision {
  RH_PREC_FP32 = 0, RH_PREC_TF32, RH_PREC_AMP_FP16, RH_PREC_BF16, RH_PREC_FP8, RH_PREC_COUNT
} rh_precision;
extern const char *const rh_precision_names[];
/* Bytes of an activation value, and of a gradient value as the allreduce moves it. */
double rh_precision_value_bytes(int precision);
double rh_precision_grad_bytes(int precision);

enum { RH_FAMILY_CUSTOM = 0, RH_FAMILY_TRANSFORMER = 1, RH_FAMILY_CNN = 2 };

/* A fault event as the scenario writes it (1-based epochs and steps, units in the keys); its
 * runtime form is rh_fault (rh_scenario_launch_init). */
typedef struct rh_scenario_fault {
  int kind;           /* rh_fault_kind */
  int node;           /* -1: not given */
  int gpu;            /* -1: not given */
  int link;           /* 0 not given, 1 uplink, 2 gpu */
  double at_s;        /* -1: not given */
  double epoch, step; /* 0: not given */
  int during;         /* rh_phase */
  double after_ms;
  double duration_s;  /* -1: for good */
  double factor;      /* -1: not given */
  double extra_latency_us;
  int line;
} rh_scenario_fault;

/* A failure cause of the replay at scale (failures.causes[]), as the scenario writes it. */
typedef struct rh_scenario_cause {
  char *name;         /* owned */
  int per;            /* rh_cause_scope */
  double count;       /* failures in failures.exposure; -1: not given */
  double mtbf_hours;  /* per unit; -1: not given */
  int detection;      /* rh_detection */
  int takes_out;      /* rh_takes_out; -1: the default of its scope */
  double at_hours;    /* scripted: one failure then; -1: none */
  double detect_s;    /* its own detection delay; -1: its detection's (restart.*) */
  double diagnosis_s; /* its own diagnosis; -1: restart.diagnosis_s */
  int line;
} rh_scenario_cause;

/* A host change of elastic discovery as the scenario writes it. */
typedef struct rh_scenario_change {
  double at_s;
  int add, remove; /* the node; -1: not given */
  int line;
} rh_scenario_change;

/* One axis of a sweep: a dotted scenario key and its values, as written. */
typedef struct rh_sweep_axis {
  char *key;
  char **values;
  int nvalues;
  int line;
} rh_sweep_axis;

/* The scenario key that sweep axes `a` and `b` both set, or NULL: the same key, one inside the
 * other (cluster.network and cluster.network.nic_Gbps: the inner one), or `gpus` (which sets
 * cluster.nodes and cluster.gpus_per_node) and one of those.  Two such axes would give points
 * whose values are not what ran. */
const char *rh_sweep_axes_clash(const char *a, const char *b);

/* data.source */
typedef enum rh_data_source {
  RH_DATA_SYNTHETIC = 0,
  RH_DATA_IDX = 1,
  RH_DATA_CIFAR10 = 2,
  RH_DATA_FASHION_MNIST = 3, /* Debian's dataset-fashion-mnist (RH_DATASETS overrides where) */
} rh_data_source;

/* model.kind */
enum { RH_KIND_TIMING = 0, RH_KIND_SOFTMAX = 1, RH_KIND_MLP = 2, RH_KIND_NET = 3 };

/* The folder of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), or RH_DATASETS
 * where set. */
const char *rh_datasets_dir(void);

typedef struct rh_scenario {
  char *path;
  char *name;
  char *description;
  rh_cluster cluster; /* cluster.gpus_per_node is owned */
  int network_model;  /* rh_net_model: exact (CM02), realistic (LV08), nccl (NCCL's cost model) */
  int transport;      /* network.transport: 0 InfiniBand, 1 RoCE, 2 TCP sockets */
  int presets_used;   /* presets the cluster was written from */
  struct {
    double peak, memory_bw, gemm_efficiency, gemm_half; /* cluster.gpu: the roofline */
    double overhead;                                    /* model.framework_overhead_ms */
    double step_spread;          /* cluster.gpu.step_spread: relative sd of a step's compute */
    double peaks[RH_PREC_COUNT]; /* cluster.gpu.peak_tflops_<precision>: dense peaks */
    double capacity;             /* cluster.gpu.memory_GB, in bytes; 0: not known */
    char *tflops_model;          /* cluster.gpu.tflops_measured_on: what `tflops` was measured on */
    char *gpu_name;              /* cluster.gpu.name */
    bool tflops_written;         /* the scenario (not a preset) gives tflops */
    bool roofline;               /* the model's layers are timed on the roofline */
    int peak_from;               /* -1: peak_tflops as written; else the precision it is for */
    int sms;                     /* cluster.gpu.sms */
    int cpu_threads;             /* cluster.cpu_threads: a node's CPU threads (0: not known) */
    char *kernel_table;          /* cluster.gpu.kernel_table: measured kernel rates (a path) */
    double gemm_best, gemm_best_fp32; /* cluster.gpu: the best GEMMs' share of the peak */
    double conv_eff_tf32;        /* cluster.gpu.conv_efficiency_tf32 */
    double kernel_floor, attn_fwd, attn_bwd, attn_seq_half; /* cluster.gpu: the kernel model */
    bool kernels;                /* the layers are timed as their kernels (the kernel model) */
    rh_kernel_model km;          /* the kernel model, when `kernels` (its layers the model's) */
  } compute;
  rh_framework framework;        /* recipe.framework: what the kernel model runs */
  struct {
    int kind;             /* 0 timing-only, 1 softmax regression, 2 MLP, 3 a network (net.h) */
    int network;          /* kind net: an index of rh_net_names */
    int hidden;           /* MLP hidden units */
    char *name;
    char *init_from;      /* real models: initial parameters from a params.bin (float32) */
    double parameters;
    double forward_flops; /* per sample; 0: from the real model */
    rh_layer *layers;     /* owned; nlayers entries (one "all" layer when none are listed) */
    int nlayers;
    int family;           /* RH_FAMILY_*: hand-written, or built from a family's figures */
    int precision;        /* rh_precision */
    rh_transformer tf;    /* family transformer (tf.hidden is `hidden`, tf.layers `layers`) */
    int image_size, channels, classes; /* family cnn; 0: the network's own */
    double tokens_per_sample; /* sequence models: tokens a sample holds; 0: not one */
    bool shaped;          /* the layers give traffic and activations (a family, or an export) */
  } model;
  struct {
    double train;         /* 0 with IDX files: all their images */
    double validation;
    int source;           /* rh_data_source */
    double norm_mean, norm_std; /* images: (x - mean) / std after scaling to [0, 1]; std 0: none */
    int inputs, classes;  /* synthetic */
    double noise, seed;   /* synthetic; noise < 0: 0.28 sqrt(inputs) */
    char *train_images, *train_labels, *validation_images, *validation_labels; /* IDX */
    int loader;               /* data.loader: 0 synthetic, 1 cpu, 2 dali_cpu, 3 dali_gpu */
    double decode_per_thread; /* images/s a CPU thread decodes (0: the loader's default) */
  } data;
  struct {
    double batch; /* per worker */
    double base_lr;
    double epochs;
    int lr_scaling;       /* rh_lr_scaling */
    double warmup_epochs;
    double *decay_epochs; /* owned */
    int ndecay;
    double decay_factor;
    int optimizer;        /* rh_optimizer_kind */
    double momentum, beta1, beta2, eps, rho;
    int epochs_rule;      /* 0 fixed, 1 divided by size (rounded up) */
    int steps_rule;       /* rh_steps_rule */
    int val_rule;         /* rh_val_rule */
    double stop_at_step;
    double steps;                /* global optimizer steps to run (0: the epochs say) */
    double duration;             /* simulated seconds to run (0: no limit) */
    double seed;
    double sampler_seed;  /* DistributedSampler's seed; unset (< 0): 0 under torch, else seed */
    int shuffle;          /* rh_shuffle: false, true (rehearsal's generator), torch */
    double first_epoch;   /* the epoch number set_epoch gets first (torch's order) */
    int checkpoint_every;
    int sharding;         /* the samples (data.sharding): 0 distributed (DistributedSampler), 1
                           * replicated (whole set per rank) */
    int sharding_key;     /* recipe.sharding as written: the state's (rh_sharding), then the
                           * samples' older spelling (RH_SHARD_COUNT + data.sharding's) */
    int state_sharding;   /* rh_sharding: ZeRO's stage, FSDP's strategy */
    int recompute;        /* rh_recompute: activation checkpointing */
    bool reduce_scatter;  /* ZeRO-1/2: gradients reduce-scattered (DeepSpeed's reduce_scatter) */
    bool overlap_comm;    /* ZeRO-1/2: the reduce-scatters run in backward (DeepSpeed's flag) */
    bool limit_all_gathers; /* full: FSDP's rate limiter, two allgathers in flight */
    int checkpoint_format;  /* 0 full (FULL_STATE_DICT), 1 sharded (SHARDED_STATE_DICT) */
    int wrap_policy;        /* full, hybrid: 0 transformer blocks, 1 by size (min_num_params) */
    int shard_group;        /* hybrid: GPUs in a shard group, whole nodes; 0: a node's */
    double min_num_params;  /* wrap_policy size: a unit's least parameters */
    double reduce_bucket;   /* ZeRO-1/2: elements per reduce-scatter bucket */
    double allgather_bucket; /* ZeRO-1/2: elements per allgather of the updated parameters */
    double val_batch;     /* 0: batch_per_worker */
    double checkpoint_every_steps; /* 0: none between epochs */
    bool lr_written;      /* base_lr is given (a timing-only model prints no lr without it) */
    int framework;        /* 0 horovod (fusion and cycle), 1 ddp (PyTorch DDP's buckets) */
    double bucket_cap;    /* ddp: bytes (bucket_cap_mb, MiB as DDP counts them) */
    double first_bucket;  /* ddp: bytes of the first bucket */
    double accumulation;  /* micro-batches per step (gradient accumulation); 1: none */
    double reducer_per_byte; /* seconds of the framework's work per gradient byte (size > 1) */
    double micro_batch;   /* batch_per_worker as written; `batch` is the step's (x accumulation) */
  } recipe;
  struct {
    int enabled[RH_CHECK_COUNT]; /* -1: the default (on for real models; resume when asked) */
    double serial_steps;
    int resume_from_epoch;
    unsigned expect_fail;        /* bit per rh_check_id */
    double interval_tolerance;   /* commit_interval: the loss beyond Young's allowed (fraction) */
    double accuracy_within;      /* accuracy_parity: points below one worker's that pass */
    int accuracy_seeds;          /* accuracy_parity: baseline runs, each its own seed */
    char *accuracy_baseline;     /* accuracy_parity: a one-worker run's summary.json (owned) */
  } checks;
  unsigned mistakes;             /* rh_mistake bits */
  struct {
    rh_scenario_fault *events;   /* owned */
    int nevents;
    double seed;
    double gpu_mtbf_h, node_mtbf_h; /* 0: no random failures */
    /* the replay at scale (tool/incidents/): over horizon_days of wall time; 0: none */
    double horizon_s;             /* failures.horizon_days, in seconds */
    rh_scenario_cause *causes;   /* owned */
    int ncauses;
    double exposure_gpus, exposure_nodes, exposure_hours; /* the log the counts come from */
    unsigned only_per;            /* failures.only_per: the scopes kept (bits of rh_cause_scope); 0: all */
    char *source;                /* owned: where the causes come from */
  } failures;
  struct {
    bool present;
    int min_np, max_np;          /* 0: the starting size / no cap */
    double commit_every;         /* steps between commits */
    double rendezvous_s, rendezvous_timeout_s, timeout_s, worker_start_s, discovery_interval_s;
    double commit_bw;            /* bytes per second */
    rh_scenario_change *changes; /* owned */
    int nchanges;
  } elastic;
  struct {
    bool present;
    int policy;                  /* 0 none, 1 from_checkpoint */
    double relaunch_s;
    int max_restarts;
    /* the recovery pipeline of the replay at scale */
    double exit_poll_s, heartbeat_timeout_s, collective_timeout_s, diagnosis_s;
    int spare_nodes;             /* -1: as many as needed */
    double repair_s;             /* 0: not given */
    double init_per_rank_s;
    double checkpoint_every_s;   /* 0: the recipe's checkpoint_every_steps at the run's pace */
    bool checkpoint_async;
    double snapshot_bw;          /* bytes per second: async's copy to host memory */
  } restart;
  struct {
    double write_bw, read_bw;    /* bytes per second; 0: checkpoints cost no time */
    double latency;              /* seconds per checkpoint file */
  } storage;
  rh_settings settings; /* defaults, then environment, then the `collective:` section */
  struct {
    rh_sweep_axis *axes; /* owned; the `sweep:` section, read by `rehearsal sweep` */
    int naxes;
  } sweep;
} rh_scenario;

/* Reads and checks `path`.  On failure returns RH_ERR_INVALID (bad content) or RH_ERR_IO and
 * writes one message, naming the file, line and field, into err. */
rh_status rh_scenario_load(const char *path, rh_scenario *sc, char *err, size_t errlen);

/* How a command loads a scenario: the file, then the command line's `--set KEY=VALUE`
 * overrides (KEY a dotted path such as cluster.network.nic_Gbps, VALUE any YAML value: a
 * number, a word, [1, 2]), which replace or add the key before the file is checked.  An error in
 * an override names it ("--set KEY=VALUE: FIELD: ...") instead of a line of the file.
 * `cluster_only`: only the cluster (and collective) sections are required, as `collective` and
 * `platform` need no model, data or recipe. */
typedef struct rh_scenario_opts {
  const char *const *sets;
  int nsets;
  bool cluster_only;
  bool model_only; /* `rehearsal model`: only the name and the model are required and checked */
  bool real_target; /* it runs on real processes (rehearsal-mpi, rehearsal-gpu), not the simulator */
} rh_scenario_opts;
/* The least parameters of an FSDP unit under the scenario's wrap policy; 0: transformer blocks. */
static inline double rh_scenario_wrap_params(const rh_scenario *sc) {
  return sc->recipe.wrap_policy == 1 ? sc->recipe.min_num_params : 0;
}
rh_status rh_scenario_load_opts(const char *path, const rh_scenario_opts *opts, rh_scenario *sc,
                                char *err, size_t errlen);
void rh_scenario_free(rh_scenario *sc);

/* Samples a second the input pipeline (data.loader) feeds each GPU of the first node: its CPU
 * threads' decode rate shared over its GPUs; 0 where it is no limit (synthetic, dali_gpu). */
double rh_scenario_input_rate(const rh_scenario *sc);

/* How the scenario launches: its cluster and settings, and the runtime's forms of its failure,
 * elastic and restart sections (has_*: the scenario has the section).  `config` points into
 * this and into sc, which must outlive it; rh_scenario_launch_free releases it. */
typedef struct rh_scenario_launch {
  rh_launch_config config;
  rh_fault_plan plan;
  rh_elastic_config elastic;
  rh_restart_config restart;
  bool has_plan, has_elastic, has_restart;
} rh_scenario_launch;

rh_status rh_scenario_launch_init(const rh_scenario *sc, rh_scenario_launch *l);
void rh_scenario_launch_free(rh_scenario_launch *l);

/* The most GPUs (spares included) a scenario's cluster may have: 131,072, which took 128 s and
 * 5.8 GiB for 10 steps on 2 cores (docs/simulation-cost.md); twice that would pass 11 GiB. */
#define RH_SCENARIO_MAX_GPUS 131072
/* The simulator's cost of a job of `gpus`, from bench_run's measurements of a 10-step job on 2
 * cores (16,384, 65,536 and 131,072 GPUs: 14.4, 55.6 and 128 s; 0.8, 3.0 and 5.8 GiB): seconds
 * and MiB, a longer job more. */
void rh_scenario_cost(long gpus, double *seconds, double *mib);

/* Whether the scenario's failure cause i is replayed: failures.only_per keeps its scope (or
 * there is no only_per). */
bool rh_scenario_cause_kept(const rh_scenario *sc, int i);

/* Ranks in the scenario's cluster. */
int rh_scenario_size(const rh_scenario *sc);

/* Where event `index` of failures.events was given, from the line it carries, for reports: "line
 * 26" of the scenario, or "--set failures.events, event 2" when a command-line override gave it
 * (rh_scenario_line_is_set).  Returns buf. */
bool rh_scenario_line_is_set(int line);
const char *rh_scenario_event_origin(int line, int index, char *buf, size_t len);

/* Rank 0's view of the job's first world, to ask the cost model what runs and what it costs
 * (rh__plan).  The caller frees it with rh_topology_free(&view->topo). */
typedef struct rh_scenario_view {
  rh_topology topo;
  rh_ctx ctx;
} rh_scenario_view;
rh_status rh_scenario_view_init(const rh_scenario *sc, rh_scenario_view *view);
/* Training steps per epoch for each worker, by the recipe's rule. */
long rh_scenario_steps_per_epoch(const rh_scenario *sc);

/* The folder that holds the presets (presets/<kind>/NAME.yaml), written into buf: RH_PRESETS,
 * else beside the running program (installed, or the tree it was built in), else the source
 * tree it was configured from.  *source (when not NULL) says which, for the settings block. */
const char *rh_presets_root(char *buf, size_t len, const char **source);

/* Writes the scenario reference (Markdown: every key, its type, default, accepted values and what
 * it does) from the parser's schema table.  0, or 1 when the stream failed. */
int rh_scenario_reference(FILE *out);

/* Opens path for reading ("r" or "rb") when it is a regular file.  The open is non-blocking, so
 * that a FIFO without a writer is found by fstat instead of holding the open forever.  0 with *f;
 * -1 with errno when it cannot be opened; 1 when it is not a regular file (*st says what it is:
 * S_ISDIR a directory, else a FIFO, a device, a socket). */
int rh_open_regular(const char *path, const char *mode, FILE **f, struct stat *st);
/* What the path is ("a directory", "a FIFO", "a device", "a socket"), for a message after
 * rh_open_regular returned 1. */
const char *rh_not_regular(const struct stat *st);

#endif
