"""--confirm on small cases of our own: each probe, each way a run can fail, each verdict.

All cases run in one confirm() call (one child per worker imports torch once).
Each case is a short script; its ``# expect:`` markers become the findings
and ``EXPECTED`` says the verdict and a regex its evidence must match.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from graphlint.dynamic import ConfirmOptions, confirm, counts_toward_exit
from graphlint.dynamic.verdict import Confirmation
from graphlint.finding import Finding
from test_dynamic_markers import expected_findings

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="--confirm needs torch")

CASES = {
    # GL002 through add-only ops: torch raises nothing, the probe still sees it.
    "add_only_state.py": ('''
import torch
w = torch.randn(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
h = torch.zeros(3)
for i in range(5):
    opt.zero_grad()
    h = h + w  # expect: GL002
    h.sum().backward()
    opt.step()
''', "confirmed", r"line 7 in iteration 2 produced a graph reaching .* already backwarded at line 8, iteration 1"),
    # retain_graph=True hides the carried state from torch; not from the probe.
    "retain_graph_cover_up.py": ('''
import torch
rnn = torch.nn.RNNCell(3, 4)
opt = torch.optim.SGD(rnn.parameters(), lr=0.0)
h = torch.zeros(2, 4)
for i in range(4):
    opt.zero_grad()
    h = rnn(torch.randn(2, 3), h)  # expect: GL002
    h.pow(2).sum().backward(retain_graph=True)
    opt.step()
''', "confirmed", r"state carried from an earlier iteration was not detached"),
    # BPTT: the summed loss is the objective, backwarded once per window.
    "bptt_objective.py": ('''
import torch
rnn = torch.nn.RNNCell(3, 4)
opt = torch.optim.SGD(rnn.parameters(), lr=0.01)
for batch in range(4):
    h = torch.zeros(2, 4)
    loss = 0
    for t in range(5):
        h = rnn(torch.randn(2, 3), h)
        loss += h.pow(2).mean()  # expect: GL005
    opt.zero_grad()
    loss.backward()
    opt.step()
''', "not reproduced", r"ran \d+ iterations through line 9; loss grew within an iteration and was then backwarded"),
    # An evaluation loop with no backward at all keeps every batch's graph.
    "eval_leak.py": ('''
import torch
model = torch.nn.Linear(4, 2)
total = 0
for i in range(5):
    total += model(torch.randn(3, 4)).pow(2).mean()  # expect: GL005
print(float(total))
''', "confirmed", r"kept the graph of every iteration .* no backward ever used it"),
    # Two task losses with retain_graph=True on the first: legal.
    "multitask_retain.py": ('''
import torch
enc, a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
params = list(enc.parameters()) + list(a.parameters()) + list(b.parameters())
opt = torch.optim.SGD(params, lr=0.01)
for i in range(4):
    opt.zero_grad()
    feat = enc(torch.randn(3, 4))
    a(feat).mean().backward(retain_graph=True)
    b(feat).mean().backward()  # expect: GL001
    opt.step()
''', "not reproduced", r"no backward there reached a graph"),
    # retain_graph, a step, then a second backward of the same forward.
    "inplace_after_step.py": ('''
import torch
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    opt.zero_grad()
    out = model(torch.randn(3, 4))
    out.mean().backward(retain_graph=True)
    opt.step()
    out.pow(2).mean().backward()  # expect: GL001
''', "confirmed", r'RuntimeError "one of the variables needed for gradient computation has been modified'),
    # The discriminator's zero_grad drops what the generator's backward wrote into D: correct.
    "gan_discriminator_zero_grad.py": ('''
import torch
G, D = torch.nn.Linear(2, 3), torch.nn.Linear(3, 1)
opt_g = torch.optim.SGD(G.parameters(), lr=0.01)
opt_d = torch.optim.SGD(D.parameters(), lr=0.01)
for i in range(4):
    fake = G(torch.randn(4, 2))
    opt_d.zero_grad()
    (D(torch.randn(4, 3)).mean() - D(fake.detach()).mean()).backward()
    opt_d.step()
    opt_g.zero_grad()
    D(fake).mean().backward()
    D.zero_grad()  # expect: GL003
    opt_g.step()
''', "not reproduced", r"no zero_grad cleared gradients"),
    # A sum of micro-batch losses reset at every step (window of 3): bounded, not a leak.
    "window_sum_reset.py": ('''
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
window = 0
for i in range(9):
    loss = model(torch.randn(3, 4)).pow(2).mean()
    window += loss  # expect: GL005
    loss.backward()
    if (i + 1) % 3 == 0:
        opt.step()
        opt.zero_grad()
        print(window.item())
        window = 0
''', "inconclusive", r"grew and was reset only once"),
    # Gradient surgery (PCGrad): grads saved, cleared, combined and assigned by hand.
    "gradient_surgery.py": ('''
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(4):
    out = model(torch.randn(3, 4))
    out[:, 0].mean().backward(retain_graph=True)
    first = [p.grad.clone() for p in model.parameters()]
    opt.zero_grad()  # expect: GL003
    out[:, 1].mean().backward()
    for p, g in zip(model.parameters(), first):
        p.grad = (p.grad + g) / 2
    opt.step()
    opt.zero_grad()
''', "inconclusive", r"gradients assigned by hand"),
    # Hard-coded CUDA runs on the CPU.
    "hard_coded_cuda.py": ('''
import torch
device = torch.device("cuda")
model = torch.nn.Linear(4, 2).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt.zero_grad()
for i in range(4):
    x = torch.randn(3, 4, device="cuda")
    loss = model(x.to("cuda")).pow(2).mean().to(device)
    loss.backward()  # expect: GL003
    opt.step()
    torch.cuda.synchronize()
''', "confirmed", r"were still there, with no zero_grad between"),
    # A download cannot happen: the network is off.
    "download.py": ('''
import urllib.request
import torch
urllib.request.urlopen("http://example.com/data.pt", timeout=5)
model = torch.nn.Linear(4, 2)
for i in range(3):
    model(torch.randn(2, 4)).sum().backward()  # expect: GL001
''', "inconclusive", r"network access is disabled"),
    # A script that needs command-line arguments.
    "needs_arguments.py": ('''
import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
args = parser.parse_args()
model = torch.nn.Linear(4, 2)
for i in range(3):
    model(torch.randn(2, 4)).sum().backward()  # expect: GL001
''', "inconclusive", r"line 8 never ran \(the code called sys\.exit\(2\)\)"),
    # A flagged line behind a condition that never holds.
    "never_reached.py": ('''
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    loss = model(torch.randn(2, 4)).sum()
    if i > 10:
        loss.backward()  # expect: GL003
    opt.step()
''', "inconclusive", r"line 7 never ran"),
    # A trainer class nobody instantiates, driven with stand-ins.
    "trainer_class.py": ('''
import torch


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
                loss.backward()  # expect: GL003
                self.optimizer.step()
''', "confirmed", r"driven with stand-ins: Trainer\(model=model stand-in, optimizer=SGD\)\.fit\("),
    # A module forward keeping each layer's output (kornia's ViT TransformerEncoder): the
    # list grows with no backward, but each output builds on the last, so the list keeps
    # alive nothing the newest output does not. Not an evaluation leak.
    "layer_outputs_kept.py": ('''
from torch import nn


class Encoder(nn.Module):
    def __init__(self, dim=3, depth=4):
        super().__init__()
        self.blocks = nn.Sequential(*(nn.Linear(dim, dim) for _ in range(depth)))
        self.results = []

    def forward(self, x):
        self.results = []
        out = x.reshape(-1, x.shape[-1])
        for block in self.blocks.children():
            out = block(out)
            self.results.append(out)  # expect: GL005
        return out
''', "inconclusive", r"self\.results grew \(2 -> 4 -> 6 -> 8 nodes\) with no backward, but each graph it holds is "
       r"part of the graph of the newest one"),
    # ... while an evaluation loop's outputs are separate graphs: still a leak.
    "eval_leak_list.py": ('''
import torch
model = torch.nn.Linear(4, 2)
outputs = []
for i in range(5):
    outputs.append(model(torch.randn(3, 4)).pow(2).mean())  # expect: GL005
print(len(outputs))
''', "confirmed", r"outputs kept the graph of every iteration .* no backward ever used it"),
    # A parameter annotated torch.Tensor gets a batch, not torch.Tensor() (an empty
    # tensor no layer accepts), also when its use alone says nothing.
    "tensor_annotated.py": ('''
import torch


def evaluate(model, x: torch.Tensor, steps):
    total = 0
    for _ in range(steps):
        inputs = x
        total += model(inputs).pow(2).mean()  # expect: GL005
    return float(total)
''', "confirmed", r"kept the graph of every iteration .*evaluate\(model=model stand-in, x=float\[4, 3\], steps=3\)"),
    # A parameter whose use says nothing: no guessing.
    "unknowable_parameter.py": ('''
import torch


def train(model, loader, optimizer, mystery):
    for batch in loader:
        optimizer.zero_grad()
        loss = mystery.frobnicate(model(batch))
        loss.backward()  # expect: GL001
        optimizer.step()
''', "inconclusive", r"cannot tell what parameter 'mystery' should be"),
    # The user's own output is captured (see test_output_is_captured).
    "prints.py": ('''
import torch
print("hello from the user's code")
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(3):
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()  # expect: GL003
    opt.step()
''', "not reproduced", r"no zero_grad cleared gradients"),
    # A finding on a blank line cannot be located.
    "blank_line.py": ('''
import torch

x = 1  # the finding below points at line 3, which is blank
''', None, None),
}


NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# a notebook"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["import torch\n", "%matplotlib inline\n", "model = torch.nn.Linear(4, 2)\n",
                    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["for step in range(4):\n", "    loss = model(torch.randn(3, 4)).pow(2).mean()\n",
                    "    loss.backward()\n", "    opt.step()\n"]},
    ],
    "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cases")
    findings = []
    for name, (source, _, _) in CASES.items():
        path = folder / name
        path.write_text(source.lstrip("\n"))
        findings += expected_findings(path)
    blank = folder / "blank_line.py"
    findings.append(Finding("GL001", "on a blank line", str(blank), 2, 1, 2, 1))
    notebook = folder / "train.ipynb"
    notebook.write_text(json.dumps(NOTEBOOK))
    findings.append(Finding("GL003", "zero_grad missing", str(notebook), 3, 5, 3, 20, extra={"cell": 3}))
    findings.append(Finding("GL000", "syntax error", str(folder / "prints.py"), 1, 1, 1, 1))
    # Sources given in memory are what runs, not the file on disk.
    in_memory = folder / "in_memory.py"
    in_memory.write_text("raise SystemExit('the file on disk must not run')\n")
    findings.append(Finding("GL002", "m", str(in_memory), 7, 1, 7, 1))
    sources = {str(in_memory): CASES["add_only_state.py"][0].lstrip("\n").encode()}
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    runs = {}
    confirmed = confirm(findings, sources, ConfirmOptions(
        timeout=30, cwd=str(folder), on_file_done=lambda r: runs.__setitem__(Path(r.path).name, r),
    ))
    return findings, confirmed, runs, folder, digest


@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[1]])
def test_case_verdict(name, run):
    _, confirmed, _, _, _ = run
    verdicts = [f.confirmation for f in confirmed if Path(f.path).name == name and f.code != "GL000"]
    assert verdicts, name
    _, status, pattern = CASES[name]
    for verdict in verdicts:
        assert verdict.status == status, verdict
        assert re.search(pattern, verdict.evidence), verdict.evidence


def test_notebooks_run_their_code_cells_and_speak_in_cells(run):
    [verdict] = [f.confirmation for f in run[1] if f.path.endswith(".ipynb")]
    assert verdict.status == "confirmed", verdict
    # lines of the finding's own cell stay plain; the program's line 5 would be line 1 of cell 3
    assert "the step at line 4, iteration 1" in verdict.evidence and "backward at line 3" in verdict.evidence


def test_findings_come_back_in_order_with_their_verdicts(run):
    findings, confirmed, _, _, _ = run
    assert [(f.path, f.line, f.code) for f in findings] == [(f.path, f.line, f.code) for f in confirmed]
    assert all(f.confirmation is not None for f in confirmed if f.code != "GL000")


def test_gl000_has_nothing_to_confirm(run):
    gl000 = [f for f in run[1] if f.code == "GL000"]
    assert gl000 and gl000[0].confirmation is None


def test_finding_on_a_blank_line_is_inconclusive(run):
    blank = [f for f in run[1] if Path(f.path).name == "blank_line.py"]
    assert blank[0].confirmation.status == "inconclusive"
    assert "holds no statement" in blank[0].confirmation.evidence


def test_output_is_captured(run):
    assert "hello from the user's code" in run[2]["prints.py"].stdout


def test_the_users_files_are_untouched_and_no_bytecode_is_written(run):
    folder, digest = run[3], run[4]
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()} == digest
    assert not (folder / "__pycache__").exists()


def test_confirmation_carries_seconds_and_iterations(run):
    verdict = next(f.confirmation for f in run[1] if Path(f.path).name == "add_only_state.py")
    assert verdict.iterations == 2 and 0 < verdict.seconds < 30
    assert verdict.to_json() == {"status": "confirmed", "evidence": verdict.evidence, "iterations": 2,
                                 "seconds": round(verdict.seconds, 3)}


def test_a_missing_interpreter_is_inconclusive_with_the_reason(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("x = 1\n")
    finding = Finding("GL001", "m", str(path), 1, 1, 1, 1)
    [result] = confirm([finding], {}, ConfirmOptions(python=str(tmp_path / "no-python")))
    assert result.confirmation.status == "inconclusive"
    assert "cannot start" in result.confirmation.evidence


def test_an_interpreter_without_torch_is_inconclusive_with_the_reason(tmp_path):
    python = "/usr/bin/python3"
    if not Path(python).exists() or Path(python).resolve() == Path(sys.executable).resolve():
        pytest.skip("no second interpreter")
    import subprocess

    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the second interpreter has torch")
    path = tmp_path / "f.py"
    path.write_text("x = 1\n")
    [result] = confirm([Finding("GL001", "m", str(path), 1, 1, 1, 1)], {}, ConfirmOptions(python=python))
    assert result.confirmation.status == "inconclusive"
    assert "torch cannot be imported" in result.confirmation.evidence


def test_sources_given_in_memory_are_used_instead_of_the_disk(run):
    [verdict] = [f.confirmation for f in run[1] if f.path.endswith("in_memory.py")]
    assert verdict.status == "confirmed", verdict


def test_not_reproduced_findings_do_not_count_toward_the_exit_code():
    finding = Finding("GL001", "m", "f.py", 1, 1, 1, 1)
    assert counts_toward_exit(finding)
    for status, counts in (("confirmed", True), ("inconclusive", True), ("not reproduced", False)):
        assert counts_toward_exit(finding.with_(confirmation=Confirmation(status, "why"))) is counts
