"""The BatchNorm benchmark workload: a CNN with a BatchNorm layer after every
convolution, as a single-GPU script is written (``bench/sync_batchnorm.py``
migrates it at run time and times it with and without synchronised BatchNorm).
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class BatchNormCNN(nn.Module):
    def __init__(self, width, blocks, classes):
        super().__init__()
        layers = []
        channels = 3
        for _ in range(blocks):
            layers += [
                nn.Conv2d(channels, width, 3, padding=1, bias=False),
                nn.BatchNorm2d(width),
                nn.ReLU(),
            ]
            channels = width
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.features(x)
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    samples = args.batch_size * args.steps_per_epoch
    g = torch.Generator().manual_seed(1)
    images = torch.randn(samples, 3, args.size, args.size, generator=g)
    labels = torch.randint(0, 10, (samples,), generator=g)
    loader = DataLoader(
        TensorDataset(images, labels), batch_size=args.batch_size, shuffle=True
    )
    model = BatchNormCNN(args.width, args.blocks, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    for epoch in range(args.epochs):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} last loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
