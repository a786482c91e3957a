"""Hostile: a `while True` loop that never ends before the training loop.

--confirm must stop it (iteration budget or time limit) and report inconclusive.
"""
import torch

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
spins = 0
while True:
    spins += 1

for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
