/*
 * transformer.c: the transformer family (see family.h).  Per block, the layers a Hugging Face
 * model runs: a norm, the q/k/v projection, the attention core (QK^T, softmax, AV: 4 s^2 h FLOPs
 * with no parameters), the output projection, a norm, the MLP's up projection (gate and up for
 * SwiGLU), its activation, and its down projection; decoders put the norms first (pre-norm),
 * encoders after (post-norm).  Sizes are per sequence of seq_len tokens.  Traffic counts the
 * values each kernel reads and writes (a residual add with the projection before it); eager
 * attention also writes, normalises and reads the heads x s x s scores, flash attention keeps
 * them on chip.
 */
#include "family.h"

#include <stdio.h>

const char *rh_transformer_invalid(const rh_transformer *t, const char **key) {
  static char why[160];
  *key = NULL;
  if (t->layers < 1) *key = "layers";
  else if (t->hidden < 1) *key = "hidden";
  else if (t->heads < 1) *key = "heads";
  else if (t->vocab < 1) *key = "vocab";
  else if (t->seq_len < 1) *key = "seq_len";
  else if (t->ffn < 1) *key = "ffn";
  if (*key) {
    snprintf(why, sizeof why, "a transformer needs a positive %s", *key);
    return why;
  }
  if (t->hidden % t->heads != 0) {
    *key = "heads";
    snprintf(why, sizeof why, "%d heads do not divide hidden %d", t->heads, t->hidden);
    return why;
  }
  if (t->kv_heads < 1 || t->kv_heads > t->heads || t->heads % t->kv_heads != 0) {
    *key = "kv_heads";
    snprintf(why, sizeof why, "%d kv_heads do not divide the %d heads", t->kv_heads, t->heads);
    return why;
  }
  if (t->positions > 0 && t->seq_len > t->positions) {
    *key = "seq_len";
    snprintf(why, sizeof why, "%d tokens is more than the %d learned positions", t->seq_len,
             t->positions);
    return why;
  }
  return NULL;
}

/* The shape of a linear layer on `rows` rows of `in` inputs to `out` outputs. */
static rh_layer_op linear_op(double rows, double out, double in, bool bias, bool residual) {
  return (rh_layer_op){.kind = RH_LAYER_GEMM, .m = rows, .n = out, .k = in, .groups = 1,
                       .bias = bias, .residual = residual, .in = rows * in};
}

static rh_layer_op elementwise_op(rh_layer_kind kind, int sub, double values) {
  return (rh_layer_op){.kind = kind, .sub = sub, .values = values};
}

/* The embeddings: tokens, learned positions, token types, and an encoder's norm of their sum. */
static void embeddings(const rh_transformer *t, rh_layers *out) {
  double s = t->seq_len, h = t->hidden;
  rh_layers_add(out, t->vocab * h, 0, 2 * s * h, s * h, "embed.tokens");
  rh_layers_shape(out, (rh_layer_op){.kind = RH_LAYER_EMBED, .rows = t->vocab, .n = h, .values = s * h});
  if (t->positions > 0) {
    rh_layers_add(out, t->positions * h, 0, 3 * s * h, s * h, "embed.positions");
    rh_layers_shape(out, (rh_layer_op){.kind = RH_LAYER_EMBED, .rows = t->positions, .n = h, .values = s * h});
  }
  if (t->type_vocab > 0) {
    rh_layers_add(out, t->type_vocab * h, 0, 3 * s * h, s * h, "embed.types");
    rh_layers_shape(out, (rh_layer_op){.kind = RH_LAYER_EMBED, .rows = t->type_vocab, .n = h, .values = s * h});
  }
  if (!t->decoder) {
    rh_layers_add(out, 2 * h, 0, 2 * s * h, s * h, "embed.norm");
    rh_layers_shape(out, elementwise_op(RH_LAYER_NORM, 1, s * h));
  }
}

/* One block: attention then the MLP, pre-norm (decoders) or post-norm (encoders). */
static void block(const rh_transformer *t, int i, rh_layers *out) {
  double s = t->seq_len, h = t->hidden, a = t->heads, f = t->ffn;
  double kv = (double)t->kv_heads * h / a; /* width of k and of v */
  double b = t->bias ? 1 : 0;
  double norm_params = t->norm == RH_NORM_LAYERNORM ? 2 * h : h;
  int norm = t->norm == RH_NORM_LAYERNORM ? 1 : 2;
  double up = t->activation == RH_ACT_SWIGLU ? 2 : 1; /* gate and up, or fc */
  bool eager = t->attention == RH_ATTN_EAGER;
  double scores = a * s * s;
  if (t->decoder) {
    rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "blocks.%d.norm1", i);
    rh_layers_shape(out, elementwise_op(RH_LAYER_NORM, norm, s * h));
  }
  rh_layers_add(out, h * (h + 2 * kv) + b * (h + 2 * kv), 2 * s * h * (h + 2 * kv),
                s * h + s * (h + 2 * kv), s * (h + 2 * kv), "blocks.%d.attn.qkv", i);
  rh_layers_shape(out, linear_op(s, h + 2 * kv, h, t->bias, false));
  rh_layers_add(out, 0, 4 * s * s * h, s * (h + 2 * kv) + s * h + (eager ? 4 * scores : 0),
                s * h + (eager ? 2 * scores : 0), "blocks.%d.attn.core", i);
  rh_layers_shape(out, (rh_layer_op){.kind = RH_LAYER_ATTENTION, .heads = a, .kv_heads = t->kv_heads,
                                     .seq = s, .head_dim = h / a, .causal = t->decoder,
                                     .values = s * h});
  rh_layers_add(out, h * h + b * h, 2 * s * h * h, 2 * s * h + 3 * s * h, s * h,
                "blocks.%d.attn.out", i);
  rh_layers_shape(out, linear_op(s, h, h, t->bias, true));
  /* a decoder's second norm; an encoder's first, after attention (its second follows the MLP) */
  rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "blocks.%d.norm%d", i, t->decoder ? 2 : 1);
  rh_layers_shape(out, elementwise_op(RH_LAYER_NORM, norm, s * h));
  rh_layers_add(out, up * (h * f + b * f), up * 2 * s * h * f, s * h + up * s * f, up * s * f,
                "blocks.%d.mlp.up", i);
  rh_layers_shape(out, linear_op(s, up * f, h, t->bias, false));
  rh_layers_add(out, 0, 0, (up + 1) * s * f, s * f, "blocks.%d.mlp.act", i);
  rh_layers_shape(out, elementwise_op(RH_LAYER_ACT, t->activation == RH_ACT_SWIGLU ? 2 : 1, s * f));
  rh_layers_add(out, f * h + b * h, 2 * s * f * h, s * f + s * h + 3 * s * h, s * h,
                "blocks.%d.mlp.down", i);
  rh_layers_shape(out, linear_op(s, h, f, t->bias, true));
  if (!t->decoder) {
    rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "blocks.%d.norm2", i);
    rh_layers_shape(out, elementwise_op(RH_LAYER_NORM, norm, s * h));
  }
}

/* The heads: a decoder's final norm and LM head; an encoder's pooler, masked-LM head (on every
 * token, or on `predictions` of them) and next-sentence head.  Then the loss. */
static void heads(const rh_transformer *t, rh_layers *out) {
  double s = t->seq_len, h = t->hidden, V = t->vocab;
  double norm_params = t->norm == RH_NORM_LAYERNORM ? 2 * h : h;
  double head_weights = t->tied_embeddings ? 0 : V * h;
  double rows = s; /* the rows the LM head and the loss run on */
  if (t->decoder) {
    rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "norm");
    rh_layers_shape(out, elementwise_op(RH_LAYER_NORM, t->norm == RH_NORM_LAYERNORM ? 1 : 2, s * h));
    rh_layers_add(out, head_weights, 2 * s * h * V, s * h + s * V, s * V, "head");
    rh_layers_shape(out, linear_op(s, V, h, false, false));
  } else {
    if (t->predictions > 0 && t->predictions < s) rows = t->predictions;
    rh_layers_add(out, h * h + h, 2 * h * h, 2 * h, h, "pooler");
    rh_layers_shape(out, linear_op(1, h, h, true, false));
    rh_layers_add(out, h * h + h, 2 * rows * h * h, 2 * rows * h + 2 * rows * h, rows * h,
                  "mlm.transform");
    rh_layers_shape(out, linear_op(rows, h, h, true, false));
    rh_layers_add(out, 2 * h, 0, 2 * rows * h, rows * h, "mlm.norm");
    rh_layers_shape(out, elementwise_op(RH_LAYER_NORM, 1, rows * h));
    rh_layers_add(out, head_weights + V, 2 * rows * h * V, rows * h + rows * V, rows * V,
                  "mlm.decoder");
    rh_layers_shape(out, linear_op(rows, V, h, true, false));
    rh_layers_add(out, 2 * h + 2, 2 * h * 2, h + 2, 2, "nsp");
    rh_layers_shape(out, linear_op(1, 2, h, true, false));
  }
  /* softmax cross-entropy over the logits: read them, write the probabilities */
  rh_layers_add(out, 0, 0, 2 * rows * V, rows * V, "loss");
  rh_layers_shape(out, (rh_layer_op){.kind = RH_LAYER_LOSS, .m = rows, .rows = V, .values = rows * V});
}

bool rh_family_transformer(const rh_transformer *t, rh_layers *out) {
  embeddings(t, out);
  for (int i = 0; i < t->layers; i++) block(t, i, out);
  heads(t, out);
  return !out->failed;
}
