"""The GRPO step of `lachesis bench train` in PyTorch on the CPU, same shapes and same work: a llama
(RMSNorm, rotate-half rotary, grouped-query attention, SwiGLU, untied output, the vocabulary
projection over the trained half of each sequence only), the clipped importance-ratio loss averaged
per sequence, backward, gradient-norm clipping, AdamW.

Usage: python torch_grpo.py --vocab 256 --hidden 64 ... (the flags of `lachesis bench train`).
"""

import argparse
import math
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
for name, default in [("vocab", 256), ("hidden", 64), ("intermediate", 256), ("layers", 2),
                      ("heads", 4), ("kv-heads", 2), ("batch", 8), ("seq", 64), ("steps", 20),
                      ("lora-rank", 0), ("threads", 2)]:
    p.add_argument(f"--{name}", type=int, default=default)
a = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(a.threads)
head_dim = a.hidden // a.heads


def linear(out_dim, in_dim):
    return torch.nn.Parameter(torch.empty(out_dim, in_dim).uniform_(-0.0346, 0.0346))


class Lora(torch.nn.Module):
    def __init__(self, weight, rank):
        super().__init__()
        self.weight = weight
        self.weight.requires_grad_(False)
        out_dim, in_dim = weight.shape
        self.a = torch.nn.Parameter(torch.empty(rank, in_dim).uniform_(-1 / math.sqrt(in_dim), 1 / math.sqrt(in_dim)))
        self.b = torch.nn.Parameter(torch.zeros(out_dim, rank))
        self.scale = 2.0

    def forward(self, x):
        return x @ self.weight.t() + (x @ self.a.t()) @ self.b.t() * self.scale


class Dense(torch.nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, x):
        return x @ self.weight.t()


def proj(out_dim, in_dim, lora):
    w = linear(out_dim, in_dim)
    return Lora(w, a.lora_rank) if lora and a.lora_rank > 0 else Dense(w)


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        kv = a.kv_heads * head_dim
        full = a.lora_rank == 0
        self.n1 = torch.nn.Parameter(torch.ones(a.hidden), requires_grad=full)
        self.n2 = torch.nn.Parameter(torch.ones(a.hidden), requires_grad=full)
        self.q = proj(a.hidden, a.hidden, True)
        self.k = proj(kv, a.hidden, False)
        self.v = proj(kv, a.hidden, True)
        self.o = proj(a.hidden, a.hidden, False)
        self.gate = proj(a.intermediate, a.hidden, False)
        self.up = proj(a.intermediate, a.hidden, False)
        self.down = proj(a.hidden, a.intermediate, False)
        if not full:
            for m in (self.k, self.o, self.gate, self.up, self.down):
                m.weight.requires_grad_(False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = rms(x, self.n1)
        q = self.q(h).view(b, t, a.heads, head_dim).transpose(1, 2)
        k = self.k(h).view(b, t, a.kv_heads, head_dim).transpose(1, 2)
        v = self.v(h).view(b, t, a.kv_heads, head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = a.heads // a.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim) + mask
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, a.hidden)
        x = x + self.o(y)
        h = rms(x, self.n2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(torch.nn.Module):
    def __init__(self):
        super().__init__()
        full = a.lora_rank == 0
        self.embed = torch.nn.Parameter(torch.empty(a.vocab, a.hidden).uniform_(-0.0346, 0.0346), requires_grad=full)
        self.blocks = torch.nn.ModuleList([Block() for _ in range(a.layers)])
        self.norm = torch.nn.Parameter(torch.ones(a.hidden), requires_grad=full)
        self.head = torch.nn.Parameter(linear(a.vocab, a.hidden).data, requires_grad=full)
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        ang = torch.outer(torch.arange(a.seq).float(), inv)
        self.cos = torch.cat([ang.cos(), ang.cos()], -1)
        self.sin = torch.cat([ang.sin(), ang.sin()], -1)
        self.mask = torch.full((a.seq, a.seq), float("-inf")).triu(1)

    def forward(self, tokens, start):
        x = self.embed[tokens]
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin, self.mask)
        # As ours: the vocabulary projection only over the positions that are trained.
        return rms(x[:, start:], self.norm) @ self.head.t()


model = Llama()
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
g = torch.Generator().manual_seed(1)
tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g)
inputs, targets = tokens[:, :-1], tokens[:, 1:]
mask = (torch.arange(1, a.seq + 1) > (a.seq + 1) // 2).float().expand(a.batch, -1)
adv = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(a.batch)]).unsqueeze(1)
old = torch.full((a.batch, a.seq), -math.log(a.vocab))


window = (a.seq + 1) // 2
targets, mask, old = targets[:, window:], mask[:, window:], old[:, window:]


def step():
    logits = model(inputs, window)
    logp = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ratio = torch.exp((logp - old) * mask)
    obj = torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    loss = ((-obj * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()


for _ in range(2):
    step()
start = time.perf_counter()
for _ in range(a.steps):
    step()
seconds = time.perf_counter() - start
n = sum(p.numel() for p in params)
print(f"torch: {a.batch * a.seq * a.steps / seconds:.0f} tokens/s ({seconds / a.steps:.4f} s/step, {n} trainable parameters)")
