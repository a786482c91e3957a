"""The same file gives the same findings, word for word, in every process.

Python seeds string hashing per process, so anything that iterates a set of
strings can order work differently from run to run. The analysis must not let
that order reach its output: a message naming one backward in one run and
another in the next breaks caches, diffs and CI annotations.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# Transformer-XL's training loop (kimiyoung/transformer-xl, train.py): memories
# carried across batches in two branches of one flag, each backwarding in two
# branches of another. Which backward the GL002 message names used to depend on
# the order the fixpoint visited the flags' partitions.
CARRIED_MEMORIES = textwrap.dedent(
    """
    import torch


    def train(args, para_model, optimizer, train_iter):
        if args.batch_chunk > 1:
            mems = [tuple() for _ in range(args.batch_chunk)]
        else:
            mems = tuple()
        train_loss = 0
        for batch, (data, target) in enumerate(train_iter):
            para_model.zero_grad()
            if args.batch_chunk > 1:
                data_chunks = torch.chunk(data, args.batch_chunk, 1)
                for i in range(args.batch_chunk):
                    ret = para_model(data_chunks[i], target, *mems[i])
                    loss, mems[i] = ret[0], ret[1:]
                    loss = loss.float().mean() / args.batch_chunk
                    if args.fp16:
                        optimizer.backward(loss)
                    else:
                        loss.backward()
                    train_loss += loss.float().item()
            else:
                ret = para_model(data, target, *mems)
                loss, mems = ret[0], ret[1:]
                loss = loss.float().mean()
                if args.fp16:
                    optimizer.backward(loss)
                else:
                    loss.backward()
                train_loss += loss.float().item()
            optimizer.step()
    """
)


def _check(path, seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    command = [sys.executable, "-m", "graphlint", "check", "--no-cache", "--jobs", "1"]
    command += ["--output-format", "json", str(path)]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False).stdout


def test_findings_do_not_depend_on_the_hash_seed(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(CARRIED_MEMORIES)
    outputs = {_check(path, seed) for seed in ("1", "2", "3", "4", "5", "6")}
    assert len(outputs) == 1, outputs
    assert '"GL002"' in outputs.pop()


# poutyne's `fit` (accumulation helper plus a flush step after the loop): several paths
# violate at one backward, and the one the message names must not follow the order
# the order analysis found them in.
ACCUMULATION_WITH_FLUSH = textwrap.dedent(
    """
    class Model:
        def fit(self, train_loader, epochs, batches_per_step):
            for epoch in range(epochs):
                did_backprop = False
                for number, (x, y) in enumerate(train_loader, 1):
                    loss, did_backprop = self._fit_batch(x, y, batches_per_step, number)
                if not did_backprop:
                    self.optimizer.step()

        def _fit_batch(self, x, y, batches_per_step, number):
            if (number - 1) % batches_per_step == 0:
                self.optimizer.zero_grad()
            loss_tensor = self.loss_function(self.network(x), y)
            loss_tensor.backward()
            if number % batches_per_step == 0:
                self.optimizer.step()
            return float(loss_tensor.detach()), number % batches_per_step == 0
    """
)


def test_the_violation_a_gl003_message_names_does_not_follow_discovery_order():
    import dataclasses

    from graphlint.model.from_ast import parse_module

    from graphlint.model import build_model
    from graphlint.rules import RULES_BY_CODE

    model = build_model(parse_module(ACCUMULATION_WITH_FLUSH), ACCUMULATION_WITH_FLUSH)
    (found,) = [v for v in model.order_violations if v.kind == "b"]
    # The same backward reached by a second path: one step, in more than one iteration.
    other = dataclasses.replace(found, first_step=None)
    messages = set()
    for order in ([found, other], [other, found]):
        model.order_violations = order
        (diagnostic,) = RULES_BY_CODE["GL003"].check(model)
        messages.add(diagnostic.message)
    assert len(messages) == 1, messages
    assert "and again by the step" in messages.pop()
