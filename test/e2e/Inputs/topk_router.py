#!/usr/bin/python3
"""A tiny language model with a top-k routed mixture of experts, exported
to ONNX (TopK, OneHot): the router's softmax over E experts keeps its K
largest weights (renormalized, Mixtral's routing), and each token's output
is the weighted sum of the chosen experts' MLPs, computed densely (every
expert on every token, weighted by a one-hot of the choice: the same
values and gradients as dispatching the tokens).

  topk_router.py -o MODEL.onnx [--vocab 64 --hidden 32 --experts 4 --k 2
                                --seq 16 --batch 4 --seed 0]

Graph inputs idx and targets (int64 [batch, seq]), output loss.
"""
import argparse

import torch


class RoutedLM(torch.nn.Module):
    def __init__(self, vocab, hidden, experts, k):
        super().__init__()
        self.k = k
        self.experts = experts
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.router = torch.nn.Linear(hidden, experts, bias=False)
        self.up = torch.nn.Parameter(torch.randn(experts, hidden, 2 * hidden) * 0.2)
        self.down = torch.nn.Parameter(torch.randn(experts, 2 * hidden, hidden) * 0.2)
        self.head = torch.nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.embed(idx)
        probs = torch.softmax(self.router(x), dim=-1)
        weights, chosen = torch.topk(probs, self.k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        hot = torch.nn.functional.one_hot(chosen, self.experts).to(x.dtype)
        routing = (hot * weights.unsqueeze(-1)).sum(dim=-2)  # [B, T, E]
        h = torch.relu(torch.einsum("bth,ehf->btef", x, self.up))
        y = torch.einsum("btef,efh->bteh", h, self.down)
        x = x + (y * routing.unsqueeze(-1)).sum(dim=-2)
        logits = self.head(x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = RoutedLM(a.vocab, a.hidden, a.experts, a.k).eval()
    idx = torch.randint(0, a.vocab, (a.batch, a.seq))
    torch.onnx.export(model, (idx, idx), a.output, input_names=["idx", "targets"],
                      output_names=["loss"], opset_version=17, do_constant_folding=False)


if __name__ == "__main__":
    main()
