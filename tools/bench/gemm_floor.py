#!/usr/bin/env python3
"""The matrix products of a training step alone, timed on the GPU: the floor
under a step that the GPU's arithmetic bounds (docs/gpu.md, "Benchmark
against PyTorch").

Usage: gemm_floor.py MODEL_JSON --tokens N --microbatches M --dtype fp32|bf16
                     [--seq-len T] [--repeats R] [--count-only]

MODEL_JSON is a pplab model config (vocab_size, hidden_size,
intermediate_size, num_hidden_layers, num_attention_heads,
num_key_value_heads). For each of M microbatches of N tokens it runs, layer
by layer, the products of pplab's Linear layers as pplab lays them out: q, k
and v as one matrix; o; gate and up as one matrix; down; then the LM head.
Each is three products: the forward X W^T, the input's gradient dY W and the
weight's gradient dY^T X. The elementwise kernels and the optimizer are
left out. fp32 runs with TF32 off, as PyTorch and pplab run fp32; bf16
multiplies bf16 operands. It runs on the current CUDA device.

With --seq-len T it also times attention alone: each layer's causal
scaled_dot_product_attention, forward and backward, over the microbatch's
N / T sequences, called as pplab calls it (K and V given with their own
heads where a fused kernel takes them so, else repeated to the query's).

Prints one JSON line: ms_per_step (the median of R timed steps, on CUDA
events, after one untimed step), tflop_per_step and tflops, and with
--seq-len attention_ms_per_step (timed the same way). --count-only
prints tflop_per_step alone and needs no torch (6 x the Linear weights x the
tokens: pplab's model FLOPs without attention's, models/flops.h).
"""
import argparse
import json
import statistics
import sys


def shapes(model):
    """(rows of the weight, columns) of each Linear weight of the model, by
    layer, then the head's."""
    h = model["hidden_size"]
    heads = model["num_attention_heads"]
    kv = model["num_key_value_heads"]
    head_dim = model.get("head_dim") or h // heads
    inter = model["intermediate_size"]
    layer = [(heads * head_dim + 2 * kv * head_dim, h), (h, heads * head_dim), (2 * inter, h), (h, inter)]
    return layer * model["num_hidden_layers"] + [(model["vocab_size"], h)]


def flop_per_microbatch(model, tokens):
    return sum(6 * tokens * out_f * in_f for out_f, in_f in shapes(model))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--tokens", type=int, required=True, help="tokens a microbatch")
    p.add_argument("--microbatches", type=int, required=True)
    p.add_argument("--dtype", choices=["fp32", "bf16"], required=True)
    p.add_argument("--seq-len", type=int, default=0, help="tokens a sequence: time attention too")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--count-only", action="store_true", help="print the FLOPs only, time nothing")
    args = p.parse_args()
    if args.tokens < 1 or args.microbatches < 1 or args.repeats < 1 or args.seq_len < 0:
        sys.exit("gemm_floor: --tokens, --microbatches and --repeats must be positive, --seq-len not negative")
    if args.seq_len and args.tokens % args.seq_len:
        sys.exit("gemm_floor: --tokens %d is not whole sequences of --seq-len %d" % (args.tokens, args.seq_len))
    model = json.load(open(args.model))
    flop = flop_per_microbatch(model, args.tokens) * args.microbatches
    if args.count_only:
        print(json.dumps({"tflop_per_step": flop / 1e12}))
        return

    import torch  # only here: --help and the FLOP count need no torch
    # TF32 off: PyTorch 2.9 and later name it fp32_precision, and warn at
    # the older allow_tf32.
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
    if not torch.cuda.is_available():
        sys.exit("gemm_floor: this torch sees no CUDA device")
    dev = torch.device("cuda")
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    n = args.tokens
    # One set of operands per distinct shape: the products' time depends on
    # the shapes, not on which layer's weights they hold.
    operands = {}
    for out_f, in_f in set(shapes(model)):
        operands[(out_f, in_f)] = (torch.randn(n, in_f, device=dev, dtype=dtype),
                                   torch.randn(out_f, in_f, device=dev, dtype=dtype),
                                   torch.randn(n, out_f, device=dev, dtype=dtype))
    order = shapes(model)

    def step():
        for _ in range(args.microbatches):
            for s in order:
                x, w, dy = operands[s]
                torch.mm(x, w.t())
                torch.mm(dy, w)
                torch.mm(dy.t(), x)

    def timed(work):
        work()
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            work()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    ms = timed(step)
    out = {"ms_per_step": round(ms, 3), "tflop_per_step": flop / 1e12, "tflops": flop / (ms / 1e3) / 1e12,
           "dtype": args.dtype}
    if args.seq_len:
        out["attention_ms_per_step"] = round(timed(attention_step(torch, model, args, dev, dtype)), 3)
    print(json.dumps(out))


def attention_step(torch, model, args, dev, dtype):
    """A step's attention alone: each layer's causal SDPA, forward and
    backward, for each microbatch."""
    h = model["hidden_size"]
    heads = model["num_attention_heads"]
    kv = model["num_key_value_heads"]
    head_dim = model.get("head_dim") or h // heads
    rows, T = args.tokens // args.seq_len, args.seq_len
    q = torch.randn(rows, heads, T, head_dim, device=dev, dtype=dtype, requires_grad=True)
    k = torch.randn(rows, kv, T, head_dim, device=dev, dtype=dtype, requires_grad=True)
    v = torch.randn(rows, kv, T, head_dim, device=dev, dtype=dtype, requires_grad=True)
    dout = torch.randn(rows, heads, T, head_dim, device=dev, dtype=dtype)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    # As models/llama_layers.h: K and V unrepeated where a fused kernel takes
    # them so (the math fallback, 0, would materialise the scores).
    choice = getattr(torch, "_fused_sdp_choice", None)
    gqa = heads != kv and choice is not None and choice(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True,
                                                        scale=None, enable_gqa=True) != 0

    def one():
        if gqa:
            o = sdpa(q, k, v, is_causal=True, enable_gqa=True)
        elif heads == kv:
            o = sdpa(q, k, v, is_causal=True)
        else:
            g = heads // kv
            o = sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=True)
        torch.autograd.grad(o, (q, k, v), dout)

    def step():
        for _ in range(args.microbatches):
            for _ in range(model["num_hidden_layers"]):
                one()
    return step


if __name__ == "__main__":
    main()
