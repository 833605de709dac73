"""Reference PyTorch definitions of the transformer family, for tools/torch_export.py.

`Transformer(cfg)` builds a GPT-2 / Llama style decoder (decoder=True) or a BERT style
encoder with its pre-training heads (decoder=False) from a dict of Hugging Face config
figures under short names (see `DEFAULTS` and `PRESETS`).  The parameter counts match the
published models exactly (GPT-2 small 124,439,808; BERT-base 110,106,428; BERT-large
335,174,458; Llama-2-7B 6,738,415,616; Llama-3-8B 8,030,261,248).

The forward is plain eager PyTorch: every weight matmul is an nn.Linear, the attention core
(Q K^T, softmax, A V) is torch.matmul, the causal mask is a masked_fill; no SDPA, no dropout.
Pass device="meta" to build a model without allocating its weights (Llama-7B in fp32 is 27 GB).

    /usr/bin/python3 tools/torch_models.py            # prints each preset's parameter count
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULTS = {
    "layers": 12, "hidden": 768, "heads": 12, "kv_heads": None, "ffn": None,
    "activation": "gelu", "vocab": 30522, "seq_len": 512, "tied_embeddings": True,
    "decoder": True, "positions": 0, "type_vocab": 0, "bias": True, "norm": "layernorm",
    "norm_eps": 1e-5, "rope_theta": 10000.0,
}

PRESETS = {
    # GPT-2 small (openai-community/gpt2)
    "gpt2": {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "activation": "gelu",
             "vocab": 50257, "seq_len": 1024, "tied_embeddings": True, "decoder": True,
             "positions": 1024, "bias": True, "norm": "layernorm"},
    # BERT-base / BERT-large (BertForPreTraining), pre-training phase 1: 128 tokens
    "bert-base": {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "activation": "gelu",
                  "vocab": 30522, "seq_len": 128, "tied_embeddings": True, "decoder": False,
                  "positions": 512, "type_vocab": 2, "bias": True, "norm": "layernorm",
                  "norm_eps": 1e-12},
    "bert-large": {"layers": 24, "hidden": 1024, "heads": 16, "ffn": 4096, "activation": "gelu",
                   "vocab": 30522, "seq_len": 384, "tied_embeddings": True, "decoder": False,
                   "positions": 512, "type_vocab": 2, "bias": True, "norm": "layernorm",
                   "norm_eps": 1e-12},
    # Llama-2-7B (meta-llama/Llama-2-7b-hf)
    "llama2-7b": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 11008,
                  "activation": "swiglu", "vocab": 32000, "seq_len": 4096,
                  "tied_embeddings": False, "decoder": True, "positions": 0, "bias": False,
                  "norm": "rmsnorm"},
    # Llama-3-8B (meta-llama/Meta-Llama-3-8B): grouped-query attention, 8 KV heads
    "llama3-8b": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336,
                  "activation": "swiglu", "vocab": 128256, "seq_len": 8192,
                  "tied_embeddings": False, "decoder": True, "positions": 0, "bias": False,
                  "norm": "rmsnorm", "rope_theta": 500000.0},
}


def full_config(cfg):
    """cfg with every key filled in (defaults, kv_heads = heads, ffn = 4 h); checks it."""
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise ValueError("unknown transformer config keys: %s" % ", ".join(sorted(unknown)))
    c = dict(DEFAULTS)
    c.update(cfg)
    if c["kv_heads"] is None:
        c["kv_heads"] = c["heads"]
    if c["ffn"] is None:
        c["ffn"] = 4 * c["hidden"]
    if c["hidden"] % c["heads"] or c["heads"] % c["kv_heads"]:
        raise ValueError("hidden must divide by heads, and heads by kv_heads")
    if c["activation"] not in ("gelu", "swiglu"):
        raise ValueError("activation must be gelu or swiglu")
    if c["norm"] not in ("layernorm", "rmsnorm"):
        raise ValueError("norm must be layernorm or rmsnorm")
    return c


class RMSNorm(nn.Module):
    """Llama's RMSNorm: x / rms(x) * weight (weight only)."""

    def __init__(self, dim, eps=1e-5, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(c, device):
    if c["norm"] == "rmsnorm":
        return RMSNorm(c["hidden"], c["norm_eps"], device=device)
    return nn.LayerNorm(c["hidden"], eps=c["norm_eps"], device=device)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    """q, k, v, o projections (own modules) and the attention core (this module's own ops)."""

    def __init__(self, c, device=None):
        super().__init__()
        h, a, kv = c["hidden"], c["heads"], c["kv_heads"]
        self.heads, self.kv_heads, self.head_dim = a, kv, h // a
        self.causal = c["decoder"]
        self.rotary = c["decoder"] and c["positions"] == 0
        self.rope_theta = c["rope_theta"]
        b = c["bias"]
        self.q = nn.Linear(h, h, bias=b, device=device)
        self.k = nn.Linear(h, kv * self.head_dim, bias=b, device=device)
        self.v = nn.Linear(h, kv * self.head_dim, bias=b, device=device)
        self.o = nn.Linear(h, h, bias=b, device=device)

    def forward(self, x):
        B, S, _ = x.shape
        a, kv, d = self.heads, self.kv_heads, self.head_dim
        q = self.q(x).view(B, S, a, d).transpose(1, 2)
        k = self.k(x).view(B, S, kv, d).transpose(1, 2)
        v = self.v(x).view(B, S, kv, d).transpose(1, 2)
        if self.rotary:  # rotary position embedding: elementwise, no parameters
            inv = 1.0 / (self.rope_theta ** (torch.arange(0, d, 2, device=x.device,
                                                          dtype=torch.float32) / d))
            t = torch.arange(S, device=x.device, dtype=torch.float32)
            freqs = t[:, None] * inv[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        if kv != a:  # grouped-query attention: each KV head serves a / kv query heads
            k = k[:, :, None].expand(B, kv, a // kv, S, d).reshape(B, a, S, d)
            v = v[:, :, None].expand(B, kv, a // kv, S, d).reshape(B, a, S, d)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        if self.causal:
            mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(B, S, a * d)
        return self.o(ctx)


class MLP(nn.Module):
    """gelu: fc h->f, proj f->h.  swiglu: down(silu(gate(x)) * up(x))."""

    def __init__(self, c, device=None):
        super().__init__()
        h, f, b = c["hidden"], c["ffn"], c["bias"]
        self.swiglu = c["activation"] == "swiglu"
        if self.swiglu:
            self.gate = nn.Linear(h, f, bias=b, device=device)
            self.up = nn.Linear(h, f, bias=b, device=device)
            self.down = nn.Linear(f, h, bias=b, device=device)
        else:
            self.fc = nn.Linear(h, f, bias=b, device=device)
            self.proj = nn.Linear(f, h, bias=b, device=device)

    def forward(self, x):
        if self.swiglu:
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-norm (decoder) or post-norm (encoder) transformer block; the residual adds are its own."""

    def __init__(self, c, device=None):
        super().__init__()
        self.pre_norm = c["decoder"]
        self.norm1 = make_norm(c, device)
        self.attn = Attention(c, device)
        self.norm2 = make_norm(c, device)
        self.mlp = MLP(c, device)

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.mlp(x))


class Embeddings(nn.Module):
    """Token (+ learned position) (+ token type) embeddings; the encoder's LayerNorm after them."""

    def __init__(self, c, device=None):
        super().__init__()
        h = c["hidden"]
        self.tok = nn.Embedding(c["vocab"], h, device=device)
        self.pos = nn.Embedding(c["positions"], h, device=device) if c["positions"] > 0 else None
        self.token_type = nn.Embedding(c["type_vocab"], h, device=device) if c["type_vocab"] > 0 else None
        self.norm = None if c["decoder"] else make_norm(c, device)

    def forward(self, ids):
        x = self.tok(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(ids.shape[1], device=ids.device))
        if self.token_type is not None:
            x = x + self.token_type(torch.zeros_like(ids))
        if self.norm is not None:
            x = self.norm(x)
        return x


class Pooler(nn.Module):
    """BERT pooler: tanh(dense(first token))."""

    def __init__(self, c, device=None):
        super().__init__()
        self.dense = nn.Linear(c["hidden"], c["hidden"], device=device)

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class MLMHead(nn.Module):
    """BERT masked-LM head: dense h->h, activation, LayerNorm, decoder (tied weight, own bias)."""

    def __init__(self, c, device=None):
        super().__init__()
        h = c["hidden"]
        self.dense = nn.Linear(h, h, device=device)
        self.norm = nn.LayerNorm(h, eps=c["norm_eps"], device=device)
        self.decoder = nn.Linear(h, c["vocab"], bias=True, device=device)

    def forward(self, x):
        return self.decoder(self.norm(F.gelu(self.dense(x))))


class Transformer(nn.Module):
    """A decoder (GPT-2, Llama) or an encoder with BERT's pre-training heads, from a config dict.

    Input: token ids, shape (batch, seq).  Output: decoder: logits (batch, seq, vocab);
    encoder: (MLM logits (batch, seq, vocab), NSP logits (batch, 2)).
    """

    def __init__(self, cfg, device=None):
        super().__init__()
        c = full_config(cfg)
        self.cfg = c
        self.embed = Embeddings(c, device)
        self.blocks = nn.ModuleList([Block(c, device) for _ in range(c["layers"])])
        if c["decoder"]:
            self.norm = make_norm(c, device)
            self.lm_head = nn.Linear(c["hidden"], c["vocab"], bias=False, device=device)
            if c["tied_embeddings"]:
                self.lm_head.weight = self.embed.tok.weight
        else:
            self.pooler = Pooler(c, device)
            self.mlm = MLMHead(c, device)
            self.mlm.decoder.weight = self.embed.tok.weight  # BERT ties its MLM decoder
            self.nsp = nn.Linear(c["hidden"], 2, device=device)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        if self.cfg["decoder"]:
            return self.lm_head(self.norm(x))
        return self.mlm(x), self.nsp(self.pooler(x))


def build(name, device=None, **overrides):
    """Transformer for a PRESETS entry, with optional config overrides."""
    cfg = dict(PRESETS[name])
    cfg.update(overrides)
    return Transformer(cfg, device=device)


if __name__ == "__main__":
    for name in PRESETS:
        m = build(name, device="meta")
        print("%-11s %15s parameters" % (name, format(sum(p.numel() for p in m.parameters()), ",")))
