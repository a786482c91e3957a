"""Hostile: forks a child that escapes into its own session and spins, then waits for it.

The child's pid is written to $GRAPHLINT_HOSTILE_DIR so the test can check
that --confirm left no process behind.
"""
import os

import torch

pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:  # a grandchild, orphaned at once
        folder = os.environ.get("GRAPHLINT_HOSTILE_DIR")
        if folder:
            with open(os.path.join(folder, f"fork-{os.getpid()}.pid"), "w") as handle:
                handle.write(str(os.getpid()))
        while True:
            pass
    while True:
        pass
folder = os.environ.get("GRAPHLINT_HOSTILE_DIR")
if folder:
    with open(os.path.join(folder, f"fork-{pid}.pid"), "w") as handle:
        handle.write(str(pid))
os.waitpid(pid, 0)

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
