#!/usr/bin/env python3
"""`make bench-models`: nnasm against ONNX Runtime and PyTorch on real models, in one run.

For each model (tests/bench/models/export_zoo.py) at batch 1 and 8:
  1. export it from PyTorch if its files are missing or older than export_zoo.py;
  2. `nnasm import` it, and run nnasm on the saved input: its output must be within
     1e-4 x max |PyTorch's output| of PyTorch's (ONNX Runtime's is checked the same way);
     a model that fails to import or to match gets a row saying so, and the run goes on;
  3. time it at each thread count with three engines in alternating rounds, each round one short
     measurement per engine, the engine that goes first rotating from round to round:
       nnasm         `nnasm bench FILE.nnm --threads N --seconds S`
       ONNX Runtime  tests/bench/models/ort_time.js (onnxruntime-node; intra-op threads N, one
                     inter-op thread, sequential, every graph optimization)
       PyTorch       the frozen TorchScript module, torch.set_num_threads(N), in this process
                     (its BLAS, OpenBLAS here, on one thread: torch_blas says why)
     Each measurement is a p50 over at least 10 runs or S seconds after a warm-up of at least 10
     runs or S/10 (nnasm bench's schedule); a row's figure is the median of its rounds' p50s.

ONNX Runtime's figure includes the binding's cost per call (a promise, the input Tensor, the
output copied into JavaScript), which `nnasm bench` and a C++ caller do not pay; each round
also times a one-Add model through the same script, and the table shows ONNX Runtime's p50 with
that overhead's median subtracted beside the raw one. nnasm/ORT is nnasm's p50 over the
subtracted figure: below 1, nnasm is faster.

Needs Debian's python3 with python3-torch and python3-torchvision, and onnxruntime-node under
build/bench-models/ort/ (make bench-models-deps installs all three). Run from the repository root:

    /usr/bin/python3 tests/bench/models/bench_models.py [--models resnet18,mlp] [--rounds 3]
        [--seconds 0.5] [--threads 1,2] [--batches 1,8]
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_zoo  # noqa: E402  (after the path it lives on)

TOLERANCE = 1e-4  # of the largest |PyTorch output|
ENGINES = ("nnasm", "ort", "torch")


def p50_of(fn, seconds):
    """nnasm bench's schedule: warm up for 10 runs or a tenth of the time, then time single runs
    for at least 10 runs or `seconds`; the median in microseconds."""
    warm = time.perf_counter()
    i = 0
    while i < 10 or time.perf_counter() - warm < seconds / 10:
        fn()
        i += 1
    times = []
    start = time.perf_counter()
    while len(times) < 10 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def nnasm_p50(args, nnm, x, threads):
    out = subprocess.run([args.nnasm, "-q", "bench", nnm, "--in", f"x={x}", "--threads", str(threads),
                          "--seconds", str(args.seconds)], capture_output=True, text=True)
    m = re.search(r"p50 ([0-9.]+) (ns|us|ms|s)\b", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"nnasm bench {nnm}: {(out.stderr or out.stdout).strip()}")
    return float(m.group(1)) * UNITS[m.group(2)]


def ort_run(args, onnx, x, threads, y=None):
    cmd = ["node", os.path.join(HERE, "ort_time.js"), onnx, x, str(threads), str(args.seconds)]
    out = subprocess.run(cmd + ([y] if y else []), capture_output=True, text=True,
                         env=dict(os.environ, NODE_PATH=args.ort_modules))
    if out.returncode != 0:
        raise RuntimeError((out.stderr or out.stdout).strip())
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt_us(us):
    if us is None:
        return "—"
    return f"{us:.3g} µs" if us < 1000 else f"{us / 1000:.3g} ms"


def torch_blas():
    """The BLAS this process loaded, held to one thread. Debian's PyTorch calls libblas.so.3 for
    its linear layers and matrix products, and which library that is depends on the alternatives
    installed (the reference BLAS, or OpenBLAS once libopenblas is: make bench-deps installs it),
    so the table says which. OpenBLAS's pthread build does not know torch.set_num_threads: it
    would run its own threads at every thread count, and inside PyTorch's OpenMP regions (the
    im2col convolutions) the two pools together oversubscribe the cores many times over."""
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "blas" in line.split()[-1]})
    for lib in libs:
        handle = ctypes.CDLL(lib)
        if hasattr(handle, "openblas_set_num_threads"):
            handle.openblas_set_num_threads(1)
            return os.path.relpath(lib, "/usr/lib/x86_64-linux-gnu") + ", one thread"
    return ", ".join(os.path.relpath(lib, "/usr/lib/x86_64-linux-gnu") for lib in libs) or "none loaded"


def last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


class Row:
    def __init__(self, name, batch, zoo):
        self.name, self.batch = name, batch
        self.stem = os.path.join(zoo, f"{name}_b{batch}")
        self.note = ""       # why nnasm has no figure, or how far off its output is
        self.nnasm_ok = False
        self.module = None   # PyTorch's frozen module, loaded once
        self.x = None
        self.times = {}      # (engine, threads) -> [p50 of each round]
        self.failed = {}     # engine -> why it stopped being timed


def export_missing(names, zoo):
    """Re-exports a model whose files are missing or older than export_zoo.py."""
    os.makedirs(zoo, exist_ok=True)
    script = os.path.getmtime(export_zoo.__file__)
    for name in names:
        for b in export_zoo.BATCHES:
            stem = os.path.join(zoo, f"{name}_b{b}")
            files = [stem + s for s in (".onnx", ".pt", "_x.npy", "_y.npy")]
            if not all(os.path.exists(f) and os.path.getmtime(f) >= script for f in files):
                export_zoo.export(name, b, zoo)
    add = os.path.join(zoo, "add.onnx")
    if not os.path.exists(add) or os.path.getmtime(add) < script:
        export_zoo.export_add(zoo)


def import_and_check(args, row):
    out = subprocess.run([args.nnasm, "-q", "import", row.stem + ".onnx", "-o", row.stem + ".nnm"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        row.note = "import failed: " + last_line(out.stderr or out.stdout)
        return
    got = row.stem + "_nnasm_y.npy"
    out = subprocess.run([args.nnasm, "-q", "run", row.stem + ".nnm", "--in", f"x={row.stem}_x.npy",
                          "--out", f"y={got}"], capture_output=True, text=True)
    if out.returncode != 0:
        row.note = "run failed: " + last_line(out.stderr or out.stdout)
        return
    y, g = np.load(row.stem + "_y.npy"), np.load(got)
    if g.shape != y.shape:
        row.note = f"output shape {list(g.shape)}, PyTorch's {list(y.shape)}"
        return
    err, ref = float(np.abs(g - y).max()), float(np.abs(y).max())
    row.nnasm_ok = True
    if err > TOLERANCE * ref:
        row.note = f"output off: max abs error {err:.3g} (max |y| {ref:.3g})"
    else:
        row.note = f"max abs error {err:.2g}"


def measure(args, row, engine, threads, check, ort_check):
    """One round's p50 of one engine on one row, in microseconds; `check`: ONNX Runtime's output
    is compared with PyTorch's on this call."""
    if engine == "nnasm":
        return nnasm_p50(args, row.stem + ".nnm", row.stem + "_x.npy", threads)
    if engine == "ort":
        res = ort_run(args, row.stem + ".onnx", row.stem + "_x.npy", threads, row.stem + "_y.npy" if check else None)
        if check:
            ort_check[row.stem] = (res["max_abs_err"], res["max_ref"])
        return res["p50_us"]
    with torch.no_grad():
        return p50_of(lambda: row.module(row.x), args.seconds)


def print_peak_share(args, rows, threads, overhead):
    """The CNNs' speed as a share of this machine's FMA peak (tests/bench/models/fma_peak.cpp,
    measured now, on the machine as loaded as the timings were): GFLOP/s of the convolutions and
    linear layers at each engine's p50."""
    flops_of = {(row.name, row.batch): export_zoo.count_flops(row.name, row.batch) for row in rows}
    if not args.fma_peak or all(f is None for f in flops_of.values()):
        return
    peak = json.loads(subprocess.run([args.fma_peak, str(max(threads)), "1"], check=True, capture_output=True,
                                     text=True).stdout)
    if peak.get("isa") == "none":
        return
    print()
    more = f", {peak['gflops_n']:.0f} on {peak['threads']}" if peak["threads"] > 1 else ""
    print(f"FMA peak of this machine ({peak['isa']}): {peak['gflops_1']:.0f} GFLOP/s on one thread{more}")
    print()
    print("| model | batch | threads | GFLOP a run | nnasm GFLOP/s | of peak | ORT − overhead GFLOP/s | of peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        top = peak["gflops_1"] if t == 1 else peak["gflops_n"] * t / peak["threads"]
        for row in rows:
            flops = flops_of[(row.name, row.batch)]
            if flops is None or ("nnasm", t) not in row.times:
                continue
            nn = flops / statistics.median(row.times[("nnasm", t)]) / 1e3
            cells = [f"{nn:.0f}", f"{100 * nn / top:.0f}%"]
            if ("ort", t) in row.times:
                ort = flops / (statistics.median(row.times[("ort", t)]) - overhead[t]) / 1e3
                cells += [f"{ort:.0f}", f"{100 * ort / top:.0f}%"]
            else:
                cells += ["—", "—"]
            print(f"| {row.name} | {row.batch} | {t} | {flops / 1e9:.2f} | " + " | ".join(cells) + " |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(export_zoo.MODELS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default=",".join(map(str, export_zoo.BATCHES)))
    ap.add_argument("--zoo", default="build/bench-models/zoo")
    ap.add_argument("--nnasm", default="build/nnasm")
    ap.add_argument("--ort-modules", default="build/bench-models/ort/node_modules")
    ap.add_argument("--json", default="build/bench-models/results.json", help="every round's figures")
    ap.add_argument("--fma-peak", default="", help="the fma_peak program (tests/bench/models/fma_peak.cpp)")
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in export_zoo.MODELS]
    if unknown:
        sys.exit(f"bench_models.py: unknown model {', '.join(unknown)} (known: {', '.join(export_zoo.MODELS)})")
    threads = [int(t) for t in args.threads.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    if not set(batches) <= set(export_zoo.BATCHES):
        sys.exit(f"bench_models.py: --batches: the exports have {export_zoo.BATCHES}")
    if not os.path.isdir(os.path.join(args.ort_modules, "onnxruntime-node")):
        sys.exit(f"bench_models.py: no onnxruntime-node under {args.ort_modules} (make bench-models-deps)")

    import warnings
    warnings.filterwarnings("ignore")  # the exporter's tracer warnings
    torch.set_num_interop_threads(1)
    blas = torch_blas()
    export_missing(names, args.zoo)
    add = (os.path.join(args.zoo, "add.onnx"), os.path.join(args.zoo, "add_x.npy"))

    rows = [Row(n, b, args.zoo) for n in names for b in batches]
    for row in rows:
        import_and_check(args, row)
        row.module = torch.jit.load(row.stem + ".pt")
        row.x = torch.from_numpy(np.load(row.stem + "_x.npy"))
        print(f"{row.name} batch {row.batch}: {row.note}", flush=True)

    overhead = {t: [] for t in threads}
    ort_check = {}
    for r in range(args.rounds):
        order = ENGINES[r % 3:] + ENGINES[:r % 3]
        for t in threads:
            torch.set_num_threads(t)
            overhead[t].append(ort_run(args, *add, t)["p50_us"])
            for row in rows:
                for engine in order:
                    if (engine == "nnasm" and not row.nnasm_ok) or engine in row.failed:
                        continue
                    try:
                        us = measure(args, row, engine, t, r == 0 and t == threads[0], ort_check)
                    except RuntimeError as e:  # one engine failing on one model leaves the others
                        row.failed[engine] = last_line(str(e))
                        continue
                    row.times.setdefault((engine, t), []).append(us)
            print(f"round {r + 1} of {args.rounds}, {t} thread{'s' if t > 1 else ''}: done", flush=True)

    med = {t: statistics.median(v) for t, v in overhead.items()}
    ort_version = ort_run(args, *add, 1).get("version", "?")
    print()
    print(f"nnasm vs ONNX Runtime {ort_version} (onnxruntime-node) vs PyTorch {torch.__version__} "
          f"(frozen TorchScript): p50, median of {args.rounds} round{'s' if args.rounds > 1 else ''}, "
          f"{args.seconds} s a measurement")
    print(f"PyTorch's BLAS (linear layers, matrix products): {blas}")
    print("ORT's binding overhead (one-Add model, p50): " +
          ", ".join(f"{t} thread{'s' if t > 1 else ''} {fmt_us(med[t])}" for t in threads))
    print()
    print("| model | batch | threads | nnasm | ORT | ORT − overhead | PyTorch | nnasm/ORT | nnasm/PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        for row in rows:
            m = {e: statistics.median(row.times[(e, t)]) if (e, t) in row.times else None for e in ENGINES}
            ort_net = m["ort"] - med[t] if m["ort"] is not None else None
            ratio = f"{m['nnasm'] / ort_net:.2f}" if m["nnasm"] and ort_net and ort_net > 0 else "—"
            ratio_pt = f"{m['nnasm'] / m['torch']:.2f}" if m["nnasm"] else "—"
            nn = fmt_us(m["nnasm"]) if row.nnasm_ok else row.note
            print(f"| {row.name} | {row.batch} | {t} | {nn} | {fmt_us(m['ort'])} | {fmt_us(ort_net)} | "
                  f"{fmt_us(m['torch'])} | {ratio} | {ratio_pt} |")
    print()
    for row in rows:
        err, ref = ort_check.get(row.stem, (None, None))
        bad = err is not None and err > TOLERANCE * ref
        if (row.nnasm_ok and row.note.startswith("output off")) or bad:
            print(f"check: {row.name} batch {row.batch}: nnasm {row.note}; ORT max abs error {err:.3g}")
        elif not row.nnasm_ok:
            print(f"check: {row.name} batch {row.batch}: {row.note}")
        for engine, why in row.failed.items():
            print(f"failed: {row.name} batch {row.batch}: {engine}: {why}")
    print_peak_share(args, rows, threads, med)
    print(f"outputs checked against PyTorch's: max abs error <= {TOLERANCE:g} x max |output| "
          f"({sum(r.nnasm_ok and not r.note.startswith('output off') for r in rows)} of {len(rows)} nnasm rows pass)")

    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"rounds": args.rounds, "seconds": args.seconds, "ort_overhead_us": overhead,
                   "rows": [{"model": r.name, "batch": r.batch, "note": r.note,
                             "p50_us": {f"{e}/{t}": v for (e, t), v in r.times.items()}} for r in rows]},
                  f, indent=1)
    print(f"every round's figures: {args.json}")


if __name__ == "__main__":
    main()
