#!/usr/bin/env python3
"""Hugging Face transformers models, tiny and random, exported as users do and
trained in PyTorch as the reference for autopar's compiled programs.

Runs in the venv that scripts/install-hf.sh makes (transformers pinned, over
Debian's torch). The model of a family is rebuilt from its seed, so `export`
and `train` see the same weights.

  hf_models.py list
  hf_models.py export FAMILY -o MODEL.onnx [--seq T --batch B --vocab V --seed S
                                            --opset N]
  hf_models.py train FAMILY --data TOKENS.bin --steps N [--plan PLAN.json] -o REF.jsonl
                           [same model options]

The exported graph is what a user gets from
  torch.onnx.export(model, ...)  with  model(input_ids, labels=labels).loss
as its one output "loss" (graph inputs input_ids and labels, int64 [B, T],
with --inputs also attention_mask and position_ids), in eval mode, without
constant folding (docs/importer.md). `train` feeds each step's batch as
docs/data.md says (labels: the targets, the inputs shifted by one token, or
with the plan's data.targets_from "tokens" the inputs themselves; an
attention mask of ones, positions 0..T-1) and trains with the plan's
optimizer (test/e2e/torch_ref.py's), writing one JSON line per step
{"step", "loss", "lr", "grad_norm"}.
"""
import argparse
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import torch_ref  # noqa: E402

warnings.filterwarnings("ignore")


def _common(a):
    return dict(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                num_attention_heads=4, intermediate_size=2 * a.hidden,
                max_position_embeddings=max(64, a.seq), attn_implementation="eager")


def _decoder(config_class, model_class, **extra):
    def build(a):
        import transformers
        cfg = _common(a)
        cfg.update(extra)
        return getattr(transformers, model_class)(getattr(transformers, config_class)(**cfg))
    return build


def _gpt2(a):
    import transformers
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=a.vocab, n_embd=32, n_layer=2, n_head=4, n_positions=max(64, a.seq),
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager"))


def _config(config_class, model_class, **fields):
    """A builder from explicit config fields (families whose names differ)."""
    def build(a):
        import transformers
        cfg = dict(fields, vocab_size=a.vocab, attn_implementation="eager")
        return getattr(transformers, model_class)(getattr(transformers, config_class)(**cfg))
    return build


# family -> builder of the torch model (random weights from the current seed).
FAMILIES = {
    "gpt2": _gpt2,
    "llama": _decoder("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2),
    "mistral": _decoder("MistralConfig", "MistralForCausalLM", num_key_value_heads=2,
                        sliding_window=None),
    "qwen2": _decoder("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=2,
                      use_sliding_window=False, sliding_window=None),
    "phi3": _decoder("Phi3Config", "Phi3ForCausalLM", num_key_value_heads=2, pad_token_id=0),
    "gemma": _decoder("GemmaConfig", "GemmaForCausalLM", num_key_value_heads=2, head_dim=8),
    "gemma2": _decoder("Gemma2Config", "Gemma2ForCausalLM", num_key_value_heads=2,
                       head_dim=8, sliding_window=16),
    "gpt-neox": _decoder("GPTNeoXConfig", "GPTNeoXForCausalLM"),
    "falcon": _decoder("FalconConfig", "FalconForCausalLM"),
    "phi": _decoder("PhiConfig", "PhiForCausalLM"),
    "gpt-neo": _config("GPTNeoConfig", "GPTNeoForCausalLM", hidden_size=32, num_layers=2,
                       num_heads=4, attention_types=[[["global", "local"], 1]],
                       max_position_embeddings=64, window_size=8),
    "codegen": _config("CodeGenConfig", "CodeGenForCausalLM", n_embd=32, n_layer=2, n_head=4,
                       n_positions=64, rotary_dim=4),
    "gptj": _config("GPTJConfig", "GPTJForCausalLM", n_embd=32, n_layer=2, n_head=4,
                    n_positions=64, rotary_dim=4),
    "opt": _config("OPTConfig", "OPTForCausalLM", hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=4, ffn_dim=64, word_embed_proj_dim=32,
                   max_position_embeddings=64),
    "mixtral": _decoder("MixtralConfig", "MixtralForCausalLM", num_key_value_heads=2,
                        num_local_experts=4, num_experts_per_tok=2, sliding_window=None,
                        router_aux_loss_coef=0.0),
    "bloom": _config("BloomConfig", "BloomForCausalLM", hidden_size=32, n_layer=2, n_head=4),
    "t5": _config("T5Config", "T5ForConditionalGeneration", d_model=32, d_kv=8, d_ff=64,
                  num_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0,
                  dropout_rate=0.0),
    "bart": _config("BartConfig", "BartForConditionalGeneration", d_model=32,
                    encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                    max_position_embeddings=64),
    "bert": _decoder("BertConfig", "BertForMaskedLM"),
    "roberta": _decoder("RobertaConfig", "RobertaForMaskedLM"),
}


def build_model(args):
    torch.manual_seed(args.seed)
    model = FAMILIES[args.family](args)
    model.config._attn_implementation = "eager"
    for module in model.modules():  # no dropout anywhere
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model.eval()


# --inputs: the graph inputs of the export beside input_ids and labels.
EXTRA_INPUTS = {"labels": (), "mask": ("attention_mask",),
                "mask-positions": ("attention_mask", "position_ids"),
                "decoder": ("decoder_input_ids",)}


def extra_values(names, input_ids):
    """attention_mask all ones, position_ids 0..T-1 (autopar's default feeds);
    decoder_input_ids: any ids (export traces with them; training leaves
    them out, and the model shifts its labels right, as the plan's
    "shift_right:ID" feed does)."""
    b, t = input_ids.shape
    values = {"attention_mask": torch.ones(b, t, dtype=torch.int64),
              "position_ids": torch.arange(t).expand(b, t),
              "decoder_input_ids": input_ids}
    return {n: values[n] for n in names}


def loss(model, input_ids, labels, **extra):
    """model(input_ids, labels=labels, ...).loss, without a key/value cache."""
    import inspect
    if "use_cache" in inspect.signature(model.forward).parameters:
        extra["use_cache"] = False
    return model(input_ids=input_ids, labels=labels, **extra).loss


class LossOnly(torch.nn.Module):
    """model(input_ids, labels=labels, ...).loss, the graph a user exports."""

    def __init__(self, model, extra):
        super().__init__()
        self.model = model
        self.extra = extra

    def forward(self, input_ids, *rest):
        *values, labels = rest
        return loss(self.model, input_ids, labels, **dict(zip(self.extra, values)))


def export(args):
    extra = EXTRA_INPUTS[args.inputs]
    model = LossOnly(build_model(args), extra)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq))
    values = tuple(extra_values(extra, ids).values())
    tmp = args.output + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, (ids,) + values + (ids,), tmp,
                          input_names=["input_ids", *extra, "labels"],
                          output_names=["loss"], opset_version=args.opset,
                          do_constant_folding=False)
    os.replace(tmp, args.output)


def train(args):
    plan = torch_ref.load_plan(args.plan)
    model = build_model(args)
    data = torch_ref.TokenData(args.data)
    data.steps_per_pass(args.batch, args.seq)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]

    extra = EXTRA_INPUTS[args.inputs]

    given = [n for n in extra if n != "decoder_input_ids"]

    def loss_fn(inputs, targets):
        return loss(model, inputs, targets, **extra_values(given, inputs))

    records = list(torch_ref.train(
        named, loss_fn, lambda s: data.batch(s, args.batch, args.seq, plan.targets_from),
        args.steps, plan))
    tmp = args.output + ".tmp"
    with open(tmp, "w") as out:
        out.writelines(json.dumps(r) + "\n" for r in records)
    os.replace(tmp, args.output)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=("list", "export", "train"))
    p.add_argument("family", nargs="?", choices=sorted(FAMILIES))
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--hidden", type=int, default=32,
                   help="hidden size of the families built from the common config "
                   "(llama, mistral, qwen2, phi3, gemma, gemma2, gpt-neox, falcon, phi, "
                   "bert, roberta); the others keep their tiny sizes")
    p.add_argument("--layers", type=int, default=2, help="as --hidden, the layer count")
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--inputs", choices=sorted(EXTRA_INPUTS), default="labels",
                   help="graph inputs beside input_ids and labels: none (labels), "
                   "attention_mask (mask), or both it and position_ids (mask-positions)")
    p.add_argument("--data")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--plan")
    p.add_argument("-o", "--output")
    args = p.parse_args(argv)
    if args.command != "list" and (not args.family or not args.output):
        p.error(f"{args.command} needs a FAMILY and -o")
    if args.command == "train" and not args.data:
        p.error("train needs --data")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.command == "list":
        print("\n".join(sorted(FAMILIES)))
        return 0
    torch.set_num_threads(1)
    if args.command == "export":
        export(args)
    else:
        train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
