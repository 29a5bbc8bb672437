#!/usr/bin/python3
"""Small transformer definitions used to produce ONNX fixtures for autopar.

GPT: GPT-2 / nanoGPT style pre-LN decoder with learned position embeddings.
Bert: BERT style post-LN encoder with an MLM head.
Llama: LLaMA style decoder (RMSNorm, SwiGLU, rotary embeddings, grouped-query
attention, no biases) with a padding-masked loss.

Both forward() methods return only the scalar cross-entropy loss so the
exported graph has a single output "loss".  Attention is written by hand
(no nn.MultiheadAttention / scaled_dot_product_attention). The GPT takes
nanoGPT's dropout (`dropout` > 0: after the embeddings, on the attention
probabilities and after each residual branch), which exports as Dropout
nodes in training mode (export.py --dropout); the others have none.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "silu", "mish", "leaky_relu",
               "prelu", "elu", "selu", "celu", "softplus", "hardswish",
               "hardsigmoid", "maximum", "capped")


class Maximum(nn.Module):
    """max(x, 0.1 x) with torch.maximum (exports as Max)."""

    def forward(self, x):
        return torch.maximum(x, 0.1 * x)


class Capped(nn.Module):
    """min(max(x, 0.1 x), 0.5) with torch.maximum and torch.minimum
    (exports as Max and Min; the cap broadcasts)."""

    def forward(self, x):
        return torch.minimum(torch.maximum(x, 0.1 * x), torch.tensor(0.5))


# The GPT's loss: F.cross_entropy (exported as SoftmaxCrossEntropyLoss),
# written out as -log_softmax(logits).gather(targets).mean(), or as
# transformers >= 4.48 writes a causal LM's (hf_padded): the labels padded
# with -100 at the end (Pad), shifted by one and cross-entropy ignoring -100.
LOSSES = ("cross_entropy", "log_softmax_gather", "hf_padded")


def make_activation(name):
    """An MLP activation by name; "a,b,..." names one per layer, cycling
    (layer_activation picks a layer's)."""
    simple = {"gelu": nn.GELU,  # exact (erf) form
              "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
              "relu": nn.ReLU, "silu": nn.SiLU, "mish": nn.Mish,
              "leaky_relu": lambda: nn.LeakyReLU(0.1), "prelu": nn.PReLU,
              "elu": lambda: nn.ELU(0.8), "selu": nn.SELU,
              "celu": lambda: nn.CELU(1.5), "softplus": nn.Softplus,
              "hardswish": nn.Hardswish, "hardsigmoid": nn.Hardsigmoid,
              "maximum": Maximum, "capped": Capped}
    names = name.split(",")
    for n in names:
        if n not in simple:
            raise ValueError(f"unknown activation {n!r}; expected one of {ACTIVATIONS}")
    return simple[names[0]]()


def layer_activation(name, layer):
    """Layer `layer`'s activation name of a (comma-separated) list."""
    names = name.split(",")
    return names[layer % len(names)]


def check_dims(d_model, n_heads):
    if n_heads <= 0 or d_model <= 0:
        raise ValueError(f"d_model ({d_model}) and n_heads ({n_heads}) must be positive")
    if d_model % n_heads != 0:
        raise ValueError(
            f"n_heads ({n_heads}) must divide d_model ({d_model}): "
            f"{d_model} % {n_heads} = {d_model % n_heads}")


# --------------------------------------------------------------------------
# GPT
# --------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    """sdpa: F.scaled_dot_product_attention(is_causal=True) (PyTorch >= 2.0,
    flash attention on GPUs; the GPU benchmark's peer) instead of the
    attention written out (what the exported models hold)."""

    def __init__(self, d_model, n_heads, seq_len, sdpa=False, dropout=0.0):
        super().__init__()
        check_dims(d_model, n_heads)
        self.attn_dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.resid_dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.n_heads = n_heads
        self.d_model = d_model
        self.sdpa = sdpa
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.register_buffer(
            "bias", torch.tril(torch.ones(seq_len, seq_len)).view(1, 1, seq_len, seq_len))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.d_model, dim=2)
        hd = self.d_model // self.n_heads  # python int: keeps the scale a constant
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)  # B,H,T,hd
        k = k.view(B, T, self.n_heads, hd).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hd).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = att @ v  # B,H,T,hd
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, d_model, activation, dropout=0.0):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.act = make_activation(activation)
        self.c_proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPTBlock(nn.Module):
    def __init__(self, d_model, n_heads, seq_len, activation, sdpa=False,
                 dropout=0.0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, seq_len, sdpa, dropout)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model, activation, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, d_model, n_heads, n_layers, seq_len, tied=False,
                 activation="gelu", loss="cross_entropy", sdpa=False, dropout=0.0):
        super().__init__()
        check_dims(d_model, n_heads)
        make_activation(activation)  # validate early
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")
        self.loss = loss
        self.vocab = vocab
        self.seq_len = seq_len
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(seq_len, d_model)
        self.h = nn.ModuleList(
            [GPTBlock(d_model, n_heads, seq_len, layer_activation(activation, i), sdpa,
                      dropout)
             for i in range(n_layers)])
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = self.lm_head(x).view(-1, self.vocab)
        if self.loss == "log_softmax_gather":
            # Written out (LogSoftmax, GatherElements, ReduceMean).
            logp = F.log_softmax(logits, dim=-1)
            return -logp.gather(1, targets.view(-1, 1)).mean()
        if self.loss == "hf_padded":
            # transformers' ForCausalLMLoss: pad, shift, ignore -100.
            labels = F.pad(targets, (0, 1), value=-100)
            shift = labels[..., 1:].contiguous()
            return F.cross_entropy(logits, shift.view(-1), ignore_index=-100)
        return F.cross_entropy(logits, targets.view(-1))


# --------------------------------------------------------------------------
# BERT
# --------------------------------------------------------------------------
class BertSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        check_dims(d_model, n_heads)
        self.n_heads = n_heads
        self.d_model = d_model
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.size()
        hd = self.d_model // self.n_heads
        q = self.query(x).view(B, T, self.n_heads, hd).transpose(1, 2)
        k = self.key(x).view(B, T, self.n_heads, hd).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.out(y)


class BertLayer(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.attn = BertSelfAttention(d_model, n_heads)
        self.ln_attn = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d_model, d_model)
        self.ln_mlp = nn.LayerNorm(d_model)

    def forward(self, x):
        x = self.ln_attn(x + self.attn(x))
        x = self.ln_mlp(x + self.fc2(self.act(self.fc1(x))))
        return x


class Bert(nn.Module):
    def __init__(self, vocab, d_model, n_heads, n_layers, seq_len):
        super().__init__()
        check_dims(d_model, n_heads)
        self.vocab = vocab
        self.seq_len = seq_len
        self.word_embeddings = nn.Embedding(vocab, d_model)
        self.position_embeddings = nn.Embedding(seq_len, d_model)
        self.emb_ln = nn.LayerNorm(d_model)
        self.layers = nn.ModuleList([BertLayer(d_model, n_heads) for _ in range(n_layers)])
        # MLM head
        self.head_dense = nn.Linear(d_model, d_model)
        self.head_act = nn.GELU()
        self.head_ln = nn.LayerNorm(d_model)
        self.decoder = nn.Linear(d_model, vocab)

    def forward(self, input_ids, labels):
        B, T = input_ids.size()
        pos = torch.arange(0, T, dtype=torch.long, device=input_ids.device)
        x = self.emb_ln(self.word_embeddings(input_ids) + self.position_embeddings(pos))
        for layer in self.layers:
            x = layer(x)
        x = self.head_ln(self.head_act(self.head_dense(x)))
        logits = self.decoder(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1),
                               ignore_index=-100)


# --------------------------------------------------------------------------
# LLaMA-style decoder
# --------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    """Rotary embeddings computed in forward from torch.arange (Range, Cos,
    Sin: constants), grouped-query attention (kv heads repeated with
    repeat_interleave), a causal mask built in forward with torch.triu."""

    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        check_dims(d_model, n_heads)
        if n_heads % n_kv_heads:
            raise ValueError(f"kv heads ({n_kv_heads}) must divide heads ({n_heads})")
        self.n_heads, self.n_kv = n_heads, n_kv_heads
        self.hd = d_model // n_heads
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, n_kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d_model, n_kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):
        B, T, C = x.size()
        q = self.q(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.k(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        freqs = torch.arange(T).float()[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.n_heads // self.n_kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        att = F.softmax(att + mask, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.o(y)


class LlamaBlock(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads):
        super().__init__()
        self.norm1 = RMSNorm(d_model)
        self.attn = LlamaAttention(d_model, n_heads, n_kv_heads)
        self.norm2 = RMSNorm(d_model)
        hidden = 2 * d_model
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """The loss averages over the targets that are not token 0 (a padding
    mask written with !=, which exports as Not(Equal))."""

    def __init__(self, vocab, d_model, n_heads, n_layers, n_kv_heads):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(
            [LlamaBlock(d_model, n_heads, n_kv_heads) for _ in range(n_layers)])
        self.norm = RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        logits = self.lm_head(self.norm(x)).view(-1, self.vocab)
        t = targets.view(-1)
        losses = F.cross_entropy(logits, t, reduction="none")
        keep = (t != 0).float()
        return (losses * keep).sum() / keep.sum()


def build(model, vocab, d_model, heads, layers, seq, tied=False, activation="gelu",
          loss="cross_entropy", kv_heads=None, dropout=0.0):
    """Construct a model by name ("gpt" or "bert"); dropout: the GPT's."""
    if dropout and model != "gpt":
        raise ValueError("dropout is a gpt option")
    if model == "gpt":
        return GPT(vocab, d_model, heads, layers, seq, tied=tied, activation=activation,
                   loss=loss, dropout=dropout)
    if model == "llama":
        if tied or activation != "gelu" or loss != "cross_entropy":
            raise ValueError("--tied, --activation and --loss are gpt options")
        return Llama(vocab, d_model, heads, layers, kv_heads or heads)
    if kv_heads is not None:
        raise ValueError("--kv-heads is a llama option")
    if model == "bert":
        if tied:
            raise ValueError("--tied is only supported for --model gpt")
        if activation != "gelu":
            raise ValueError("--activation is only supported for --model gpt")
        if loss != "cross_entropy":
            raise ValueError("--loss is only supported for --model gpt")
        return Bert(vocab, d_model, heads, layers, seq)
    raise ValueError(f"unknown model {model!r}; expected gpt, bert or llama")
