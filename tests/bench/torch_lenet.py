#!/usr/bin/env python3
"""PyTorch baseline for tests/bench/lenet_bench.cpp: the same LeNet-5 (conv 5x5 6 channels pad 2,
ReLU, max-pool 2, conv 5x5 16 channels, ReLU, max-pool 2, 120, 84, 10) on one thread, timed the
way google benchmark times nnasm's rows: the median of repeated runs after a warm-up.

Rows: inference at batch 1 in eager mode and as a frozen TorchScript module (softmax on top, as
BM_lenet_infer_b1), and one training step at batch 64 (forward, cross-entropy, backward, SGD with
momentum 0.9, as BM_lenet_train_step_b64). Needs Debian's python3-torch (make bench-deps);
run it with `make bench-torch`.
"""
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("torch_lenet.py: PyTorch is not installed (make bench-deps installs python3-torch)")
    sys.exit(0)


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def median_us(fn, reps, warmup=20):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = lenet().eval()
    x1 = torch.rand(1, 1, 28, 28)
    infer = nn.Sequential(model, nn.Softmax(dim=1)).eval()
    with torch.no_grad():
        eager = median_us(lambda: infer(x1), 2000)
        frozen = torch.jit.freeze(torch.jit.script(infer))
        scripted = median_us(lambda: frozen(x1), 2000)

    train = lenet().train()
    opt = torch.optim.SGD(train.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x64 = torch.rand(64, 1, 28, 28)
    labels = torch.arange(64) % 10

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(train(x64), labels).backward()
        opt.step()

    step_us = median_us(step, 200)
    print(f"PyTorch {torch.__version__}, 1 thread")
    print(f"{'benchmark':44s} {'median':>12s}")
    print(f"{'LeNet-5 inference, batch 1, eager':44s} {eager:10.1f} us")
    print(f"{'LeNet-5 inference, batch 1, TorchScript frozen':44s} {scripted:10.1f} us")
    print(f"{'LeNet-5 training step, batch 64, SGD-momentum':44s} {step_us:10.1f} us")


if __name__ == "__main__":
    main()
