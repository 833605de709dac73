/*
 * kernels.h: a training step as the kernels a GPU runs.  Each layer of a family (family.h) expands
 * into the kernels a framework launches for it (expand.c): forward, backward-data and
 * backward-weight GEMMs and convolutions, norms, activations, residual adds, pools, dropout, the
 * attention core, the loss; the step adds the optimizer's kernels and mixed precision's casts and
 * loss scaling.  Each kernel is timed by what bounds it: its tiles in waves over the GPU's SMs
 * (gemm.c), its bytes at the GPU's achievable memory bandwidth, a published attention rate
 * (attention.c), or the host, which issues one kernel every launch_us (step.c).  On the CUDA cores
 * (fp32) a 3x3 convolution of stride 1 may run as Winograd's F(2x2, 3x3) (Lavin and Gray 2016,
 * "Fast Algorithms for Convolutional Neural Networks": 16 multiplies for 2 x 2 outputs instead of
 * 36), non-fused: its input and output go through memory transformed, each 4x4 tile of the input
 * and of the products for a 2x2 tile of the output (9 passes over the layer's bytes where the GEMM
 * makes one); cuDNN picks it where it is faster (published fp32 VGG-16 throughput on a P100 needs
 * more than the GPU's fp32 peak without it).  What a framework
 * fuses, how it launches and how its optimizer runs are a framework profile (presets/framework/).
 */
#ifndef RH_KERNELS_H
#define RH_KERNELS_H

#include "families/family.h"

#include <pthread.h>
#include <stdbool.h>

/* What bounds a kernel: its arithmetic, its memory traffic, or the host that launches it. */
typedef enum rh_bound { RH_BOUND_COMPUTE = 0, RH_BOUND_MEMORY, RH_BOUND_LAUNCH } rh_bound;
extern const char *const rh_bound_names[]; /* "compute", "memory", "launch" */

/* The step's phases, in the order the host issues them. */
typedef enum rh_step_phase { RH_STEP_FORWARD = 0, RH_STEP_BACKWARD, RH_STEP_OPTIMIZER } rh_step_phase;

typedef enum rh_kernel_kind { RH_KERNEL_GEMM = 0, RH_KERNEL_ATTENTION, RH_KERNEL_MEMORY } rh_kernel_kind;

/* One kernel (or `launches` of the same kind, a per-tensor loop).  GEMM: `count` GEMMs of
 * m x n x k (the groups of a grouped convolution, the heads of a batched product).  ATTENTION:
 * a fused attention kernel of `flops` (fwd or bwd), seq, head_dim, causal.  Every kind moves
 * `bytes` of memory. */
typedef struct rh_kernel {
  const char *what; /* static: "fprop", "dgrad", "wgrad", "bn+relu fwd", "sgd", ... */
  int layer;        /* the layer it belongs to; -1: the step's own (optimizer, scaler) */
  rh_step_phase phase;
  rh_kernel_kind kind;
  double m, n, k, count;
  double seq, head_dim;
  bool causal, backward;
  bool winograd; /* a 3x3 stride-1 convolution, which the CUDA cores may run as Winograd's */
  bool conv;     /* a convolution (cuDNN's), not a GEMM of a linear layer (cuBLAS's) */
  double flops, bytes;
  int launches;
  double seconds; /* on the GPU alone (rh_kernels_price) */
  rh_bound bound;
} rh_kernel;

/* A growing list of kernels (rh_kernel_list_free releases it). */
typedef struct rh_kernel_list {
  rh_kernel *v;
  int n, cap;
  bool failed;
} rh_kernel_list;
void rh_kernel_list_free(rh_kernel_list *l);

/* A GPU as the kernel model sees it; each figure's source is in its preset. */
typedef struct rh_kernel_gpu {
  double peak;            /* FLOP/s, dense, at the training precision */
  double gemm_efficiency; /* the best share of `peak` a cuBLAS GEMM reaches */
  double memory_bw;       /* bytes/s a copy kernel reaches */
  double simt_peak;       /* FLOP/s of the CUDA cores (fp32): narrow grouped convolutions */
  double simt_efficiency; /* the best share of simt_peak an fp32 GEMM reaches */
  double conv_efficiency; /* cuDNN's convolutions against cuBLAS's GEMMs at this precision (0: 1) */
  int sms;                /* streaming multiprocessors */
  double kernel_floor;    /* s: the shortest a kernel takes on the GPU, back to back */
  double attn_fwd, attn_bwd; /* FLOP/s of the fused attention kernels at long sequences */
  double attn_seq_half;   /* the sequence length at which they reach half that */
  bool tensor_cores;      /* the precision runs on tensor cores (tiles of 128 and more) */
} rh_kernel_gpu;

enum { RH_OPT_PER_TENSOR = 0, RH_OPT_FOREACH = 1, RH_OPT_FUSED = 2, RH_OPT_PER_TENSOR_FUSED = 3 };
enum { RH_ATTN_IMPL_EAGER = 0, RH_ATTN_IMPL_FLASH = 1 };

/* A framework profile (presets/framework/NAME.yaml). */
typedef struct rh_framework {
  char *name;              /* owned by the scenario */
  double launch;           /* s: host time to issue one kernel, forward and optimizer (Python) */
  double backward_launch;  /* s: the same in backward (the autograd engine); 0: launch */
  double host_step;        /* s: the host's own work per step before its first kernel */
  int layout;              /* 0 NCHW (tensor cores pay transposes), 1 NHWC (channels-last) */
  bool fuse_bn_relu;       /* batch norm + ReLU (+ a residual add before it) in one kernel */
  bool fuse_bias_act;      /* a linear layer's activation in its GEMM's epilogue */
  bool fuse_dropout_add;   /* dropout and the residual add in one kernel */
  bool fuse_norm;          /* a norm fused with the add before it */
  bool fuse_softmax;       /* eager attention: scale, mask and softmax in one kernel */
  bool fuse_loss;          /* the loss and its gradient in one pass over the logits */
  int optimizer;           /* RH_OPT_*: a loop over tensors, foreach lists, fused over all the
                            * tensors, or one fused kernel a tensor */
  int zero_grad;           /* 1: gradients zeroed each step and added into (0: set to None) */
  bool amp_weight_casts;   /* mixed precision casts the weights every step (autocast) */
} rh_framework;

/* The optimizers' state the kernels read and write. */
typedef enum rh_kernel_optimizer { RH_KOPT_SGD = 0, RH_KOPT_MOMENTUM, RH_KOPT_ADAM } rh_kernel_optimizer;

/* Everything a step's kernels depend on but the batch. */
typedef struct rh_kernel_model {
  const rh_layer *layers;
  int nlayers;
  rh_kernel_gpu gpu;
  rh_framework fw;
  double value_bytes;   /* an activation value: 2 (fp16, bf16) or 4 */
  bool mixed;           /* fp32 weights, low-precision math (autocast's casts: the framework's) */
  bool scaler;          /* fp16's loss scaling (GradScaler: unscale, check, update) */
  double dropout;       /* the model's dropout rate (transformers) */
  rh_kernel_optimizer optimizer;
  bool flash;           /* the attention core runs fused (else eager) */
} rh_kernel_model;

/* Appends the kernels of one step of `batch` samples, in the order the host issues them:
 * forward, backward (last layer first), then the optimizer.  False when out of memory. */
bool rh_kernels_expand(const rh_kernel_model *km, double batch, rh_kernel_list *out);

/* Seconds of one GEMM kernel by shape (gemm.c): count GEMMs of m x n x k. */
double rh_gemm_seconds(const rh_kernel_gpu *g, double m, double n, double k, double count);
/* Seconds of a fused attention kernel of `flops` (attention.c). */
double rh_attention_seconds(const rh_kernel_gpu *g, double flops, double seq, bool causal,
                            bool backward);

/* Times each kernel on the GPU alone (seconds and bound compute or memory). */
void rh_kernels_price(const rh_kernel_gpu *g, rh_kernel_list *l);

/* A step priced: seconds of each layer's forward and backward kernels and of the optimizer, as
 * the GPU runs them behind a host that issues them (a kernel the GPU waited for is bound by its
 * launch), and the host's own work before the first one. */
typedef struct rh_step_times {
  double batch;
  double *forward, *backward; /* per layer (owned) */
  double host, optimizer, total;
  double gpu_busy;            /* seconds the GPU computes (the rest it waits for the host) */
  int kernels, launches;
  int by_bound[3];            /* kernels bound by compute, memory, launch */
} rh_step_times;

/* Prices the whole step of `batch` samples; false when out of memory.  *st is the caller's to
 * release with rh_step_times_free; kernels, when not NULL, receives the priced list. */
bool rh_step_price(const rh_kernel_model *km, double batch, rh_step_times *st,
                   rh_kernel_list *kernels);
void rh_step_times_free(rh_step_times *st);

/* A cache of priced steps by batch, shared by the ranks of a run (a step shape is priced once).
 * rh_step_cache_get blocks on the cache's lock only while it prices a new shape; the times are
 * the cache's and live until rh_step_cache_free; NULL when out of memory. */
typedef struct rh_step_cache {
  const rh_kernel_model *km;
  pthread_mutex_t lock;
  rh_step_times **entries; /* each priced once and kept: ranks hold them through a step */
  int n, cap;
} rh_step_cache;
void rh_step_cache_init(rh_step_cache *c, const rh_kernel_model *km);
const rh_step_times *rh_step_cache_get(rh_step_cache *c, double batch);
void rh_step_cache_free(rh_step_cache *c);

#endif
