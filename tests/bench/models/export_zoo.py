#!/usr/bin/env python3
"""Exports the models `make bench-models` compares (tests/bench/models/bench_models.py): for each
model at batch 1 and batch 8, into OUT (default build/bench-models/zoo/):

    NAME_bB.onnx    torch.onnx.export, eval mode, opset 17, a fixed batch; input x, output y
    NAME_bB_x.npy   the input the timings and the output check use
    NAME_bB_y.npy   PyTorch's (eager) output for it
    NAME_bB.pt      the module traced and frozen (torch.jit.freeze), what PyTorch's timings run

and add.onnx with add_x.npy, a single Add of a 16-float input to itself, with which the driver
measures what one call through onnxruntime-node costs beyond the model.

Weights are seeded random (torchvision's constructors with weights=None; nothing is downloaded);
batch normalization gets running statistics other than the identity, so that folding it is
checked. Needs Debian's python3-torch and python3-torchvision (make bench-deps).

    /usr/bin/python3 tests/bench/models/export_zoo.py [--out DIR] [--models a,b,...]
"""
import argparse
import os
import sys
import warnings
import zlib

import numpy as np
import torch
import torch.nn as nn

BATCHES = (1, 8)
OPSET = 17


class Mlp(nn.Module):
    """784-256-128-10, ReLU between the layers (the MLP of docs/benchmarks.md's other tables)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                                 nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


class Encoder(nn.Module):
    """Two transformer encoder layers, d_model 128, 4 heads, feed-forward 512, sequence 32."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, dropout=0.0,
                                           batch_first=True)
        # enable_nested_tensor only matters with a padding mask, which these runs do not have.
        self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


class LstmClassifier(nn.Module):
    """Two LSTM layers of 128 over 32 steps of 64 features (batch first), the last step's output
    into a linear layer of 10: issue 28's first PyTorch export."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class GruClassifier(nn.Module):
    """One GRU of 64 over 16 steps of 32 features (sequence first: x is [16, N, 32]), the last
    step's output into a linear layer of 10: issue 28's second PyTorch export."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(32, 64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[-1])


def vision(name):
    import torchvision.models as tvm
    return lambda: getattr(tvm, name)(weights=None)


# name -> (constructor, input shape without the batch); the batch is axis 0 of the input but
# where BATCH_AXIS says otherwise.
MODELS = {
    "resnet18": (vision("resnet18"), (3, 224, 224)),
    "mobilenet_v2": (vision("mobilenet_v2"), (3, 224, 224)),
    "squeezenet1_1": (vision("squeezenet1_1"), (3, 224, 224)),
    "shufflenet_v2_x1_0": (vision("shufflenet_v2_x1_0"), (3, 224, 224)),
    "transformer": (Encoder, (32, 128)),
    "mlp": (Mlp, (784,)),
    "lstm": (LstmClassifier, (32, 64)),
    "gru": (GruClassifier, (16, 32)),
}
BATCH_AXIS = {"gru": 1}


def input_shape(name, batch):
    shape = list(MODELS[name][1])
    shape.insert(BATCH_AXIS.get(name, 0), batch)
    return tuple(shape)


def count_flops(name, batch):
    """Floating-point operations of one run of a CNN's convolutions and linear layers: 2 per
    multiply-add, what a GFLOP/s figure against the machine's FMA peak counts. None for the other
    models (their attention products are not layers to hook)."""
    if name not in ("resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0"):
        return None
    make = MODELS[name][0]
    macs = [0]

    def hook(m, inputs, out):
        if isinstance(m, nn.Conv2d):
            macs[0] += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        else:
            macs[0] += out.numel() * m.in_features

    model = make().eval()
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            m.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros(input_shape(name, batch)))
    return 2 * macs[0]


def randomize_batchnorm(model):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)


def export(name, batch, out):
    make = MODELS[name][0]
    # One seed per model, from its name alone, so that batch 1 and batch 8 have the same weights
    # and a model's export depends neither on which others were asked for nor on the list.
    torch.manual_seed(zlib.crc32(name.encode()))
    model = make().eval()
    randomize_batchnorm(model)
    x = torch.randn(input_shape(name, batch))
    stem = os.path.join(out, f"{name}_b{batch}")
    with torch.no_grad():
        y = model(x)
        frozen = torch.jit.freeze(torch.jit.trace(model, x))
        # The frozen module must compute what the eager one does, or its timings mean nothing.
        err = (frozen(x) - y).abs().max().item()
        if err > 1e-4 * y.abs().max().item():
            sys.exit(f"export_zoo.py: {name} batch {batch}: frozen TorchScript differs by {err}")
    torch.jit.save(frozen, stem + ".pt")
    torch.onnx.export(model, x, stem + ".onnx", input_names=["x"], output_names=["y"], opset_version=OPSET)
    np.save(stem + "_x.npy", x.numpy())
    np.save(stem + "_y.npy", y.numpy())
    print(f"exported {stem}.onnx  x {list(x.shape)}  y {list(y.shape)}")


class Add(nn.Module):
    def forward(self, x):
        return x + x


def export_add(out):
    x = torch.zeros(1, 16)
    torch.onnx.export(Add(), x, os.path.join(out, "add.onnx"), input_names=["x"], output_names=["y"],
                      opset_version=OPSET)
    np.save(os.path.join(out, "add_x.npy"), x.numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="build/bench-models/zoo")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"export_zoo.py: unknown model {', '.join(unknown)} (known: {', '.join(MODELS)})")
    os.makedirs(args.out, exist_ok=True)
    warnings.filterwarnings("ignore")  # the exporter's tracer warnings, one per shape read
    torch.set_num_threads(1)
    for name in names:
        for batch in BATCHES:
            export(name, batch, args.out)
    export_add(args.out)


if __name__ == "__main__":
    main()
