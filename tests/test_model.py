"""Unit tests of the training-loop model: CFG, kinds, provenance and helper summaries."""

from __future__ import annotations

import textwrap
import time

from graphlint.model import syntax as libcst
from graphlint.model.from_ast import parse_module
import pytest

from graphlint.model import build_model
from graphlint.model.cfg import BACK, FOR, IF, WHILE, build_cfg
from graphlint.model.program import MODULE, OPTIMIZER, SCHEDULER, Program
from graphlint.model.provenance import Interpreter


def model_of(source: str, watch: int | None = None):
    source = textwrap.dedent(source)
    lines = frozenset({watch}) if watch else frozenset()
    return build_model(parse_module(source), source, watch_lines=lines)


# ----- control flow -----
def cfg_of(source: str):
    return build_cfg(parse_module(textwrap.dedent(source)).body)


def test_loop_has_a_back_edge_and_an_exit():
    cfg = cfg_of(
        """
        for x in data:
            y = f(x)
        z = 1
        """
    )
    header = next(n for n in cfg.nodes if n.kind == FOR)
    body = [n for n in cfg.nodes if n.loop == header.id]
    assert len(body) == 1
    assert (header.id, BACK) in body[0].succ
    assert any(label is False for _, label in header.succ)


def test_break_leaves_the_loop_and_continue_goes_back():
    cfg = cfg_of(
        """
        while cond:
            if a:
                break
            if b:
                continue
            work()
        done()
        """
    )
    header = next(n for n in cfg.nodes if n.kind == WHILE)
    brk = next(n for n in cfg.nodes if isinstance(n.stmt, libcst.Break))
    cont = next(n for n in cfg.nodes if isinstance(n.stmt, libcst.Continue))
    assert (header.id, BACK) in cont.succ
    after = [dst for dst, _ in brk.succ]
    assert after and all(cfg.nodes[dst].loop is None for dst in after)


def test_while_true_exits_only_through_break():
    cfg = cfg_of(
        """
        while True:
            step()
        """
    )
    header = next(n for n in cfg.nodes if n.kind == WHILE)
    assert all(label is not False for _, label in header.succ)


def test_no_grad_body_is_marked():
    cfg = cfg_of(
        """
        with torch.no_grad():
            y = model(x)
        z = model(x)
        """
    )
    marks = {type(n.stmt).__name__ + str(n.no_grad) for n in cfg.nodes if n.stmt is not None and not isinstance(n.stmt, libcst.With)}
    assert marks == {"AssignTrue", "AssignFalse"}


def test_try_body_statements_may_reach_the_handler():
    cfg = cfg_of(
        """
        try:
            a = 1
            b = 2
        except ValueError:
            c = 3
        """
    )
    handler = next(n for n in cfg.nodes if isinstance(n.stmt, libcst.ExceptHandler))
    preds = {type(cfg.nodes[src].stmt).__name__ for src, _ in handler.pred}
    assert "Assign" in preds


def test_if_without_else_has_a_false_edge_past_the_body():
    cfg = cfg_of(
        """
        if cond:
            a = 1
        b = 2
        """
    )
    test = next(n for n in cfg.nodes if n.kind == IF)
    assert {label for _, label in test.succ} == {True, False}


# ----- object kinds -----
def kinds_of(source: str, name: str) -> set[str]:
    program = Program(parse_module(textwrap.dedent(source)))
    scope = next(iter(program.scopes.values()))
    return program.kinds(scope, name)


def test_kinds_from_constructors():
    source = """
        import torch
        from torch import nn
        model = nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, 1)
        """
    assert MODULE in kinds_of(source, "model")
    assert OPTIMIZER in kinds_of(source, "opt")
    assert SCHEDULER in kinds_of(source, "sched")
    assert OPTIMIZER not in kinds_of(source, "sched")


def test_a_subclass_method_knows_what_its_base_class_put_on_self():
    source = """
        import torch

        class AgentBase:
            def init(self, actor_class):
                self.act = actor_class().to("cpu")
                self.act_optim = torch.optim.Adam(self.act.parameters())

        class AgentSAC(AgentBase):
            def update(self, state):
                return self.act.get_action(state)
        """
    program = Program(parse_module(textwrap.dedent(source)))
    scope = next(s for s in program.scopes.values() if s.key == "AgentSAC.update")
    assert MODULE in program.kinds(scope, "self.act")


def test_optimizer_known_from_use_not_name():
    source = """
        def train(net, thing, loader):
            for x in loader:
                loss = net(x).sum()
                loss.backward()
                thing.step()
        """
    program = Program(parse_module(textwrap.dedent(source)))
    scope = next(s for s in program.scopes.values() if s.key == "train")
    assert OPTIMIZER in program.kinds(scope, "thing")


def test_optimizer_models_follow_a_params_list():
    source = """
        import torch
        params = list(encoder.parameters()) + list(decoder.parameters())
        opt = torch.optim.Adam(params)
        """
    program = Program(parse_module(textwrap.dedent(source)))
    scope = next(iter(program.scopes.values()))
    assert program.optimizer_models(scope, "opt") == {"encoder", "decoder"}


# ----- provenance -----
RNN = """
import torch
from torch import nn
rnn = nn.LSTM(3, 4)
head = nn.Linear(4, 1)
hidden = None
for x in batches:
    out, hidden = rnn(x, hidden)
    loss = head(out).sum()
    loss.backward()
"""


def test_hidden_carries_the_graph_of_the_forward_around_the_back_edge():
    model = model_of(RNN, watch=8)
    assert model.graphs_at(8, "hidden") == {8}


def test_detach_cuts_the_carried_graph():
    source = RNN.replace("    out, hidden = rnn(x, hidden)", "    hidden = hidden.detach() if hidden is not None else None\n    out, hidden = rnn(x, hidden)")
    model = model_of(source, watch=9)
    assert model.graphs_at(9, "hidden") == set()


def test_an_import_read_before_its_name_is_rebound_is_the_import():
    # `import model` then `model = model.RNNModel(...)`: the right-hand side calls the
    # imported module's class, not a method of the model instance bound afterwards.
    # (`model.train()` makes `model` a module for the whole file.)
    source = """
        import model
        model = model.RNNModel(10, 20)
        model.train()
        y = model
        """
    assert model_of(source, watch=5).graphs_at(5, "model") == set()
    bound = """
        from torch import nn
        model = nn.LSTM(1, 2)
        model = model.RNNModel(10, 20)
        model.train()
        y = model
        """
    # Bound before: a method of the module instance, whose result is a forward's.
    assert model_of(bound, watch=6).graphs_at(6, "model") == {4}


def test_an_imported_helper_applied_to_a_state_alone_carries_nothing():
    # `hidden = repackage_hidden(hidden)` with the helper in another file: a state
    # transform between batches the analysis cannot see (it usually detaches).
    source = RNN.replace("    out, hidden = rnn(x, hidden)", "    hidden = repackage_hidden(hidden)\n    out, hidden = rnn(x, hidden)")
    source = "from utils import repackage_hidden\n" + source
    assert model_of(source, watch=10).graphs_at(10, "hidden") == set()
    # With a second argument it is an ordinary call: the previous batch's graph comes out.
    moved = source.replace("repackage_hidden(hidden)", "repackage_hidden(hidden, device)")
    assert 10 in model_of(moved, watch=10).graphs_at(10, "hidden")


def test_gathering_parameters_builds_no_node():
    # `list(m.named_parameters())`, `[p for n, p in named]`, `filter(...)`: the weights
    # themselves, gathered; no forward ran on them (a computation on them would be one).
    source = """
        def setup(model, optimizer_class):
            named = list(model.named_parameters())
            params = [p for n, p in named]
            trainable = list(filter(lambda p: p.requires_grad, model.parameters()))
            scaled = [p * 2 for p in params]
            y = 0
        """
    model = model_of(source, watch=7)
    for name in ("named", "params", "trainable"):
        assert model.graphs_at(7, name) == set(), name
    assert model.graphs_at(7, "scaled") == {6}


def test_an_unknown_callable_given_only_parameters_builds_an_object():
    # `optimizer_class(model.parameters(), lr=lr)`: an optimizer, not a forward.
    source = """
        def setup(model, optimizer_class, encoder, x):
            optimizer = optimizer_class(model.parameters(), lr=0.1)
            features = encoder(x)
            y = 0
        """
    model = model_of(source, watch=5)
    assert model.graphs_at(5, "optimizer") == set()
    assert model.graphs_at(5, "features") == {4}


def test_an_unknown_callable_given_nothing_is_no_forward():
    # `sampler = sampler()` of a class handed in: a forward takes input.
    source = """
        def setup(data, sampler, encoder, x):
            sampler = sampler()
            features = encoder(x)
            y = 0
        """
    model = model_of(source, watch=5)
    assert model.graphs_at(5, "sampler") == set()
    assert model.graphs_at(5, "features") == {4}


def test_a_loop_over_a_helper_of_the_file_binds_what_it_yields():
    # The call is solved at the loop's pre-header; the helper replaces the state there,
    # and the loop target must still be bound to what the generator yields.
    source = """
        import torch

        def batches(features, labels):
            for i in range(0, len(features), 4):
                yield features[i:i + 4], labels[i:i + 4]

        def train():
            w = torch.randn(3, 1, requires_grad=True)
            X = torch.randn(8, 3)
            Y = X @ w
            for x, y in batches(X, Y):
                z = 0
        """
    assert 11 in model_of(source, watch=13).graphs_at(13, "y")


def test_prepare_hands_each_object_back_in_its_place():
    # `model, optimizer = accelerator.prepare(model, optimizer)` wraps each object:
    # the model must not take on what the other arguments carry.
    source = """
        from accelerate import Accelerator
        from torch import nn
        accelerator = Accelerator()
        net = nn.Linear(2, 2)
        h = net(x)
        wrapped, other = accelerator.prepare(net, h)
        y = wrapped
        """
    assert model_of(source, watch=8).graphs_at(8, "wrapped") == set()
    assert model_of(source, watch=8).graphs_at(8, "other") == {6}


def test_each_constant_key_of_a_dict_of_reads_holds_its_own_value():
    # litgpt's `state = {"model": ..., "optimizer": ..., "iter_num": 0}`.
    source = """
        from torch import nn
        net = nn.Linear(2, 2)
        h = net(x)
        state = {"model": net, "hidden": h, "step": 0}
        a = state["model"]
        b = state["hidden"]
        y = a
        """
    model = model_of(source, watch=8)
    assert model.graphs_at(8, "a") == set()
    assert 4 in model.graphs_at(8, "b")
    # A large table stays one value (each item would be a path the state walks).
    many = ", ".join(f'"k{i}": {i}' for i in range(40))
    table = source.replace('"step": 0}', '"step": 0, ' + many + '}')
    assert 4 in model_of(table, watch=8).graphs_at(8, "a")


def test_a_container_of_parameters_is_no_graph():
    # Parameter groups only collect the parameters: no operation, no node.
    source = """
        from torch import nn
        net = nn.Linear(2, 2)
        groups = [{"params": [p for n, p in net.named_parameters()], "weight_decay": 0.0}]
        kept = []
        for p in net.parameters():
            kept.append(p)
        y = groups
        """
    model = model_of(source, watch=8)
    assert model.graphs_at(8, "groups") == set()
    assert model.graphs_at(8, "kept") == set()
    # Computing from them is an operation on parameters: a node.
    scaled = source.replace('[p for n, p in net.named_parameters()]', '[p * 2 for n, p in net.named_parameters()]')
    assert model_of(scaled, watch=8).graphs_at(8, "groups") == {4}


def test_a_hyperparameter_read_from_a_param_group_is_not_the_group():
    source = """
        from torch import nn
        from optimizers import Optim
        net = nn.Linear(2, 2)
        h = net(x)
        opt = Optim(h)
        for group in opt.param_groups:
            lr = group["lr"]
            params = group["params"]
        y = lr
        """
    model = model_of(source, watch=10)
    assert model.graphs_at(10, "lr") == set()
    # An optimizer (here: it has param_groups) holds parameters but is no graph, even
    # when a class graphlint does not know builds it from one.
    assert model.graphs_at(10, "opt") == set()
    assert model.graphs_at(10, "params") == set()


def test_values_built_under_no_grad_carry_no_graph():
    source = """
        import torch
        from torch import nn
        net = nn.Linear(2, 2)
        with torch.no_grad():
            feats = net(x)
        y = feats
        """
    model = model_of(source, watch=7)
    assert model.graphs_at(7, "feats") == set()


def test_item_and_comparisons_are_graph_free():
    source = """
        from torch import nn
        net = nn.Linear(2, 2)
        out = net(x)
        a = out.item()
        b = (out > 0).sum()
        c = out * 2
        d = 1
        """
    model = model_of(source, watch=8)
    assert model.graphs_at(8, "a") == set()
    assert model.graphs_at(8, "b") == set()
    assert model.graphs_at(8, "c") == {4, 7}


def test_tuple_returns_are_unpacked_per_element():
    source = """
        from torch import nn
        net = nn.Linear(2, 2)
        def criterion(x):
            loss = net(x).sum()
            return loss, x.size(0)
        loss, n = criterion(x)
        done = True
        """
    model = model_of(source, watch=8)
    assert model.graphs_at(8, "n") == set()
    assert model.graphs_at(8, "loss")


# ----- helper summaries -----
def test_recursive_repackage_helper_cuts_its_argument():
    source = """
        import torch
        def repackage_hidden(h):
            if isinstance(h, torch.Tensor):
                return h.detach()
            return tuple(repackage_hidden(v) for v in h)
        """
    summary = model_of(source).summary("repackage_hidden")
    assert summary.cuts("h")
    assert not summary.runs_backward


def test_clone_helper_does_not_cut():
    source = """
        def keep(h):
            return h.clone()
        """
    assert not model_of(source).summary("keep").cuts("h")


def test_train_step_that_returns_a_detached_loss():
    source = """
        def train_step(model, batch, opt):
            loss = model(batch).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        """
    summary = model_of(source).summary("train_step")
    assert summary.runs_backward
    assert not summary.returns and not summary.new_graph


def test_method_summary_sees_backward_of_its_argument():
    source = """
        class Trainer:
            def backward_D(self, fake):
                loss = self.D(fake).mean()
                loss.backward()
        """
    summary = model_of(source).summary("Trainer.backward_D")
    assert summary.backwards == {"fake"}


# ----- termination -----
def test_analysis_terminates_on_deep_loop_nesting_and_long_bodies():
    nested = "import torch\nfor a0 in x:\n" + "".join(
        "    " * i + f"for a{i} in x:\n" for i in range(1, 60)
    ) + "    " * 60 + "loss = model(a0)\n" + "    " * 60 + "loss.backward()\n"
    long_body = "for x in data:\n" + "".join(f"    v{i} = model(v{i - 1})\n" for i in range(1, 3000)) + "    v2999.backward()\n"
    for source in (nested, long_body):
        start = time.perf_counter()
        model = build_model(parse_module(source), source, seconds=3.0)
        assert time.perf_counter() - start < 20  # 3 s budget plus parsing, on a loaded machine
        assert model is not None


def test_time_budget_cuts_the_analysis_short():
    source = "for x in data:\n" + "".join(f"    v{i} = model(v{i - 1})\n" for i in range(1, 3000)) + "    v2999.backward()\n"
    model = build_model(parse_module(source), source, seconds=0.5)
    assert model.truncated and "cut short" in model.truncated


def test_budget_exhaustion_is_reported_not_raised():
    source = "for x in data:\n" + "".join(f"    v{i} = model(v{i - 1})\n" for i in range(1, 400)) + "    v399.backward()\n"
    model = build_model(parse_module(source), source, budget=100)
    assert model.truncated and "cut short" in model.truncated


@pytest.mark.parametrize("spelling", [
    "loss.backward()",
    "scaler.scale(loss).backward()",
    "accelerator.backward(loss)",
    "self.manual_backward(loss)",
    "torch.autograd.backward(loss)",
])
def test_every_backward_spelling_frees_the_graph(spelling):
    source = f"""
        import torch
        from torch import nn
        class T:
            def run(self, net, x, accelerator, scaler):
                loss = net(x).sum()
                loss.backward()
                {spelling}
        """
    model = model_of(source)
    backwards = sorted(model.facts.backwards, key=lambda b: model.line(b.call))
    assert len(backwards) == 2
    assert backwards[1].freed_hits, spelling


def test_attributes_set_by_a_constructor_survive_the_assignment():
    source = """
        import torch

        class Holder:
            def __init__(self, w):
                self.scaled = w * 2

        w = torch.ones(2, requires_grad=True)
        holder = Holder(w)
        print(holder.scaled)
        """
    model = model_of(source, watch=10)
    assert model.graphs_at(10, "holder.scaled") == {6, 8}  # the node, and the leaf it reads


def test_a_plain_read_builds_no_node_of_its_own():
    source = """
        from torch import nn
        net = nn.Linear(2, 2)
        out = net(x)
        alias = out
        same = net.weight
        print(alias, same)
        """
    model = model_of(source, watch=7)
    assert model.graphs_at(7, "alias") == {4}


def test_each_element_of_a_tuple_of_computations_is_a_node_of_its_own():
    source = """
        from torch import nn
        net1, net2 = nn.Linear(2, 2), nn.Linear(2, 2)
        a, b = net1(x), net2(x)
        print(a, b)
        """
    model = model_of(source, watch=5)
    state = next(iter(model.interpreter.snapshots.values()))[0]
    nodes_of_a, nodes_of_b = state.env["a"], state.env["b"]
    assert nodes_of_a and nodes_of_b and nodes_of_a.isdisjoint(nodes_of_b)


def test_a_flag_guarding_backwards_in_two_tests_is_followed_per_partition():
    # Opposite tests of one flag, a backward under each: one runs per batch. The
    # same test twice runs both, and the second walks a freed graph.
    def freed_hits(polarity: str) -> int:
        model = model_of(
            f"""
            import torch
            net = torch.nn.Linear(2, 1)
            for x in data:
                loss = net(x).sum()
                if amp:
                    scaler.scale(loss).backward()
                if {polarity}amp:
                    loss.backward()
            """
        )
        return sum(len(backward.freed_hits) for backward in model.facts.backwards)

    assert freed_hits("not ") == 0
    assert freed_hits("") > 0


def _partitioned_runs(monkeypatch, source: str) -> list[str]:
    """The scopes analysed again partitioned, in order, while building the model."""
    runs = []
    analyse = Interpreter._analyse_scope

    def recording(self, scope, no_grad, partitions):
        if partitions:
            runs.append(scope.key)
        return analyse(self, scope, no_grad, partitions)

    monkeypatch.setattr(Interpreter, "_analyse_scope", recording)
    model = model_of(source)
    assert any(backward.freed_hits for backward in model.facts.backwards)
    return runs


def test_hits_too_weak_to_report_cost_no_partitioned_run(monkeypatch):
    # What an unknown object's method returned (weak) is freed by the first backward
    # and met again by every later one; GL001 never reports such a node.
    runs = _partitioned_runs(
        monkeypatch,
        """
        import torch
        net = torch.nn.Linear(2, 1)
        scale = loader.scale()
        for x in data:
            loss = (net(x) * scale).sum()
            loss.backward()
        """,
    )
    assert runs == []


def test_a_hit_made_strong_by_a_later_entry_point_is_partitioned_at_the_end(monkeypatch):
    # `get_scale`'s statement is one site: weak in `first`, a graph in `second`.
    runs = _partitioned_runs(
        monkeypatch,
        """
        import torch
        net = torch.nn.Linear(2, 1)

        def get_scale(source):
            scale = source.scale()
            return scale

        def first(data, loader):
            scale = get_scale(loader)
            for x in data:
                loss = (net(x) * scale).sum()
                loss.backward()

        def second(x):
            loss = get_scale(net(x)).sum()
            loss.backward()
        """,
    )
    assert runs == ["first"]


def _entry_points(monkeypatch, source: str) -> list[str]:
    """The scopes analysed as entry points (first runs), in order."""
    analysed = []
    analyse = Interpreter._analyse_scope

    def recording(self, scope, no_grad, partitions):
        if not partitions:
            analysed.append(scope.key)
        return analyse(self, scope, no_grad, partitions)

    monkeypatch.setattr(Interpreter, "_analyse_scope", recording)
    model_of(source)
    return analysed


_TRAIN_STEP = """
    import torch
    net = torch.nn.Linear(2, 1)

    def train_step(x, opt, hidden, train):
        opt.zero_grad()
        out, hidden = net(x, hidden)
        out.sum().backward()
        opt.step()
        return hidden

    def fit(loader, opt, hidden, mode):
        for x in loader:
            {call}
    """


@pytest.mark.parametrize(
    "call, entries",
    [
        # Run by its caller, as its caller runs it: not again on its own, and the
        # function that calls it is analysed first although it comes later.
        ("train_step(x, opt, None, mode)", ["fit"]),
        # A literal argument decides its branches there; on its own it takes both.
        ("train_step(x, opt, None, False)", ["fit", "train_step"]),
        # The state it carries is reported at the call, which hides what it carries inside.
        ("hidden = train_step(x, opt, hidden, mode)", ["fit", "train_step"]),
    ],
)
def test_a_function_its_caller_runs_is_an_entry_point_only_when_that_run_is_not_its_own(monkeypatch, call, entries):
    assert _entry_points(monkeypatch, _TRAIN_STEP.format(call=call)) == entries


def test_a_lambda_hands_back_what_its_closure_holds():
    # imagen's U-Net: `add_skip_connection = lambda x: cat((x, hiddens.pop()))`. The
    # skips reach the output (and so the backward) through the lambda's closure.
    model = model_of(
        """
        import torch
        net = torch.nn.Linear(2, 2)
        hiddens = [net(x0)]
        add_skip = lambda y: torch.cat((y, hiddens.pop()))
        out = add_skip(x1)
        print(out)
        """,
        watch=7,
    )
    assert 4 in model.graphs_at(7, "out")
