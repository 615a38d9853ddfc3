#!/usr/bin/python3
"""ResNet-18 (the models benchmark's, build/bench-models/zoo/resnet18_b1.nnm) quantized to int8
against its f32 self: batch-1 time on one thread, the two alternated, and the top-1 agreement of
their outputs on 100 random inputs (issue 30's targets: int8 time at most 0.6x f32's, the same
top-1 class on at least 95 of 100).

    make bench-models BENCH_MODELS=resnet18   # once: writes the zoo
    make build/libnnasm.so build/nnasm
    /usr/bin/python3 tests/bench/quant/resnet18_int8.py [--rounds 3] [--seconds 2]

It calibrates on 16 random inputs of its own (a seed apart from the 100 it compares on), runs
`nnasm quantize --to int8`, then `nnasm bench --json --threads 1` on each model in turn, and
runs both through the Python binding for the agreement. Prints one JSON object."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import nnasm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build/bench-models/zoo/resnet18_b1.nnm"))
    ap.add_argument("--nnasm", default=os.path.join(ROOT, "build/nnasm"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--inputs", type=int, default=100)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="resnet18_int8_")
    calib = os.path.join(tmp, "calib.npy")
    np.save(calib, np.random.default_rng(1).standard_normal((16, 3, 224, 224), dtype=np.float32))
    q = os.path.join(tmp, "resnet18_int8.nnm")
    report = subprocess.run([a.nnasm, "quantize", a.model, "--to", "int8", "--calibrate", "x=" + calib, "-o", q],
                            check=True, capture_output=True, text=True).stdout

    times = {"f32": [], "int8": []}
    for _ in range(a.rounds):
        for name, path in (("f32", a.model), ("int8", q)):
            out = subprocess.run([a.nnasm, "bench", path, "--json", "--threads", "1", "--seconds", str(a.seconds)],
                                 check=True, capture_output=True, text=True).stdout
            times[name].append(json.loads(out)["median_us"])

    f32, i8 = nnasm.Model(a.model, threads=1), nnasm.Model(q, threads=1)
    rng = np.random.default_rng(2)
    same = 0
    for _ in range(a.inputs):
        x = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
        same += int(np.argmax(f32.run({"x": x})["y"]) == np.argmax(i8.run({"x": x})["y"]))
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(json.dumps({"f32_us": times["f32"], "int8_us": times["int8"], "int8_over_f32": med["int8"] / med["f32"],
                      "top1_same": same, "inputs": a.inputs, "sizes": [os.path.getsize(a.model), os.path.getsize(q)],
                      "report": report.splitlines()[-2:]}, indent=1))


if __name__ == "__main__":
    main()
