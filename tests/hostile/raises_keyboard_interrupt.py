"""Hostile: raises KeyboardInterrupt inside the training loop, before the flagged line."""
import torch

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    if step == 0:
        raise KeyboardInterrupt
    loss.backward()  # expect: GL003
    opt.step()
