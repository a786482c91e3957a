"""Hostile: writes to stdout and stderr without end."""
import itertools
import sys

import torch

chunk = "graphlint " * 400
any(print(chunk) or sys.stderr.write(chunk) and False for _ in itertools.count())

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
