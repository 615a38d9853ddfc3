"""Writes the PyTorch exports of tests/golden/onnx/ that tests/onnx_torch_test.cpp imports: for each
model, NAME.onnx (torch.onnx.export, eval mode), NAME_x.npy (an input) and NAME_y.npy (PyTorch's
output for it). Needs Debian's python3-torch; `make onnx-models` installs it and runs this from
the repository root:

    /usr/bin/python3 tests/onnx/torch_exports.py

The models: the issue's three — an MLP (opset 11, the old Softmax), LeNet-5 as
samples/fashion_cnn.cpp builds it (a symbolic batch, the x.view(x.size(0), -1) subgraph, opset
17) and a ResNet basic block exported with TrainingMode.PRESERVE so that its BatchNormalization
nodes stay — and three that bring more of what exporters write: a small CNN, a transformer
encoder layer and a residual block with a transposed convolution. Then ceil_pool: pooling with
ceil_mode=True on odd sizes and a fresh batch norm whose equal initializers the exporter merges.
Last, recurrent: an LSTM, a GRU and a bidirectional RNN as PyTorch exports them.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = "tests/golden/onnx/"


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(64, 32), nn.Linear(32, 16), nn.Linear(16, 10)

    def forward(self, x):
        return torch.softmax(self.fc3(F.relu(self.fc2(F.relu(self.fc1(x))))), dim=1)


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class ResBlock(nn.Module):
    """A ResNet basic block: conv 3x3, batch norm, ReLU, conv 3x3, batch norm, + x, ReLU."""

    def __init__(self, c=8):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + x)


class SmallCnn(nn.Module):
    """Conv + BN + ReLU, max pool, strided conv, ReLU6, nearest upsampling, average pool, the
    x.view(x.size(0), -1) shape subgraph, dropout, linear, log-softmax."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.c2, self.b2 = nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8)
        self.fc, self.drop = nn.Linear(8 * 4 * 4, 5), nn.Dropout(0.3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.relu6(self.b2(self.c2(x)))
        x = F.avg_pool2d(F.interpolate(x, scale_factor=2, mode="nearest"), 2)
        return F.log_softmax(self.fc(self.drop(x.view(x.size(0), -1))), dim=1)


class Encoder(nn.Module):
    """A transformer encoder layer: attention (MatMul, Softmax, the head reshapes), LayerNorm."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                                activation="relu", batch_first=True)

    def forward(self, x):
        return self.layer(x)


class ResUp(nn.Module):
    """A residual block, squeeze-and-excitation-like global pooling, a transposed convolution."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.c2, self.b2 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.up = nn.ConvTranspose2d(4, 2, 2, stride=2)

    def forward(self, x):
        y = F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + x)
        y = F.adaptive_avg_pool2d(y, 1) * y
        return torch.sigmoid(self.up(y)).mean(dim=(2, 3))


class CeilPool(nn.Module):
    """Max and average pooling with ceil_mode=True on a 10x13 image: partial last windows, one
    past the right padding (whose average divides by the part inside the padded input), one
    PyTorch drops because it would start in the right padding; count_include_pad both ways. In
    front, a fresh BatchNorm2d (kept as is: see export): its zero running mean and zero bias are
    one initializer in the export, its unit weight and unit running variance another."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)
        self.pools = nn.ModuleList([nn.MaxPool2d(3, stride=2, ceil_mode=True),
                                    nn.MaxPool2d(2, stride=2, padding=1, ceil_mode=True),
                                    nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
                                    nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False),
                                    nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)])

    def forward(self, x):
        x = self.bn(x)
        return torch.cat([pool(x).flatten(1) for pool in self.pools], 1)


class Recurrent(nn.Module):
    """Issue 28's two benchmark classifiers at small sizes side by side — a two-layer batch-first
    LSTM and a sequence-first GRU (linear_before_reset, as PyTorch's is) — and a bidirectional
    ReLU RNN, each one's last step into one linear layer: the exporter's Transpose, Squeeze,
    Expand of zero states and Gather of the last step around the recurrent nodes."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)
        self.gru = nn.GRU(6, 5)
        self.rnn = nn.RNN(6, 4, nonlinearity="relu", bidirectional=True, batch_first=True)
        self.fc = nn.Linear(8 + 5 + 2 * 4, 3)

    def forward(self, x):
        a, _ = self.lstm(x)
        b, _ = self.gru(x.transpose(0, 1))
        c, _ = self.rnn(x)
        return self.fc(torch.cat([a[:, -1], b[-1], c[:, -1]], 1))


def export(name, model, shape, dynamic_batch, opset, options, fresh_batch_norm=False):
    model.eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d) and not fresh_batch_norm:  # statistics other than the identity
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5)
    x = torch.randn(*shape)
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, x, OUT + name + ".onnx", input_names=["input.1"], output_names=["output"],
                      opset_version=opset, dynamic_axes={"input.1": {0: "batch"}} if dynamic_batch else None,
                      **options)
    np.save(OUT + name + "_x.npy", x.numpy())
    np.save(OUT + name + "_y.npy", y.numpy())


def main():
    torch.manual_seed(0)
    # name, model, input shape, symbolic batch, opset, export options. The first three were
    # written first; the issue's three follow, so that adding them left the others' bytes alone.
    for args in [("small_cnn", SmallCnn(), (2, 3, 16, 16), True, 13, {}), ("encoder", Encoder(), (2, 5, 8), False, 13, {}),
                 ("res_up", ResUp(), (1, 4, 6, 6), True, 13, {})]:
        export(*args)
    for args in [("mlp", Mlp(), (3, 64), False, 11, {}), ("lenet5", LeNet5(), (2, 1, 28, 28), True, 17, {}),
                 ("resblock", ResBlock(), (2, 8, 10, 10), False, 13, {"training": torch.onnx.TrainingMode.PRESERVE})]:
        export(*args)
    export("ceil_pool", CeilPool(), (2, 3, 10, 13), False, 17, {}, fresh_batch_norm=True)
    export("recurrent", Recurrent(), (3, 7, 6), True, 17, {})


if __name__ == "__main__":
    main()
