"""Hostile: allocates memory until something stops it."""
import torch

hoard = []
while True:
    hoard.append(bytearray(64 * 2**20))

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
