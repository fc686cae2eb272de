"""The benchmark workload: a single-GPU training script as a user writes it.

An MLP on synthetic data, a DataLoader, Adam. Nothing here knows about the
benchmark: ``bench/`` migrates this file with the current codemod at run time and
times both versions from outside (an optimizer step hook, see ``_timed.py``).
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, features, hidden, layers, classes):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.Linear(features if i == 0 else hidden, hidden) for i in range(layers)
        )
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.head(x)


def synthetic(samples, features, classes, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=g)
    y = torch.randint(0, classes, (samples,), generator=g)
    return TensorDataset(x, y)


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--features", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main():
    args = parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    dataset = synthetic(
        args.batch_size * args.steps_per_epoch, args.features, args.classes, 1
    )
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = MLP(args.features, args.hidden, args.layers, args.classes).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch} mean loss {total / len(loader):.6f}")


if __name__ == "__main__":
    main()
