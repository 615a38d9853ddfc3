#!/usr/bin/env python3
"""Exports the PyTorch models that tests/onnx_torch_test.cpp imports: real-world ONNX files as
torch.onnx.export writes them (shape subgraphs, initializer names like 'fc1.weight' and
'onnx::Gemm_12', opset-specific node forms), each with an input and PyTorch's output for it.

    /usr/bin/python3 tests/onnx/export_models.py OUTDIR      (make onnx-models)

For each model NAME and opset: OUTDIR/NAME_opsetK.onnx, OUTDIR/NAME.input.npy and
OUTDIR/NAME.output.npy (float32; the output of the model in eval mode). Models:
  mlp       Linear 64-32-16-10 with ReLU and a softmax on top, batch 3
  lenet5    samples/fashion_cnn.cpp's LeNet-5 (conv 5x5 6 pad 2, ReLU, max-pool 2, conv 5x5 16,
            ReLU, max-pool 2, x.view(x.size(0), -1), 120, 84, 10), batch 2, 1x28x28
  lenet5_dynamic  the same with a symbolic batch dimension ('batch'): import with --shape
            input=2,1,28,28; the reshape's target comes from a Shape/Gather/Unsqueeze/Concat subgraph
  resblock  conv 3x3 - batch norm - ReLU - conv 3x3 - batch norm + the input, ReLU (16 channels,
            12x12), batch 2, the batch norms' running statistics made non-trivial first; the
            exporter folds the batch norms into the convolutions
  resblock_bn  the same block exported with TrainingMode.PRESERVE: BatchNormalization nodes kept
Exits 0 with a message where PyTorch is not installed (make onnx-models installs python3-torch).
"""
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError:
    print("export_models.py: PyTorch is not installed (make onnx-models installs python3-torch)")
    sys.exit(0)

OPSETS = (11, 13, 17)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 32), nn.Linear(32, 16), nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return torch.softmax(self.fc3(x), dim=1)


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)  # the common idiom: exported as a Shape/Gather/Concat/Reshape subgraph
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class ResBlock(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


def export(model, name, x, outdir, **options):
    model.eval()
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(outdir, name + ".input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(outdir, name + ".output.npy"), y.numpy().astype(np.float32))
    for opset in OPSETS:
        path = os.path.join(outdir, "%s_opset%d.onnx" % (name, opset))
        torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"], opset_version=opset,
                          **options)
    print("%s: %s -> %s, opsets %s" % (name, tuple(x.shape), tuple(y.shape), OPSETS))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    export(Mlp(), "mlp", torch.randn(3, 64), outdir)
    lenet = LeNet5()
    x = torch.randn(2, 1, 28, 28)
    export(lenet, "lenet5", x, outdir)
    export(lenet, "lenet5_dynamic", x, outdir, dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    block = ResBlock()
    block.train()
    with torch.no_grad():  # running statistics other than 0 and 1
        for _ in range(5):
            block(torch.randn(4, 16, 12, 12) * 2 + 0.5)
    x = torch.randn(2, 16, 12, 12)
    export(block, "resblock", x, outdir)
    export(block, "resblock_bn", x, outdir, training=torch.onnx.TrainingMode.PRESERVE)


if __name__ == "__main__":
    main()
