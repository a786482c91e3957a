"""Hostile: waits for the user to type something."""
import sys

import torch

everything = sys.stdin.read()
answer = input("continue? ")

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
