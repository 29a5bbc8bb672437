#!/usr/bin/python3
"""Export a small GPT or BERT training-loss graph to ONNX.

Example:
  /usr/bin/python3 test/models/export.py --model gpt --vocab 64 --d-model 32 \
      --heads 4 --layers 2 --seq 16 --batch 2 --opset 17 -o gpt.onnx

The graph has two int64 [B, T] inputs (gpt: idx, targets; bert: input_ids,
labels) and one float scalar output "loss".  The output file is written
atomically (temp file in the same directory, then os.replace).
"""
import argparse
import collections
import os
import sys
import tempfile
import time
import warnings

import torch
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

INPUT_NAMES = {"gpt": ("idx", "targets"), "bert": ("input_ids", "labels"),
               "llama": ("idx", "targets")}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("gpt", "bert", "llama"), required=True)
    p.add_argument("--kv-heads", type=int, default=None,
                   help="llama: key/value heads (grouped-query attention; "
                   "default: --heads)")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--d-model", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--opset", type=int, required=True)
    p.add_argument("--dynamic-batch", action="store_true",
                   help='make dim 0 of both inputs symbolic ("batch")')
    p.add_argument("--tied", action="store_true", help="tie lm_head.weight to wte.weight (gpt)")
    p.add_argument("--activation", default="gelu",
                   help="MLP activation (gpt only): one of " +
                   ", ".join(models.ACTIVATIONS) +
                   ", or a comma-separated list, one per layer (cycling)")
    p.add_argument("--loss", choices=models.LOSSES, default="cross_entropy",
                   help="how the GPT computes its loss (gpt only)")
    p.add_argument("--no-constant-folding", action="store_true")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="gpt: nanoGPT's dropout ratio; > 0 exports in training mode "
                   "(Dropout nodes with training_mode = true)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args(argv)

    for name in ("vocab", "d_model", "heads", "layers", "seq", "batch"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.d_model % args.heads != 0:
        p.error(f"--heads ({args.heads}) must divide --d-model ({args.d_model})")
    if args.opset < 12:
        p.error(f"--opset {args.opset} is too old: the loss (SoftmaxCrossEntropyLoss) "
                "needs opset >= 12")
    if args.model == "bert" and args.tied:
        p.error("--tied is only supported with --model gpt")
    for name in args.activation.split(","):
        if name not in models.ACTIVATIONS:
            p.error(f"--activation {name!r}: expected one of {', '.join(models.ACTIVATIONS)}")
    if args.model == "bert" and args.activation != "gelu":
        p.error("--activation is only supported with --model gpt")
    return args


def op_histogram(model_proto):
    return collections.Counter(n.op_type for n in model_proto.graph.node)


def export(args):
    # Training-mode export (--dropout) warns that constant folding could
    # change parameters; the models here have none it would (no BatchNorm).
    warnings.filterwarnings("ignore", message="It is recommended that constant folding")
    torch.manual_seed(args.seed)
    model = models.build(args.model, args.vocab, args.d_model, args.heads, args.layers,
                         args.seq, tied=args.tied, activation=args.activation,
                         loss=args.loss, kv_heads=args.kv_heads, dropout=args.dropout)
    model.eval()

    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), dtype=torch.int64, generator=gen)
    y = torch.randint(0, args.vocab, (args.batch, args.seq), dtype=torch.int64, generator=gen)
    in_names = list(INPUT_NAMES[args.model])
    dynamic_axes = None
    if args.dynamic_batch:
        dynamic_axes = {n: {0: "batch"} for n in in_names}

    out = os.path.abspath(args.output)
    out_dir = os.path.dirname(out)
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".", suffix=".tmp",
                               dir=out_dir)
    os.close(fd)
    try:
        with torch.no_grad():
            ref_loss = float(model(x, y))
            torch.onnx.export(
                model, (x, y), tmp,
                input_names=in_names,
                output_names=["loss"],
                opset_version=args.opset,
                do_constant_folding=not args.no_constant_folding,
                training=(torch.onnx.TrainingMode.TRAINING if args.dropout
                          else torch.onnx.TrainingMode.EVAL),
                dynamic_axes=dynamic_axes,
                export_params=True,
            )
        # check_model on a path also handles models > 2 GB.
        onnx.checker.check_model(tmp)
        m = onnx.load(tmp, load_external_data=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return out, m, ref_loss


def main(argv=None):
    args = parse_args(argv)
    t0 = time.monotonic()
    try:
        out, m, ref_loss = export(args)
    except ValueError as e:
        print(f"export.py: error: {e}", file=sys.stderr)
        return 2
    dt = time.monotonic() - t0
    hist = op_histogram(m)
    hist_s = " ".join(f"{k}:{v}" for k, v in sorted(hist.items()))
    print(f"{args.output}: {os.path.getsize(out)} bytes, "
          f"{len(m.graph.initializer)} initializers, {len(m.graph.node)} nodes, "
          f"torch loss {ref_loss:.6f}, {dt:.1f}s; ops: {hist_s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
