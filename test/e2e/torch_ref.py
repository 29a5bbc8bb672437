#!/usr/bin/python3
"""PyTorch reference trainer for an ONNX training-loss model.

Interprets the ONNX graph with torch ops (it does not use the model's Python
source), so it works for any model made of the ops in docs/ops.md, and trains
it the way a compiled autopar program does: same parameters, same batches,
same optimizer, learning-rate schedule, gradient clipping and micro-batching.

Usage:
  /usr/bin/python3 test/e2e/torch_ref.py MODEL.onnx --data TOKENS.bin --steps N \\
      [--plan PLAN.json] [--batch B] [--threads K] [--seed S] [--dump-grads DIR]
      [--save-weights WEIGHTS.npz] -o LOSSES.jsonl

Dropout: a training-mode Dropout node drops the elements autopar's program
drops (test/e2e/dropout_reference.py: the masks from the seed, the step, the
micro-batch, the node's number and each element's index), so the reference
trains with the program's masks; the plan's dropout.ratio overrides every
node's ratio.

Parameters: every floating-point initializer is a float32 parameter unless a
`frozen` glob of the plan matches its name (globs follow fnmatch(3) as
docs/plan.md says: Python's fnmatchcase plus [^...] and backslash escapes; an
entry "GLOB[ROWS]" that matches nothing as a glob freezes those rows of dim 0:
their gradients are zeroed and the rows restored after each update);
each `Identity` of an initializer (torch's exporter de-duplicates equal
tensors that way) is a parameter of its own, named by the Identity's output
and initialized from a copy of its source. Non-float initializers are
constants.

Data: an llm.c token file (256 int32 header: magic 20240520, version 1, token
count N; then N uint16 tokens). With [B, T] the inputs' shape, step s reads
the B*T+1 tokens from (s % E)*B*T, E = (N-1) // (B*T): sample g's inputs are
tokens[base+g*T : base+g*T+T] and its targets the same window shifted by one.

Plan (JSON, every key optional): optimizer {type adamw|sgd, lr, betas, eps,
weight_decay, momentum, dampening, nesterov, max_grad_norm, no_decay},
frozen, padding_idx {glob: row}, lr_schedule {type, warmup_steps, decay
constant|cosine|linear, min_lr, decay_steps; DeepSpeed's types: warmup_type,
warmup_min_lr, warmup_min_ratio, cos_min_ratio}, batch {micro_batches, global_batch}, data {inputs,
targets, feeds {input: ones|zeros|arange|shift_right:ID}, targets_from
next_tokens|tokens}. The keys that
only affect how the compiled program is distributed or stored (mesh, zero,
comm, precision, recompute, attention, pad_vocab_multiple, pipeline,
tensor_parallel) are ignored; unknown
keys are warned about (the compiler rejects them).

Output: one JSON line per step, {"step", "loss", "lr", "grad_norm"}; loss is
the step's forward loss (before the update), grad_norm the global L2 norm of
the gradients before clipping. --save-weights also writes the trained
parameters after the last step as an .npz archive keyed by parameter name
(frozen initializers are not in it).
"""
import argparse
import dataclasses
import functools
import json
import math
import os
import re
import sys
import time

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

import dropout_reference
from torch_ops import (DROPOUT, OPS, RefError, padded_gather, tensor_from_proto,
                       torch_dtype)

TOKEN_MAGIC = 20240520
TOKEN_VERSION = 1
HEADER_INTS = 256

MIN_OPSET, MAX_OPSET = 13, 18

FLOAT_TYPES = frozenset((TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16,
                         TensorProto.BFLOAT16))
INT_TYPES = frozenset((TensorProto.INT8, TensorProto.INT16, TensorProto.INT32,
                       TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16,
                       TensorProto.UINT32, TensorProto.UINT64))

# Plan sections that do not change the math of a training step.
IGNORED_PLAN_KEYS = frozenset(("mesh", "zero", "comm", "precision", "grad_dtype", "recompute",
                               "pipeline", "tensor_parallel", "attention",
                               "pad_vocab_multiple"))



def safe_name(name):
    """A tensor name usable as a file name."""
    return name.replace(":", "_").replace("/", "_")


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------
def _attribute_value(attr):
    value = helper.get_attribute_value(attr)
    if isinstance(value, TensorProto):
        return tensor_from_proto(value)
    return value


@functools.lru_cache(maxsize=None)
def glob_regex(pattern):
    """A glob as a compiled regex matching whole names, with fnmatch(3)'s rules
    (no FNM_PATHNAME, as docs/plan.md): * and ? match any characters, '.' and
    '/' included; [...] is a class, negated by a leading ! or ^; \\c is c."""
    if not pattern:
        raise RefError("empty glob")
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            i, cls = _glob_class(pattern, i + 1)
            out.append(cls)
            continue
        elif c == "\\":
            if i + 1 == len(pattern):
                raise RefError(f"glob {pattern!r}: trailing backslash")
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _glob_class(pattern, i):
    """The bracket expression of pattern that starts after the '[' at i - 1:
    (the index after its ']', its regex)."""
    def char_at(j):  # (character, index after it), resolving a backslash escape
        if j < len(pattern) and pattern[j] == "\\":
            j += 1
        if j >= len(pattern):
            raise RefError(f"glob {pattern!r}: unterminated [")
        return pattern[j], j + 1

    negate = i < len(pattern) and pattern[i] in "!^"
    if negate:
        i += 1
    items, first = [], True
    while True:
        if i < len(pattern) and pattern[i] == "]" and not first:
            break
        first = False
        lo, i = char_at(i)
        if i + 1 < len(pattern) and pattern[i] == "-" and pattern[i + 1] != "]":
            hi, i = char_at(i + 1)
            if hi < lo:
                raise RefError(f"glob {pattern!r}: reversed range {lo}-{hi}")
            items.append(f"{re.escape(lo)}-{re.escape(hi)}")
        else:
            items.append(re.escape(lo))
    return i + 1, "[" + ("^" if negate else "") + "".join(items) + "]"


def matches_any(name, globs):
    """Whether name matches one of the globs (see glob_regex)."""
    return any(glob_regex(g).match(name) for g in globs)


FROZEN_ROWS = re.compile(r"^(.+)\[(\d{1,15}(?::\d{1,15})?(?:,\d{1,15}(?::\d{1,15})?)*)\]$")


def frozen_rows_entry(pattern):
    """(glob, [(begin, end)]) of a `frozen` entry "GLOB[ROWS]" (rows "r" or
    "a:b", comma-separated), or None."""
    m = FROZEN_ROWS.match(pattern)
    if not m:
        return None
    ranges = []
    for part in m.group(2).split(","):
        a, _, b = part.partition(":")
        begin, end = int(a), int(b) if b else int(a) + 1
        if end <= begin:
            return None
        ranges.append((begin, end))
    return m.group(1), ranges


class OnnxModel:
    """An ONNX model as a torch function of its parameters and graph inputs.

    params: the trainable parameters by name, in initializer order, then the
    Identity aliases in node order. inputs: the graph inputs (ValueInfoProto)
    that are not initializers.
    """

    def __init__(self, path, frozen=(), padding_idx=(), lora=None, seed=0):
        """path: an ONNX file or a ModelProto; frozen: globs of initializers not trained;
        padding_idx: (glob, row) pairs: the lookups of that row of a matching
        table (a Gather along axis 0) give it no gradient, as
        nn.Embedding(padding_idx=row); lora: the plan's lora object (a dict),
        PEFT's LoRA beside each MatMul and Gemm of a weight its targets match
        (A from `seed` as the program draws it, B zeros), everything else
        frozen but also_train."""
        if isinstance(path, onnx.ModelProto):
            model, path = path, "<model>"
        else:
            try:
                model = onnx.load(path)
            except Exception as e:  # protobuf raises DecodeError and others
                raise RefError(f"{path}: cannot load the ONNX model: {e}") from e
        opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
        if not opsets or not MIN_OPSET <= opsets[0] <= MAX_OPSET:
            raise RefError(f"{path}: the ai.onnx opset must be {MIN_OPSET} to {MAX_OPSET}, "
                           f"got {opsets[0] if opsets else 'none'}")
        graph = model.graph
        self.params = {}
        self.tensors = {}  # every initializer and alias, parameters included
        initializers = {t.name: t for t in graph.initializer}
        # A `frozen` entry that matches no initializer as a glob but names
        # rows ("wte.weight[0]") freezes those rows (docs/plan.md#frozen).
        names = list(initializers) + [n.output[0] for n in graph.node
                                      if n.op_type == "Identity" and n.input[0] in initializers]
        row_entries = [frozen_rows_entry(g) for g in frozen
                       if not any(glob_regex(g).match(n) for n in names)]
        frozen = [g for g in frozen if any(glob_regex(g).match(n) for n in names)]
        for proto in graph.initializer:
            self._add_initializer(proto.name, tensor_from_proto(proto),
                                  proto.data_type in FLOAT_TYPES, frozen)
        self.nodes = []
        for node in graph.node:
            if node.op_type == "Identity" and node.input[0] in initializers:
                source = initializers[node.input[0]]
                if source.data_type in FLOAT_TYPES:
                    self._add_initializer(node.output[0], tensor_from_proto(source), True,
                                          frozen)
                else:  # a constant: the alias shares it
                    self.tensors[node.output[0]] = self.tensors[source.name]
                continue
            fn, attrs = self._resolve(node)
            rows = [row for glob, row in padding_idx
                    if node.op_type == "Gather" and node.input[0] in self.params
                    and attrs.get("axis", 0) == 0 and matches_any(node.input[0], (glob,))]
            if rows:
                fn = padded_gather(rows[0])
            self.nodes.append((node, (fn, attrs)))
        self.inputs = [vi for vi in graph.input if vi.name not in initializers]
        self.outputs = [vi.name for vi in graph.output]
        self.lora_merge = {}  # weight -> (A, B, alpha / r, whether it is [in, out])
        self.lora_names = set()  # the adapters' parameter names
        if lora:  # PEFT: only the adapters (and modules_to_save) train
            also = tuple(lora.get("also_train", ()))
            for name in [n for n in self.params if not matches_any(n, also)]:
                self.tensors[name] = self.params.pop(name).detach()
            self._add_lora(lora, seed)
        # {parameter: [(begin, end)]}: rows of dim 0 the optimizer leaves as they are.
        self.frozen_rows = {}
        for entry in row_entries:
            if entry is None:
                continue
            for name in self.params:
                if glob_regex(entry[0]).match(name):
                    self.frozen_rows.setdefault(name, []).extend(entry[1])

    def _add_lora(self, lora, seed):
        """Wraps each MatMul (weight [in, out], or [out, in] through a
        Transpose) and Gemm of a targeted weight as PEFT's LoRA layer:
        y + dropout(x) A^T B^T alpha / r."""
        targets = tuple(lora["targets"])
        r, alpha = lora.get("r", 8), lora.get("alpha", 8)
        ratio = lora.get("dropout", 0.0)
        transposed = {node.output[0]: node.input[0] for node, (fn, attrs) in self.nodes
                      if node.op_type == "Transpose" and attrs.get("perm") == [1, 0]}
        adapters = {}  # weight -> (A, B)
        site = 2 ** 31  # the adapters' dropout sites, in node order
        for i, (node, (fn, attrs)) in enumerate(self.nodes):
            if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
                continue
            w = node.input[1]
            in_out = True
            if node.op_type == "MatMul" and w in transposed:
                w, in_out = transposed[w], False
            elif node.op_type == "Gemm" and attrs.get("transB", 0):
                in_out = False
            if not matches_any(w, targets) or w not in self.tensors:
                continue
            shape = tuple(self.tensors[w].shape)
            fan_in, out = shape if in_out else shape[::-1]
            if w not in adapters:
                module = w[:-len(".weight")] if w.endswith(".weight") else w
                a_name, b_name = module + ".lora_A.weight", module + ".lora_B.weight"
                a = torch.from_numpy(dropout_reference.lora_init(
                    (r, fan_in), seed, dropout_reference.lora_stream(a_name), fan_in))
                self.params[a_name] = torch.nn.Parameter(a)
                self.params[b_name] = torch.nn.Parameter(torch.zeros(out, r))
                adapters[w] = (self.params[a_name], self.params[b_name])
                self.lora_merge[w] = adapters[w] + (alpha / r, in_out)
                self.lora_names.update((a_name, b_name))
            a, b = adapters[w]
            gemm = node.op_type == "Gemm"
            scale = alpha / r * (attrs.get("alpha", 1.0) if gemm else 1.0)

            def adapted(ins, attrs, n_out, fn=fn, a=a, b=b, scale=scale, gemm=gemm,
                        site=site):
                y = fn(ins, attrs, n_out)
                x = ins[0]
                if gemm and attrs.get("transA", 0):
                    x = x.t()
                if ratio > 0:
                    keep = dropout_reference.keep_mask(tuple(x.shape), DROPOUT.seed,
                                                       DROPOUT.step, DROPOUT.micro, site, ratio)
                    x = x * torch.from_numpy(keep.astype(np.float32) *
                                             dropout_reference.scale(ratio))
                return y + ((x @ a.t()) @ b.t()) * scale

            self.nodes[i] = (node, (adapted, attrs))
            site += 1
        missing = [g for g in targets if not any(glob_regex(g).match(w) for w in adapters)]
        if missing:
            raise RefError(f"plan lora.targets {missing} adapt no MatMul or Gemm weight")
        if lora.get("init_adapter"):  # PEFT's names: base_model.model.<M less the prefix>
            given = read_safetensors(os.path.join(lora["init_adapter"],
                                                  "adapter_model.safetensors"))
            prefix = lora.get("module_prefix", "")
            with torch.no_grad():
                for name in self.lora_names:
                    key = "base_model.model." + name[len(prefix):]
                    if key not in given:
                        raise RefError(f"lora.init_adapter has no {key!r}")
                    self.params[name].copy_(torch.from_numpy(given[key].astype(np.float32)))

    def merged_params(self):
        """The trained parameters as an ONNX export holds them: with LoRA the
        adapted weights merged (W + B A alpha / r, in W's orientation) instead
        of the adapters."""
        out = {n: p for n, p in self.params.items() if n not in self.lora_names}
        for w, (a, b, scale, in_out) in self.lora_merge.items():
            delta = (b.detach() @ a.detach()) * scale
            out[w] = self.tensors[w] + (delta.t() if in_out else delta)
        return out

    def _add_initializer(self, name, value, is_float, frozen):
        if not is_float:
            self.tensors[name] = value
        elif matches_any(name, frozen):
            self.tensors[name] = value.to(torch.float32)
        else:
            self.params[name] = torch.nn.Parameter(value.to(torch.float32))
            self.tensors[name] = self.params[name]

    @staticmethod
    def _resolve(node):
        """The op function and attribute values of a node; rejects what is unsupported."""
        where = f"node {node.name!r} ({node.op_type})"
        if node.domain not in ("", "ai.onnx"):
            raise RefError(f"{where}: unsupported domain {node.domain!r}")
        if node.op_type not in OPS:
            raise RefError(f"{where}: unsupported op (see docs/ops.md)")
        fn, allowed = OPS[node.op_type]
        attrs = {}
        for attr in node.attribute:
            if attr.name not in allowed:
                raise RefError(f"{where}: attribute {attr.name!r} is not supported")
            attrs[attr.name] = _attribute_value(attr)
        return fn, attrs

    def run(self, feeds):
        """Execute the graph on feeds (input name -> tensor); returns the outputs."""
        env = dict(self.tensors)
        env.update(feeds)
        DROPOUT.site = 0
        for node, (fn, attrs) in self.nodes:
            where = f"node {node.name!r} ({node.op_type})"
            try:
                ins = [env[name] if name else None for name in node.input]
            except KeyError as e:
                raise RefError(f"{where}: input {e.args[0]!r} is not defined before it") from e
            try:
                outs = fn(ins, attrs, len(node.output))
            except (RuntimeError, ValueError, IndexError, TypeError) as e:
                raise RefError(f"{where}: {e}") from e
            if isinstance(outs, torch.Tensor):
                outs = (outs,)
            for name, value in zip(node.output, outs):
                if name:
                    env[name] = value
        return [env[name] for name in self.outputs]


def read_safetensors(path, dtypes_out=None):
    """{name: array} of a safetensors file, read from its format (an 8-byte
    little-endian header size, the JSON header, the data); BF16 is read as
    float32. dtypes_out, a dict, gets each tensor's dtype as the file
    names it ("F32", ...)."""
    dtypes = {"F32": "<f4", "F16": "<f2", "BF16": None}
    with open(path, "rb") as f:
        data = f.read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in dtypes:
            raise RefError(f"{path}: {name} is {info['dtype']}, not F32, F16 or BF16")
        if dtypes_out is not None:
            dtypes_out[name] = info["dtype"]
        begin, end = info["data_offsets"]
        raw = data[8 + size + begin:8 + size + end]
        if info["dtype"] == "BF16":
            array = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=dtypes[info["dtype"]])
        out[name] = array.reshape(info["shape"])
    return out


def input_dims(value_info):
    """The dims of a graph input: ints, None where dynamic."""
    shape = value_info.type.tensor_type.shape
    return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
            for d in shape.dim]


class LossFunction:
    """model(inputs, targets) -> scalar loss, feeding the model's two token inputs.

    The inputs go to the plan's data.inputs (default: the first integer graph
    input), the targets to data.targets (default: the second). batch, seq:
    the [B, T] of the inputs (a dynamic batch comes from the batch argument).
    """

    def __init__(self, model, inputs_name=None, targets_name=None, batch=None, feeds=()):
        self.model = model
        by_name = {vi.name: vi for vi in model.inputs}
        feeds = dict(feeds)
        for name in feeds:
            if name not in by_name or by_name[name].type.tensor_type.elem_type not in INT_TYPES:
                raise RefError(f"plan data.feeds names {name!r}, which is not an integer "
                               f"graph input")
        for name, kind in DEFAULT_FEEDS.items():
            if (name in by_name and name not in (inputs_name, targets_name) and
                    by_name[name].type.tensor_type.elem_type in INT_TYPES):
                feeds.setdefault(name, kind)
        self.feeds = {name: (kind, input_dims(by_name[name]),
                             torch_dtype(by_name[name].type.tensor_type.elem_type))
                      for name, kind in feeds.items()}
        int_inputs = [vi.name for vi in model.inputs
                      if vi.type.tensor_type.elem_type in INT_TYPES and vi.name not in feeds]
        names = []
        for given, position in ((inputs_name, 0), (targets_name, 1)):
            if given is not None:
                if given not in by_name:
                    raise RefError(f"plan data names {given!r}, which is not a graph input")
                names.append(given)
            elif len(int_inputs) > position:
                names.append(int_inputs[position])
            else:
                raise RefError("the model needs two integer graph inputs (tokens and targets)")
        if names[0] == names[1]:
            raise RefError(f"the inputs and the targets both name graph input {names[0]!r}")
        others = sorted(set(by_name) - set(names) - set(feeds))
        if others:
            raise RefError(f"graph inputs {others} are neither the inputs nor the targets")
        self.names = names
        self.dtypes = [torch_dtype(by_name[n].type.tensor_type.elem_type) for n in names]
        dims = [input_dims(by_name[n]) for n in names]
        for name, d in zip(names, dims):
            if len(d) != 2:
                raise RefError(f"graph input {name!r} has rank {len(d)}; expected [B, T]")
        b, t = dims[0]
        if t is None:
            raise RefError(f"graph input {names[0]!r} has a dynamic sequence length")
        self.static_batch = b is not None
        if b is None and batch is None:
            raise RefError(f"graph input {names[0]!r} has a dynamic batch: give --batch")
        if b is not None and batch is not None and batch != b:
            raise RefError(f"graph input {names[0]!r} has the static batch {b}, not {batch}")
        self.batch, self.seq = batch or b, t

    def __call__(self, inputs, targets):
        feeds = {self.names[0]: inputs.to(self.dtypes[0]),
                 self.names[1]: targets.to(self.dtypes[1])}
        b, t = inputs.shape
        for name, (kind, dims, dtype) in self.feeds.items():
            shape = [d if d is not None else (b if i == 0 else t) for i, d in enumerate(dims)]
            if _is_shift(kind):
                first = torch.full((b, 1), int(kind[12:]), dtype=targets.dtype)
                value = torch.cat([first, targets[:, :-1]], dim=1)
            elif kind == "arange":
                value = torch.arange(shape[-1]).expand(shape) if shape else torch.tensor(0)
            else:
                value = torch.full(shape, 1 if kind == "ones" else 0)
            feeds[name] = value.to(dtype)
        outs = self.model.run(feeds)
        loss = outs[0]
        if loss.numel() != 1 or not loss.is_floating_point():
            raise RefError(f"the first graph output is not a float scalar loss "
                           f"(shape {list(loss.shape)}, {loss.dtype})")
        return loss.reshape(())


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
class TokenData:
    """An llm.c token file read as [B, T] batches of inputs and targets."""

    def __init__(self, path):
        with open(path, "rb") as f:
            raw = f.read()
        if len(raw) < HEADER_INTS * 4:
            raise RefError(f"{path}: shorter than the {HEADER_INTS * 4}-byte header")
        header = np.frombuffer(raw, dtype="<i4", count=HEADER_INTS)
        if header[0] != TOKEN_MAGIC:
            raise RefError(f"{path}: bad magic {header[0]} (expected {TOKEN_MAGIC})")
        if header[1] != TOKEN_VERSION:
            raise RefError(f"{path}: unsupported version {header[1]} (expected {TOKEN_VERSION})")
        count = int(header[2])
        available = (len(raw) - HEADER_INTS * 4) // 2
        if count < 0 or available < count:
            raise RefError(f"{path}: the header says {count} tokens but the file has "
                           f"{available}")
        self.path = path
        self.tokens = np.frombuffer(raw, dtype="<u2", count=count,
                                    offset=HEADER_INTS * 4).astype(np.int64)

    def steps_per_pass(self, batch, seq):
        """E: how many steps read the file once."""
        steps = (len(self.tokens) - 1) // (batch * seq)
        if steps < 1:
            raise RefError(f"{self.path}: {len(self.tokens)} tokens are too few for one "
                           f"batch of {batch} x {seq} (+1)")
        return steps

    def batch(self, step, batch, seq, targets_from="next_tokens"):
        """The (inputs, targets) int64 tensors [batch, seq] of a step; targets_from
        "tokens" gives the inputs as the targets (plan data.targets_from)."""
        base = (step % self.steps_per_pass(batch, seq)) * batch * seq
        rows = base + np.arange(batch)[:, None] * seq + np.arange(seq)[None, :]
        inputs = torch.from_numpy(self.tokens[rows])
        if targets_from == "tokens":
            return inputs, inputs.clone()
        return inputs, torch.from_numpy(self.tokens[rows + 1])


# --------------------------------------------------------------------------
# Plan and training
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Plan:
    """The training settings of a plan, with their defaults."""
    optimizer: str = "adamw"
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01  # sgd: 0
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    max_grad_norm: float = 0.0
    no_decay: tuple = ()
    frozen: tuple = ()
    padding_idx: tuple = ()  # (glob, row) pairs
    schedule: str = "warmup_decay"  # lr_schedule.type
    warmup_steps: int = 0
    decay: str = "constant"
    min_lr: float = 0.0
    decay_steps: int = 0
    warmup_type: str = "log"  # DeepSpeed's schedules
    warmup_min_lr: float = 0.0
    warmup_min_ratio: float = 0.0
    cos_min_ratio: float = 1e-4
    micro_batches: int = 1
    global_batch: int = 0  # a check of the model's batch (0: none)
    inputs: str = None
    targets: str = None
    feeds: tuple = ()  # (graph input, "ones" | "zeros" | "arange") pairs
    targets_from: str = "next_tokens"
    dropout_ratio: float = None
    lora: tuple = ()  # the plan's lora object as (key, value) pairs; () = none


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_globs(v):
    if not (isinstance(v, list) and all(isinstance(g, str) for g in v)):
        return False
    try:
        for g in v:
            glob_regex(g)
    except RefError:
        return False
    return True


# data.feeds: generated values of integer graph inputs, and the defaults by name
# (what Hugging Face exports take beside the token ids and labels).
FEED_KINDS = ("ones", "zeros", "arange")


def _is_shift(kind):
    """data.feeds "shift_right:ID": the targets shifted right, ID first."""
    return (isinstance(kind, str) and kind.startswith("shift_right:")
            and kind[12:].isdigit())
DEFAULT_FEEDS = {"attention_mask": "ones", "position_ids": "arange",
                 "token_type_ids": "zeros"}


# lr_schedule.type: autopar's own, and DeepSpeed's WarmupLR, WarmupDecayLR and
# WarmupCosineLR.
LR_SCHEDULE_TYPES = ("warmup_decay", "deepspeed_warmup_lr", "deepspeed_warmup_decay_lr",
                     "deepspeed_warmup_cosine_lr")


# section -> key -> (check, what it must be)
PLAN_SCHEMA = {
    "optimizer": {
        "type": (lambda v: v in ("adamw", "sgd"), '"adamw" or "sgd"'),
        "lr": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "betas": (lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_number, v)),
                  "two numbers"),
        "eps": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "weight_decay": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "momentum": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "dampening": (_is_number, "a number"),
        "nesterov": (lambda v: isinstance(v, bool), "true or false"),
        "max_grad_norm": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "no_decay": (_is_globs, "a list of well-formed globs"),
    },
    "lr_schedule": {
        "type": (lambda v: v in LR_SCHEDULE_TYPES, " or ".join(map(repr, LR_SCHEDULE_TYPES))),
        "warmup_steps": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
        "decay": (lambda v: v in ("constant", "cosine", "linear"),
                  '"constant", "cosine" or "linear"'),
        "min_lr": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "decay_steps": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
        "warmup_type": (lambda v: v in ("log", "linear"), '"log" or "linear"'),
        "warmup_min_lr": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "warmup_min_ratio": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "cos_min_ratio": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    },
    "batch": {"micro_batches": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
              "global_batch": (lambda v: _is_int(v) and v >= 0, "an integer >= 0")},
    "dropout": {"ratio": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)")},
    "lora": {"targets": (_is_globs, "a list of well-formed globs"),
             "r": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
             "alpha": (lambda v: _is_number(v) and v > 0, "a number > 0"),
             "dropout": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
             "also_train": (_is_globs, "a list of well-formed globs"),
             "init_adapter": (lambda v: isinstance(v, str), "a string"),
             "module_prefix": (lambda v: isinstance(v, str), "a string")},
    "data": {"inputs": (lambda v: isinstance(v, str), 'a graph input name or ""'),
             "targets": (lambda v: isinstance(v, str), 'a graph input name or ""'),
             "feeds": (lambda v: isinstance(v, dict) and all(
                 isinstance(k, str) and (x in FEED_KINDS or _is_shift(x))
                 for k, x in v.items()),
                 'an object of graph input: "ones", "zeros", "arange" or '
                 '"shift_right:ID"'),
             "targets_from": (lambda v: v in ("next_tokens", "tokens"),
                              '"next_tokens" or "tokens"')},
}
PLAN_FIELDS = {("optimizer", "type"): "optimizer", ("dropout", "ratio"): "dropout_ratio",
               ("lr_schedule", "type"): "schedule"}  # key -> Plan field, where they differ


def parse_plan(obj, where="plan"):
    """A Plan from a plan's JSON object; unknown keys are warned about."""
    if not isinstance(obj, dict):
        raise RefError(f"{where}: not a JSON object")
    plan = Plan()
    for section, value in obj.items():
        if section in IGNORED_PLAN_KEYS:
            continue
        if section == "frozen":
            if not _is_globs(value):
                raise RefError(f"{where}: frozen must be a list of well-formed globs")
            plan.frozen = tuple(value)
            continue
        if section == "padding_idx":
            if not (isinstance(value, dict) and _is_globs(list(value)) and
                    all(_is_int(v) and v >= 0 for v in value.values())):
                raise RefError(f"{where}: padding_idx must map well-formed globs to "
                               f"rows (integers >= 0)")
            plan.padding_idx = tuple(value.items())
            continue
        if section not in PLAN_SCHEMA:
            print(f"torch_ref.py: warning: {where}: ignoring unknown key {section!r}",
                  file=sys.stderr)
            continue
        if not isinstance(value, dict):
            raise RefError(f"{where}: {section} must be an object")
        for key, v in value.items():
            if key not in PLAN_SCHEMA[section]:
                print(f"torch_ref.py: warning: {where}: ignoring unknown key "
                      f"{section}.{key}", file=sys.stderr)
                continue
            check, what = PLAN_SCHEMA[section][key]
            if not check(v):
                raise RefError(f"{where}: {section}.{key} must be {what}, got {v!r}")
            if isinstance(v, list):
                v = tuple(v)
            if isinstance(v, dict):
                v = tuple(v.items())
            if section == "data" and v == "":  # "": the default inputs
                v = None
            if section == "lora":
                plan.lora = plan.lora + ((key, v),)
                continue
            setattr(plan, PLAN_FIELDS.get((section, key), key), v)
    if plan.optimizer == "sgd" and "weight_decay" not in obj.get("optimizer", {}):
        plan.weight_decay = 0.0
    if plan.schedule != "warmup_decay" and "warmup_steps" not in obj.get("lr_schedule", {}):
        plan.warmup_steps = 1000  # DeepSpeed's warmup_num_steps
    return plan


def load_plan(path):
    """The Plan of a JSON file, or the default Plan when path is None."""
    if path is None:
        return Plan()
    try:
        with open(path) as f:
            obj = json.load(f)
    except json.JSONDecodeError as e:
        raise RefError(f"{path}: not valid JSON: {e}") from e
    return parse_plan(obj, path)


def deepspeed_lr(plan, iteration, total_steps):
    """DeepSpeed 0.16's WarmupLR / WarmupDecayLR / WarmupCosineLR after
    `iteration` + 1 scheduler steps (-1: as constructed)."""
    warmup = max(2, plan.warmup_steps)
    total = plan.decay_steps or total_steps

    def gamma():
        if plan.warmup_type == "log":
            return (1.0 / math.log(warmup)) * math.log(iteration + 1)
        return iteration / warmup

    if plan.schedule == "deepspeed_warmup_cosine_lr":
        if iteration < 0:
            return 0.0
        if iteration < warmup:
            ratio = plan.warmup_min_ratio + gamma() * (1.0 - plan.warmup_min_ratio)
        else:
            ratio = (1 + math.cos(math.pi * (iteration - warmup + 1) / (total - warmup))) / 2
            ratio = max(0.0, plan.cos_min_ratio + (1.0 - plan.cos_min_ratio) * ratio)
        return plan.lr * ratio
    low, delta = plan.warmup_min_lr, plan.lr - plan.warmup_min_lr
    if iteration < 0:
        return low
    if iteration < warmup:
        g = gamma()
    elif plan.schedule == "deepspeed_warmup_decay_lr":
        g = max(0.0, float(total - iteration) / float(max(1.0, total - warmup)))
    else:
        g = 1.0
    return low + delta * g


def scheduled_lr(plan, step, total_steps):
    """The learning rate of 0-based step `step` of a run of total_steps."""
    if plan.schedule != "warmup_decay":
        # DeepSpeed's engine steps the scheduler after each update.
        return deepspeed_lr(plan, step - 1, total_steps)
    warmup = plan.warmup_steps
    if step < warmup:
        return plan.lr * (step + 1) / warmup
    if plan.decay == "constant":
        return plan.lr
    end = plan.decay_steps or total_steps
    progress = 1.0 if end <= warmup else min(max((step - warmup) / (end - warmup), 0.0), 1.0)
    if plan.decay == "cosine":
        return plan.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (plan.lr - plan.min_lr)
    return plan.min_lr + (1.0 - progress) * (plan.lr - plan.min_lr)


def make_optimizer(plan, named_params):
    """torch.optim.AdamW or SGD with a decay and a no-decay parameter group."""
    decay = [p for n, p in named_params if not matches_any(n, plan.no_decay)]
    no_decay = [p for n, p in named_params if matches_any(n, plan.no_decay)]
    groups = [{"params": ps, "weight_decay": wd}
              for ps, wd in ((decay, plan.weight_decay), (no_decay, 0.0)) if ps]
    if not groups:
        raise RefError("the model has no trainable parameters")
    try:
        if plan.optimizer == "adamw":
            return torch.optim.AdamW(groups, lr=plan.lr, betas=plan.betas, eps=plan.eps)
        return torch.optim.SGD(groups, lr=plan.lr, momentum=plan.momentum,
                               dampening=plan.dampening, nesterov=plan.nesterov)
    except ValueError as e:
        raise RefError(f"plan optimizer: {e}") from e


def dump_gradients(directory, named_params):
    """Write each parameter's gradient as DIRECTORY/<safe name>.npy (zeros where
    the loss does not depend on the parameter)."""
    os.makedirs(directory, exist_ok=True)
    for name, p in named_params:
        grad = p.grad if p.grad is not None else torch.zeros_like(p)
        np.save(os.path.join(directory, safe_name(name) + ".npy"), grad.detach().numpy())


def train(named_params, loss_fn, batch_fn, steps, plan, dump_grads=None, frozen_rows=None):
    """Train for `steps` steps; yields each step's log record.

    named_params: [(name, Parameter)]; loss_fn(inputs, targets) -> scalar loss;
    batch_fn(step) -> (inputs, targets) of the whole batch, which is split into
    plan.micro_batches consecutive chunks whose gradients are averaged.
    dump_grads: a directory for step 0's gradients (before clipping).
    frozen_rows: {name: [(begin, end)]}: rows of dim 0 that get no gradient
    (a hook, as a PyTorch user freezes rows) and that the update leaves as
    they were (restored after it: no weight decay either).
    """
    params = [p for _, p in named_params]
    frozen_rows = frozen_rows or {}
    kept = [(p, [(b, e, p.detach()[b:e].clone()) for b, e in frozen_rows[n]])
            for n, p in named_params if n in frozen_rows]
    optimizer = make_optimizer(plan, named_params)
    micro = plan.micro_batches
    max_norm = plan.max_grad_norm if plan.max_grad_norm > 0 else math.inf
    for step in range(steps):
        lr = scheduled_lr(plan, step, steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, targets = batch_fn(step)
        if inputs.shape[0] % micro:
            raise RefError(f"micro_batches {micro} does not divide the batch {inputs.shape[0]}")
        chunk = inputs.shape[0] // micro
        optimizer.zero_grad(set_to_none=True)
        losses = []
        for k in range(micro):
            DROPOUT.step, DROPOUT.micro = step, k
            rows = slice(k * chunk, (k + 1) * chunk)
            loss = loss_fn(inputs[rows], targets[rows])
            (loss / micro).backward()
            losses.append(loss.item())
        for p, rows in kept:
            for b, e, _ in rows:
                if p.grad is not None:
                    p.grad[b:e] = 0
        if step == 0 and dump_grads:
            dump_gradients(dump_grads, named_params)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        optimizer.step()
        with torch.no_grad():
            for p, rows in kept:
                for b, e, values in rows:
                    p[b:e] = values
        yield {"step": step, "loss": sum(losses) / micro, "lr": lr,
               "grad_norm": float(grad_norm)}


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("--data", required=True, metavar="TOKENS.bin", help="llm.c token file")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--plan", metavar="PLAN.json")
    p.add_argument("--batch", type=int, help="the batch of a model whose batch is dynamic")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--seed", type=int, default=0,
                   help="the seed of the dropout masks (the program's --seed)")
    p.add_argument("--dump-grads", metavar="DIR",
                   help="write step 0's gradients (before clipping) as DIR/<param>.npy")
    p.add_argument("--save-weights", metavar="WEIGHTS.npz",
                   help="write the trained parameters after the last step, by name")
    p.add_argument("--save-lora", metavar="ADAPTERS.npz",
                   help="with the plan's lora: write the trained adapters (M.lora_A.weight, "
                   "M.lora_B.weight) after the last step")
    p.add_argument("-o", "--output", required=True, metavar="LOSSES.jsonl")
    args = p.parse_args(argv)
    for name in ("steps", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be positive")
    if args.batch is not None and args.batch < 1:
        p.error("--batch must be positive")
    return args


def run(args):
    """Train as the command line says and write the log (only when every step ran);
    returns the last step's record."""
    plan = load_plan(args.plan)
    DROPOUT.seed, DROPOUT.ratio = args.seed, plan.dropout_ratio
    model = OnnxModel(args.model, frozen=plan.frozen, padding_idx=plan.padding_idx,
                      lora=dict(plan.lora) if plan.lora else None, seed=args.seed)
    loss_fn = LossFunction(model, plan.inputs, plan.targets, args.batch, plan.feeds)
    data = TokenData(args.data)
    batch, seq = loss_fn.batch, loss_fn.seq
    data.steps_per_pass(batch, seq)  # fail early on a file too short
    records = []
    try:
        for record in train(list(model.params.items()), loss_fn,
                            lambda step: data.batch(step, batch, seq, plan.targets_from),
                            args.steps, plan,
                            args.dump_grads, model.frozen_rows):
            records.append(record)
    except RefError as e:
        if plan.micro_batches > 1 and loss_fn.static_batch:
            raise RefError(f"{e} (note: micro_batches {plan.micro_batches} runs the graph at "
                           f"batch {batch // plan.micro_batches}, but its batch {batch} is "
                           f"static: if its ops hard-code it, export it with a dynamic "
                           f"batch)") from e
        raise
    if args.save_weights:
        save_weights(args.save_weights, model.merged_params())
    if args.save_lora:
        save_weights(args.save_lora, {n: model.params[n] for n in model.lora_names})
    tmp = args.output + ".tmp"
    with open(tmp, "w") as out:
        out.writelines(json.dumps(r) + "\n" for r in records)
    os.replace(tmp, args.output)
    return records[-1]


def save_weights(path, params):
    """Write {name: float32 array} of the parameters as an .npz archive (atomically)."""
    arrays = {name: p.detach().numpy().astype(np.float32) for name, p in params.items()}
    tmp = path + ".tmp.npz"  # np.savez appends .npz to names without it
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.monotonic()
    try:
        record = run(args)
    except (RefError, OSError) as e:
        print(f"torch_ref.py: error: {e}", file=sys.stderr)
        return 1
    print(f"torch_ref.py: {args.steps} steps in {time.monotonic() - start:.1f}s, "
          f"last loss {record['loss']:.6f}; wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
