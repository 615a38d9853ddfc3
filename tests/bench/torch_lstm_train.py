#!/usr/bin/env python3
"""PyTorch's side of tests/bench/lstm_train_b64.nnasm: one training step of the Fashion-MNIST LSTM
classifier (samples/fashion_lstm.cpp's model) at batch 64 on one thread, eager mode: each image
as 28 steps of 28 pixels, nn.LSTM(28, 128), its last h through nn.Linear(128, 10), cross-entropy,
backward and one Adam step. Prints a `latency:` line shaped like `nnasm bench`'s, so that
tests/bench/lstm_train_b64.sh reads both alike.

Usage: /usr/bin/python3 tests/bench/torch_lstm_train.py [SECONDS]
"""
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("torch_lstm_train.py: PyTorch is not installed (make bench-deps installs python3-torch)")
    sys.exit(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 128)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h[0])


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = Classifier().train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(28, 64, 28)  # [T, N, I], as the listing's %x
    labels = torch.arange(64) % 10

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), labels).backward()
        opt.step()

    start = time.perf_counter()
    for i in range(10**9):
        step()
        if i >= 5 and time.perf_counter() - start > seconds / 10:
            break
    times = []
    start = time.perf_counter()
    while len(times) < 10 or time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    ms = lambda s: f"{1e3 * s:.3f} ms"
    print(f"torch:      PyTorch {torch.__version__} eager, LSTM(28, 128) training step, batch 64, 1 thread")
    print(f"latency:    p50 {ms(statistics.median(times))}  min {ms(times[0])}  ({len(times)} runs)")


if __name__ == "__main__":
    main()
