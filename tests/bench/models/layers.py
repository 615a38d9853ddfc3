#!/usr/bin/env python3
"""`make bench-layers`: where a CNN's time goes, layer by layer, in nnasm and in ONNX Runtime.

For each model at batch 1 on one thread (the zoo of export_zoo.py, imported as make
bench-models does): nnasm's per-instruction profile (`nnasm bench --profile`) and ONNX Runtime's
own per-node profile (ort_time.js with ORT_PROFILE), both the mean time a run. Convolutions are
paired by their weight shape, output shape and occurrence (both engines keep the graph's order
of equal shapes); ONNX Runtime's fused Conv nodes include what it fused in (the activation, a
residual Add), nnasm's CONV2D its fused activation, with the CALC or ADD that nnasm keeps for a
residual counted among the other instructions. Everything else is summed by operator.

    /usr/bin/python3 tests/bench/models/layers.py [--models resnet18,mobilenet_v2] [--seconds 2]
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_zoo  # noqa: E402

CNNS = ("resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0")
# nnasm's convolutions as the passes leave them (engine/passes/winograd.cpp, nchwc_layout.cpp).
CONV_OPS = ("CONV2D", "CONV2D_WINOGRAD", "CONV2D_NCHWC", "DWCONV2D_NCHWC")


def nnasm_profile(args, stem):
    """[(op, out shape, weight shape or None, groups, stride, µs a run, kernel)] in program order."""
    out = subprocess.run([args.nnasm, "bench", stem + ".nnm", "--threads", "1", "--seconds", str(args.seconds),
                          "--profile"], check=True, capture_output=True, text=True).stdout
    params, rows = {}, []
    for line in out.splitlines():
        m = re.match(r"param\s+@(\S+)\s*:\s*f32\[([0-9,]+)\]", line)
        if m:
            params[m.group(1)] = tuple(int(v) for v in m.group(2).split(","))
            continue
        m = re.match(r"\s+([A-Z0-9_]+)\s+(.*?);\s*\S+\[([0-9,]*)\]\s+([0-9.]+) (us|ms)\s+[0-9.]+%\s+kernel: (\S+)", line)
        if not m:
            continue
        op, operands, shape, t, unit, kernel = m.groups()
        us = float(t) * (1000 if unit == "ms" else 1)
        w = groups = stride = None
        if op in CONV_OPS:
            # The weights, or what the passes derived from them (@w -> %w.winograd0, %w.nchwc0).
            name = re.sub(r"\.(winograd|nchwc)\d+$", "", re.search(r", [@%]([^, ]+)", operands).group(1))
            w = params.get(name)
            g = re.search(r"groups=(\d+)", operands)
            groups = int(g.group(1)) if g else w[0]  # DWCONV2D_NCHWC: depthwise
            stride = int(re.search(r"stride=\[(\d+)", operands).group(1))
            op = "CONV2D"  # every form of the convolution pairs with ONNX Runtime's Conv
        rows.append((op, tuple(int(v) for v in shape.split(",") if v), w, groups, stride, us, kernel))
    return rows


def ort_profile(args, stem):
    """[(op, out shape, weight shape or None, µs a run)] in ONNX Runtime's order; runs ort_time.js
    with its profiler on and averages each node over the timed runs (the warm-up's dropped)."""
    prefix = os.path.join(args.work, "ort_profile")
    for f in glob.glob(prefix + "*.json"):
        os.remove(f)
    env = dict(os.environ, NODE_PATH=args.ort_modules, ORT_PROFILE=prefix)
    run = json.loads(subprocess.run(["node", os.path.join(HERE, "ort_time.js"), stem + ".onnx", stem + "_x.npy", "1",
                                     str(args.seconds)], check=True, capture_output=True, text=True, env=env).stdout)
    events = json.load(open(sorted(glob.glob(prefix + "*.json"))[-1]))
    per_node = collections.OrderedDict()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node.setdefault(e["name"], []).append(e)
    rows = []
    for name, evs in per_node.items():
        timed = evs[-run["runs"]:]  # the timed runs come after the warm-up's
        a = timed[0]["args"]
        ins = [next(iter(t.values())) for t in a.get("input_type_shape", [])]
        out = next(iter(a["output_type_shape"][0].values())) if a.get("output_type_shape") else []
        w = tuple(ins[1]) if a["op_name"] in ("Conv", "FusedConv") and len(ins) > 1 else None
        rows.append((a["op_name"], tuple(out), w, sum(e["dur"] for e in timed) / len(timed)))
    return rows, run["p50_us"]


def fmt(us):
    return "—" if us is None else (f"{us:.0f} µs" if us < 1000 else f"{us / 1000:.2f} ms")


def report(args, name):
    stem = os.path.join(args.zoo, f"{name}_b1")
    nn = nnasm_profile(args, stem)
    ort, ort_p50 = ort_profile(args, stem)
    # ONNX Runtime's NCHWc convolutions produce blocked shapes ([N, C/8 or /16, H, W, 8 or 16]
    # folded back here): pair by weight shape and spatial output size, in order.
    ort_convs = collections.defaultdict(list)
    for op, out, w, us in ort:
        if w is not None:
            ort_convs[(w, tuple(out[2:4]))].append(us)
    seen = collections.Counter()
    print(f"\n{name}, batch 1, one thread: nnasm p50 (profile's sum) vs ONNX Runtime p50 {fmt(ort_p50)}\n")
    print("| # | convolution | output | nnasm | ORT | nnasm/ORT | nnasm kernel |")
    print("|---:|---|---|---:|---:|---:|---|")
    totals = collections.Counter()
    for i, (op, out, w, groups, stride, us, kernel) in enumerate(r for r in nn if r[0] == "CONV2D"):
        key = (w, tuple(out[2:4]))
        k = seen[key]
        seen[key] += 1
        o = ort_convs[key][k] if k < len(ort_convs[key]) else None
        kind = f"{w[2]}×{w[3]}/{stride}" + (" dw" if groups > 1 else "") + f" {w[1] * groups}→{w[0]}"
        if o is not None:
            totals["paired nnasm"] += us
            totals["paired ort"] += o
        else:
            totals["unpaired nnasm"] += us
        ratio = f"{us / o:.2f}" if o else "—"
        print(f"| {i + 1} | {kind} | {out[2]}×{out[3]} | {fmt(us)} | {fmt(o)} | {ratio} | {kernel.split('+')[0]} |")
    print(f"| | the paired convolutions | | {fmt(totals['paired nnasm'])} | {fmt(totals['paired ort'])} | "
          f"{totals['paired nnasm'] / max(totals['paired ort'], 1e-9):.2f} | |")
    unpaired = [us for key, times in ort_convs.items() for us in times[seen[key]:]]
    if unpaired or totals["unpaired nnasm"]:
        # ONNX Runtime pads a blocked convolution's channels to its block (MobileNetV2's 24 to 32),
        # which changes the weight shape the pairing looks for.
        print(f"| | unpaired (ORT's channels padded to its block) | | {fmt(totals['unpaired nnasm'])} | "
              f"{fmt(sum(unpaired))} | | |")
    other_nn, other_ort = collections.Counter(), collections.Counter()
    for r in nn:
        if r[0] != "CONV2D":
            other_nn[r[0]] += r[5]
    for op, out, w, us in ort:
        if w is None:
            other_ort[op] += us
    print("\nother instructions, nnasm: " + ", ".join(f"{k} {fmt(v)}" for k, v in other_nn.most_common()))
    print("other nodes, ONNX Runtime: " + ", ".join(f"{k} {fmt(v)}" for k, v in other_ort.most_common()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(CNNS))
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--zoo", default="build/bench-models/zoo")
    ap.add_argument("--nnasm", default="build/nnasm")
    ap.add_argument("--ort-modules", default="build/bench-models/ort/node_modules")
    ap.add_argument("--work", default="build/bench-models")
    args = ap.parse_args()
    for name in args.models.split(","):
        if name not in CNNS:
            sys.exit(f"layers.py: {name} is not one of {', '.join(CNNS)}")
        if not os.path.exists(os.path.join(args.zoo, f"{name}_b1.nnm")):
            sys.exit(f"layers.py: {name}_b1.nnm is not in {args.zoo} (make bench-models exports and imports it)")
        report(args, name)


if __name__ == "__main__":
    main()
