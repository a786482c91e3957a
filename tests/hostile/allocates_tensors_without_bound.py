"""Hostile: allocates torch tensors until something stops it."""
import torch

hoard = []
for _ in range(10_000):
    hoard.append(torch.ones(64 * 2**20 // 4))

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
