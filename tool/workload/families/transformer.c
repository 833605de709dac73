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

bool rh_family_transformer(const rh_transformer *t, rh_layers *out) {
  double s = t->seq_len, h = t->hidden, a = t->heads, f = t->ffn, V = t->vocab;
  double kv = (double)t->kv_heads * h / a; /* width of k and of v */
  double b = t->bias ? 1 : 0;
  double norm_params = t->norm == RH_NORM_LAYERNORM ? 2 * h : h;
  double up = t->activation == RH_ACT_SWIGLU ? 2 : 1; /* gate and up, or fc */
  bool eager = t->attention == RH_ATTN_EAGER;
  double scores = a * s * s;

  rh_layers_add(out, V * h, 0, 2 * s * h, s * h, "embed.tokens");
  if (t->positions > 0) rh_layers_add(out, t->positions * h, 0, 3 * s * h, s * h, "embed.positions");
  if (t->type_vocab > 0) rh_layers_add(out, t->type_vocab * h, 0, 3 * s * h, s * h, "embed.types");
  if (!t->decoder) rh_layers_add(out, 2 * h, 0, 2 * s * h, s * h, "embed.norm");
  for (int i = 0; i < t->layers; i++) {
    if (t->decoder) rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "blocks.%d.norm1", i);
    rh_layers_add(out, h * (h + 2 * kv) + b * (h + 2 * kv), 2 * s * h * (h + 2 * kv),
                  s * h + s * (h + 2 * kv), s * (h + 2 * kv), "blocks.%d.attn.qkv", i);
    rh_layers_add(out, 0, 4 * s * s * h,
                  s * (h + 2 * kv) + s * h + (eager ? 4 * scores : 0),
                  s * h + (eager ? 2 * scores : 0), "blocks.%d.attn.core", i);
    rh_layers_add(out, h * h + b * h, 2 * s * h * h, 2 * s * h + 3 * s * h, s * h,
                  "blocks.%d.attn.out", i);
    /* a decoder's second norm; an encoder's first, after attention (its second follows the MLP) */
    rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "blocks.%d.norm%d", i, t->decoder ? 2 : 1);
    rh_layers_add(out, up * (h * f + b * f), up * 2 * s * h * f, s * h + up * s * f, up * s * f,
                  "blocks.%d.mlp.up", i);
    rh_layers_add(out, 0, 0, (up + 1) * s * f, s * f, "blocks.%d.mlp.act", i);
    rh_layers_add(out, f * h + b * h, 2 * s * f * h, s * f + s * h + 3 * s * h, s * h,
                  "blocks.%d.mlp.down", i);
    if (!t->decoder) rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "blocks.%d.norm2", i);
  }
  double head_weights = t->tied_embeddings ? 0 : V * h;
  if (t->decoder) {
    rh_layers_add(out, norm_params, 0, 2 * s * h, s * h, "norm");
    rh_layers_add(out, head_weights, 2 * s * h * V, s * h + s * V, s * V, "head");
  } else {
    rh_layers_add(out, h * h + h, 2 * h * h, 2 * h, h, "pooler");
    rh_layers_add(out, h * h + h, 2 * s * h * h, 2 * s * h + 2 * s * h, s * h, "mlm.transform");
    rh_layers_add(out, 2 * h, 0, 2 * s * h, s * h, "mlm.norm");
    rh_layers_add(out, head_weights + V, 2 * s * h * V, s * h + s * V, s * V, "mlm.decoder");
    rh_layers_add(out, 2 * h + 2, 2 * h * 2, h + 2, 2, "nsp");
  }
  /* softmax cross-entropy over the logits: read them, write the probabilities */
  rh_layers_add(out, 0, 0, 2 * s * V, s * V, "loss");
  return !out->failed;
}
