/*
 * attention.c: a fused attention kernel (FlashAttention-2/3, cuDNN) at a published rate.  The
 * FlashAttention papers table each kernel's FLOP/s by sequence length: it rises with the
 * sequence, as each thread block's share of the work grows against its fixed start and end, and
 * levels off.  So rate(s) = rate_max x s / (s + s_half), with rate_max and s_half from the GPU's
 * table (its preset names it).  A causal mask skips half the work but leaves the blocks on the
 * diagonal: it runs at the rate of half the sequence.  Backward has its own rate.  Below, the
 * kernels of the attention core: fused, or eager (two batched products with a pass over the
 * heads x s x s scores between them).
 */
#include "expand.h"

double rh_attention_seconds(const rh_kernel_gpu *g, double flops, double seq, bool causal,
                            bool backward) {
  double top = backward ? g->attn_bwd : g->attn_fwd;
  if (!(top > 0)) top = g->peak * (g->gemm_efficiency > 0 ? g->gemm_efficiency : 1) / 2;
  double s = causal ? seq / 2 : seq;
  double rate = g->attn_seq_half > 0 ? top * s / (s + g->attn_seq_half) : top;
  return flops / rate;
}

/* ---- the attention core's kernels ----------------------------------------------------------- */

/* Eager attention's pass over the scores between its two batched products: scale, mask and
 * softmax (in fp32 under autocast), dropout, and the cast back; or one fused softmax kernel. */
static void scores_pass(expansion *x, double S, bool backward) {
  const rh_kernel_model *km = x->km;
  double vb = km->value_bytes, vs = km->fw.fuse_softmax ? vb : (km->mixed ? 4 : vb);
  bool drop = km->dropout > 0;
  if (km->fw.fuse_softmax) {
    rh__kernel_memory(x, backward ? "softmax bwd" : "scale+mask+softmax", (backward ? 3 : 2) * S * vb, 1);
  } else if (!backward) {
    rh__kernel_memory(x, "scale", 2 * S * vb, 1);
    rh__kernel_memory(x, "mask", 2 * S * vb, 1);
    rh__kernel_memory(x, "softmax", S * (vb + vs), 1);
  } else {
    rh__kernel_memory(x, "softmax bwd", 3 * S * vs, 1);
    rh__kernel_memory(x, "scale bwd", 2 * S * vb, 1);
  }
  if (drop) rh__kernel_memory(x, backward ? "dropout bwd" : "dropout", S * (2 * vs + 1), 1);
  if (vs != vb) rh__kernel_memory(x, "cast", S * (vs + vb), 1);
}

static void eager(expansion *x, const rh_layer_op *o, bool backward) {
  double vb = x->km->value_bytes, B = x->batch, s = o->seq, d = o->head_dim, a = o->heads;
  double S = B * a * s * s, q = B * s * a * d, kv = B * s * o->kv_heads * d;
  if (!backward) {
    rh__kernel_memory(x, "q,k,v layout", 2 * (q + 2 * kv) * vb, 3);
    rh__kernel_emit(x, (rh_kernel){.what = "q k^T", .kind = RH_KERNEL_GEMM, .m = s, .n = s, .k = d,
                                   .count = B * a, .flops = 2 * s * s * d * B * a,
                                   .bytes = (q + kv + S) * vb});
    scores_pass(x, S, false);
    rh__kernel_emit(x, (rh_kernel){.what = "p v", .kind = RH_KERNEL_GEMM, .m = s, .n = d, .k = s,
                                   .count = B * a, .flops = 2 * s * s * d * B * a,
                                   .bytes = (S + kv + q) * vb});
    rh__kernel_memory(x, "context layout", 2 * q * vb, 1);
    return;
  }
  rh__kernel_memory(x, "context layout bwd", 2 * q * vb, 1);
  for (int i = 0; i < 2; i++) /* dP = dO V^T, dV = P^T dO */
    rh__kernel_emit(x, (rh_kernel){.what = i ? "dv" : "dp", .kind = RH_KERNEL_GEMM,
                                   .m = s, .n = i ? d : s, .k = i ? s : d, .count = B * a,
                                   .flops = 2 * s * s * d * B * a, .bytes = (S + q + kv) * vb});
  scores_pass(x, S, true);
  for (int i = 0; i < 2; i++) /* dQ = dS K, dK = dS^T Q */
    rh__kernel_emit(x, (rh_kernel){.what = i ? "dk" : "dq", .kind = RH_KERNEL_GEMM,
                                   .m = s, .n = d, .k = s, .count = B * a,
                                   .flops = 2 * s * s * d * B * a, .bytes = (S + q + kv) * vb});
  rh__kernel_memory(x, "q,k,v layout bwd", 2 * (q + 2 * kv) * vb, 3);
}

/* FlashAttention: forward 4 s^2 d FLOPs a head (half with a causal mask), backward 2.5 times
 * that (its five products against forward's two), reading q, k, v and writing the output. */
static void flash(expansion *x, const rh_layer_op *o, bool backward) {
  double vb = x->km->value_bytes, B = x->batch, s = o->seq, d = o->head_dim, a = o->heads;
  double f = 4 * s * s * d * a * B * (o->causal ? 0.5 : 1);
  double io = B * s * (2 * a + 2 * o->kv_heads) * d * vb;
  rh__kernel_emit(x, (rh_kernel){.what = backward ? "flash bwd" : "flash fwd",
                                 .kind = RH_KERNEL_ATTENTION, .seq = s, .head_dim = d,
                                 .causal = o->causal, .backward = backward,
                                 .flops = backward ? 2.5 * f : f, .bytes = backward ? 2 * io : io,
                                 .launches = backward ? 3 : 1});
}

void rh__kernels_attention(expansion *x, const rh_layer *l, bool backward) {
  if (x->km->flash) flash(x, &l->op, backward);
  else eager(x, &l->op, backward);
}
