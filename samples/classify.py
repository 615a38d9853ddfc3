#!/usr/bin/python3
"""classify.py: samples/classify.c in Python. It loads an inference model file (for example the
batch-1 export of `make run`'s Fashion-MNIST MLP) through python/nnasm.py and classifies the
Fashion-MNIST test set one image per run. It prints the accuracy and writes the predicted classes,
one per line, with --predictions FILE.

    nnasm export --inference --batch 1 fashion_mlp.nnm -o fashion_mlp_infer.nnm
    /usr/bin/python3 samples/classify.py fashion_mlp_infer.nnm [--limit N] [--predictions FILE]
"""

import argparse
import gzip
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import nnasm  # noqa: E402


def read_idx(path, header_bytes):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=header_bytes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--input", default="x")
    ap.add_argument("--output", default="logits")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--data", default=os.environ.get("NNASM_FASHION_MNIST") or "/usr/share/datasets/fashion-mnist")
    ap.add_argument("--predictions")
    a = ap.parse_args()

    images = read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz"), 16).reshape(-1, 784)
    labels = read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz"), 8)
    n = len(labels) if a.limit is None else min(a.limit, len(labels))
    try:
        with nnasm.Model(a.model) as m:
            shape = dict((i.name, i.shape) for i in m.inputs)[a.input]
            predicted = np.empty(n, np.int64)
            for i in range(n):
                x = (images[i] / np.float32(255)).astype(np.float32).reshape(shape)
                predicted[i] = np.argmax(m.run({a.input: x}, copy=False)[a.output])
    except (nnasm.Error, KeyError) as e:
        sys.exit(f"classify.py: {e}")
    print(f"accuracy: {100 * np.mean(predicted == labels[:n]):.2f}% of {n} test images")
    if a.predictions:
        np.savetxt(a.predictions, predicted, fmt="%d")


if __name__ == "__main__":
    main()
