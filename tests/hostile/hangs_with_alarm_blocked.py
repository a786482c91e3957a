"""Hostile: blocks SIGALRM and spins inside a generator expression.

Nothing in the instrumented copy can interrupt it; only the hard wall-clock
kill of the process group ends it.
"""
import itertools
import signal

import torch

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
signal.signal(signal.SIGINT, signal.SIG_IGN)
sum(1 for _ in itertools.count())

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
