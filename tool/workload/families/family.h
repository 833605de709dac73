/*
 * family.h: models by architecture.  A family expands a few figures (a Hugging Face config's, or
 * a torchvision network's name) into the layers a training step runs, in forward order, each with
 * its parameters, its forward FLOPs (two per multiply-add of its GEMMs and convolutions; bias
 * adds, norms and activations count none), the values it reads and writes (the roofline's memory
 * traffic) and the values it keeps for backward (activation memory), all per sample.  Backward
 * makes gradients ready in the reverse of this order.  Sizes are values, not bytes: the run's
 * precision sets the bytes of each.
 */
#ifndef RH_FAMILY_H
#define RH_FAMILY_H

#include "rehearsal.h"

#include <stdbool.h>
#include <stddef.h>

/* What a layer computes, for the kernels it expands into (kernels/kernels.h); RH_LAYER_OTHER: a
 * hand-written or exported layer, one kernel on the roofline. */
typedef enum rh_layer_kind {
  RH_LAYER_OTHER = 0,
  RH_LAYER_GEMM,      /* a linear layer (sub 0) or a convolution (sub 1, an implicit GEMM) */
  RH_LAYER_ATTENTION, /* the attention core: scores, softmax, their product with the values */
  RH_LAYER_NORM,      /* batch norm (sub 0), layer norm (1), RMS norm (2) */
  RH_LAYER_ACT,       /* ReLU (sub 0), GELU (1), SwiGLU (2) */
  RH_LAYER_ADD,       /* a residual add */
  RH_LAYER_POOL,      /* max (sub 0) or average (1) pooling */
  RH_LAYER_CONCAT,    /* branches' outputs copied into one tensor */
  RH_LAYER_EMBED,     /* a table lookup of `rows` rows */
  RH_LAYER_LOSS,      /* softmax cross-entropy over `rows` classes, for `m` rows a sample */
} rh_layer_kind;

/* A layer's shape, per sample.  GEMM: m rows (output positions, or tokens) of n outputs, each a
 * sum over k inputs, in `groups` groups (n all the outputs, k the fan-in of one); first: no input
 * gradient (the network's first layer); bias: a bias to reduce in backward; residual: the
 * layer's output is added to the residual stream (transformers), with dropout before the add
 * when the model has it.  Elementwise kinds: `values` out, `in` in (pools; a GEMM's input values).
 * Attention: heads, kv_heads, seq, head_dim, causal.  EMBED: `rows` of the table, n wide.  LOSS:
 * `rows` classes, for m rows a sample. */
typedef struct rh_layer_op {
  rh_layer_kind kind;
  int sub, groups;
  int kernel, stride; /* a convolution's square kernel side (0: not square) and stride */
  double m, n, k, values, in, rows;
  double heads, kv_heads, seq, head_dim;
  bool first, bias, residual, causal;
} rh_layer_op;

typedef struct rh_layer {
  char *name;           /* owned */
  double parameters;
  double forward_flops; /* per sample; 0 in a hand-written list: a share of the model's */
  double memory_bytes;  /* per sample, forward, as a scenario writes it (memory_MB_per_sample) */
  double traffic;       /* values read and written per sample, forward */
  double activations;   /* values kept for backward, per sample */
  bool flops_given;     /* a hand-written layer gives forward_gflops_per_sample (0 allowed) */
  rh_layer_op op;       /* a family's layer: what it computes (kind 0: not known) */
} rh_layer;

/* A growing list of layers (rh_layers_free releases it). */
typedef struct rh_layers {
  rh_layer *v;
  int n, cap;
  bool failed; /* out of memory on the way */
} rh_layers;

/* Appends a layer whose name is printf-formatted; false when out of memory. */
bool rh_layers_add(rh_layers *l, double parameters, double flops, double traffic,
                   double activations, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Gives the layer added last its shape (no-op after a failure). */
void rh_layers_shape(rh_layers *l, rh_layer_op op);
void rh_layers_free(rh_layers *l);

typedef enum { RH_ACT_GELU = 0, RH_ACT_SWIGLU = 1 } rh_activation;
typedef enum { RH_NORM_LAYERNORM = 0, RH_NORM_RMSNORM = 1 } rh_norm_kind;
typedef enum { RH_ATTN_FLASH = 0, RH_ATTN_EAGER = 1 } rh_attention_kind;

/* A transformer as a Hugging Face config gives it.  decoder: a causal LM (pre-norm blocks, a final
 * norm, the LM head); else a BERT-style encoder (embedding norm, post-norm blocks, pooler, the
 * masked-LM and next-sentence heads).  positions: learned position embeddings (0: rotary). */
typedef struct rh_transformer {
  int layers, hidden, heads, kv_heads, ffn, vocab, seq_len, positions, type_vocab;
  rh_activation activation;
  rh_norm_kind norm;
  rh_attention_kind attention;
  bool tied_embeddings, decoder, bias;
  double dropout;  /* the dropout rate of the hidden states and attention probabilities */
  int predictions; /* an encoder's masked-LM head runs on this many tokens a sequence (0: all) */
} rh_transformer;

/* Why a transformer's figures cannot be built (NULL: they can), naming the key at fault in *key. */
const char *rh_transformer_invalid(const rh_transformer *t, const char **key);
/* Appends a transformer's layers, per sequence of seq_len tokens. */
bool rh_family_transformer(const rh_transformer *t, rh_layers *out);

/* The convolutional networks by name (NULL-terminated), and their default input side. */
extern const char *const rh_cnn_names[];
int rh_cnn_default_image(int which);
int rh_cnn_default_channels(int which);
int rh_cnn_default_classes(int which); /* 1000 (ImageNet); the seeds' networks 10 */
/* Appends network `which` (an index of rh_cnn_names) on images of image x image x channels, with
 * `classes` outputs; false when out of memory or when the image is too small for the network
 * (then *why says so). */
bool rh_family_cnn(int which, int image, int channels, int classes, rh_layers *out,
                   const char **why);

#endif
