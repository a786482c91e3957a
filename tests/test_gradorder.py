"""The backward / zero_grad / step order analysis (GL003) on small training loops.

Each case is a short source and the violations it must produce, as
(kind, line of the reported node, optimizer); "a" points at the zero_grad that
clears unapplied gradients, "b" at the backward whose gradients two steps apply.
"""

from __future__ import annotations

import textwrap

from graphlint.model import syntax as libcst
from graphlint.model.from_ast import parse_module
import pytest

from graphlint.model.core import build_model
from graphlint.model.gradorder import EventGraph, OrderAnalysis

HEADER = """\
import torch
from torch import nn
model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""


def violations(body: str, header: str = HEADER) -> set[tuple[str, int, str]]:
    source = header + textwrap.dedent(body)
    model = build_model(parse_module(source), source)
    return {(v.kind, model.line(v.at), v.optimizer) for v in model.order_violations}


def line_of(body: str, marker: str, header: str = HEADER) -> int:
    lines = (header + textwrap.dedent(body)).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text)


def check(
    body: str, expected: list[tuple[str, str, str]], header: str = HEADER
) -> None:
    want = {
        (kind, line_of(body, marker, header), optimizer)
        for kind, marker, optimizer in expected
    }
    assert violations(body, header) == want


# ----- the three plain orders that clear before the step, and the correct ones -----
@pytest.mark.parametrize(
    "body",
    [
        """
    for x in data:
        model(x).sum().backward()
        opt.zero_grad()  # here
        opt.step()
    """,
        """
    for x in data:
        opt.zero_grad()  # here
        opt.step()
        model(x).sum().backward()
    """,
        """
    for x in data:
        opt.step()
        model(x).sum().backward()
        opt.zero_grad()  # here
    """,
    ],
)
def test_zero_grad_between_backward_and_step(body):
    check(body, [("a", "# here", "opt")])


@pytest.mark.parametrize(
    "body",
    [
        """
    for x in data:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    """,
        """
    for x in data:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
    """,
        """
    for x in data:
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """,
        """
    for x in data:
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()
    """,
    ],
)
def test_correct_orders_are_silent(body):
    check(body, [])


# ----- (b) gradients applied by two steps -----
@pytest.mark.parametrize(
    "body",
    [
        """
    for x in data:
        model(x).sum().backward()  # here
        opt.step()
    """,
        """
    for epoch in range(3):
        opt.zero_grad()
        for x in data:
            model(x).sum().backward()  # here
            opt.step()
    """,
        """
    for x in data:
        model(x).sum().backward()  # here
        opt.step()
        if x.sum() > 0:
            opt.zero_grad()
    """,
        """
    step = 0
    while step < 10:
        model(data[step]).sum().backward()  # here
        opt.step()
        step += 1
    """,
    ],
)
def test_zero_grad_missing_or_not_on_every_path(body):
    check(body, [("b", "# here", "opt")])


# ----- gradient accumulation: periodic guards decided by the counter's residue -----
def test_accumulation_with_step_and_zero_grad_under_one_guard_is_silent():
    check(
        """
    for i, x in enumerate(data):
        (model(x).sum() / 4).backward()
        if (i + 1) % 4 == 0:
            opt.step()
            opt.zero_grad()
    """,
        [],
    )


def test_unconditional_zero_grad_with_periodic_step():
    check(
        """
    for i, x in enumerate(data):
        opt.zero_grad()  # here
        model(x).sum().backward()
        if (i + 1) % k == 0:
            opt.step()
    """,
        [("a", "# here", "opt")],
    )


def test_zero_grad_and_step_under_the_same_guard_before_the_backward():
    check(
        """
    for i, x in enumerate(data):
        if (i + 1) % k == 0:
            opt.zero_grad()  # here
        model(x).sum().backward()
        if (i + 1) % k == 0:
            opt.step()
    """,
        [("a", "# here", "opt")],
    )


def test_in_phase_split_counters_are_silent():
    # zero_grad opens the window at i % k == 0, the step closes it one earlier;
    # `or` an unknown last-batch test does not make other steps certain.
    check(
        """
    for epoch in range(2):
        for i, x in enumerate(loader):
            if i % k == 0:
                opt.zero_grad()
            model(x).sum().backward()
            if (i + 1) % k == 0 or (i + 1) == len(loader):
                opt.step()
    """,
        [],
    )


def test_out_of_phase_split_counters():
    check(
        """
    for i, x in enumerate(data):
        if i % k == 0:
            opt.zero_grad()  # here
        model(x).sum().backward()
        if (i + 2) % k == 0:
            opt.step()
    """,
        [("a", "# here", "opt")],
    )


def test_counter_incremented_by_hand():
    check(
        """
    step = 0
    for x in data:
        model(x).sum().backward()
        step += 1
        if step % k == 0:
            opt.step()
            opt.zero_grad()
    """,
        [],
    )


def test_counter_with_unknown_values_is_not_periodic():
    # `trainer.global_step` is neither bound by a loop nor incremented here: the
    # guard is an ordinary unknown condition, and the zero_grad in it is "(b): a
    # branch not every path takes".
    check(
        """
    for x in data:
        model(x).sum().backward()  # here
        if trainer.global_step % k == 0:
            opt.step()
        if trainer.global_step % k == 0:
            opt.zero_grad()
    """,
        [("b", "# here", "opt")],
    )


def test_micro_batch_loop_accumulates_before_one_step():
    check(
        """
    for batch in data:
        opt.zero_grad()
        for micro in batch:
            model(micro).sum().backward()
        opt.step()
    """,
        [],
    )


def test_zero_grad_inside_the_micro_batch_loop():
    check(
        """
    for batch in data:
        for micro in batch:
            opt.zero_grad()  # here
            model(micro).sum().backward()
        opt.step()
    """,
        [("a", "# here", "opt")],
    )


# ----- guards that drop a batch on purpose -----
def test_non_finite_guard_zero_grad_continue_is_silent():
    check(
        """
    for x in data:
        loss = model(x).sum()
        loss.backward()
        if not torch.isfinite(loss):
            opt.zero_grad()
            continue
        opt.step()
        opt.zero_grad()
    """,
        [],
    )


def test_non_finite_guard_skips_step_then_zero_grad_is_silent():
    check(
        """
    for x in data:
        loss = model(x).sum()
        loss.backward()
        if torch.isfinite(loss):
            opt.step()
        opt.zero_grad()
    """,
        [],
    )


# ----- spellings of a clear -----
def test_grad_none_loop_first_is_a_zero_grad():
    check(
        """
    for x in data:
        for p in model.parameters():
            p.grad = None
        model(x).sum().backward()
        opt.step()
    """,
        [],
    )


def test_grad_none_loop_between_backward_and_step():
    check(
        """
    for x in data:
        model(x).sum().backward()
        for p in model.parameters():
            if p.grad is not None:
                p.grad.zero_()  # here
        opt.step()
    """,
        [("a", "# here", "opt")],
    )


@pytest.mark.parametrize(
    "selection, expected",
    [
        ("if p.requires_grad and p.grad is not None:", [("a", "# here", "opt")]),
        ('if "last_layer" in name:', []),  # DINO: a chosen layer stays frozen
        ("if p.ndim == 1:", []),
        ("if zero:", [("a", "# here", "opt")]),  # the same for every parameter
    ],
)
def test_grad_none_loop_clears_the_optimizer_unless_it_selects_parameters(selection, expected):
    check(
        f"""
    for epoch, x in enumerate(data):
        opt.zero_grad()
        model(x).sum().backward()
        for name, p in model.named_parameters():
            {selection}
                p.grad = None  # here
        opt.step()
    """,
        expected,
    )


def test_param_groups_loop_between_backward_and_step():
    check(
        """
    for x in data:
        model(x).sum().backward()
        for group in opt.param_groups:
            for p in group["params"]:
                p.grad = None  # here
        opt.step()
    """,
        [("a", "# here", "opt")],
    )


def test_model_zero_grad_clears_the_optimizer_built_on_it():
    check(
        """
    for x in data:
        model(x).sum().backward()
        model.zero_grad()  # here
        opt.step()
    """,
        [("a", "# here", "opt")],
    )


def test_zero_grad_of_a_submodule_is_not_certain():
    header = HEADER.replace(
        "nn.Linear(2, 1)", "nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))"
    )
    check(
        """
    for x in data:
        model(x).sum().backward()
        model.head.zero_grad()
        opt.step()
    """,
        [],
        header,
    )


# ----- unknown calls that receive the optimizer or the model -----
def test_unknown_callback_receiving_the_optimizer_may_clear():
    check(
        """
    def train(model, loader, optimizer, callbacks):
        for x in loader:
            model(x).sum().backward()
            optimizer.step()
            for cb in callbacks:
                cb.on_batch_end(model, optimizer)
    """,
        [],
    )


def test_unknown_hook_receiving_the_model_may_clear():
    check(
        """
    def fit(model, optimizer, data, after_update):
        for x in data:
            model(x).sum().backward()
            optimizer.step()
            after_update(model)
    """,
        [],
    )


def test_known_framework_calls_do_not_clear():
    check(
        """
    scaler = torch.amp.GradScaler()
    for x in data:
        scaler.scale(model(x).sum()).backward()  # here
        scaler.unscale_(opt)
        print(model)
        scaler.step(opt)
        scaler.update()
    """,
        [("b", "# here", "opt")],
    )


# ----- helpers of the same module are spliced in -----
def test_helper_backward_and_step_points_into_the_helper():
    check(
        """
    def backward_and_step(loss, optimizer):
        loss.backward()  # here
        optimizer.step()

    for x in data:
        backward_and_step(model(x).sum(), opt)
    """,
        [("b", "# here", "opt")],
    )


def test_helper_zero_grad_between_backward_and_step():
    check(
        """
    def apply_update(net, optimizer):
        optimizer.zero_grad()  # here
        optimizer.step()

    for x in data:
        model(x).sum().backward()
        apply_update(model, opt)
    """,
        [("a", "# here", "opt")],
    )


def test_nested_helper_called_in_the_loop():
    check(
        """
    def train(model, opt, data):
        def update():
            opt.zero_grad()  # here
            opt.step()

        for x in data:
            model(x).sum().backward()
            update()
    """,
        [("a", "# here", "opt")],
    )


# ----- several optimizers -----
GAN = """\
import torch
from torch import nn
netG = nn.Linear(2, 2)
netD = nn.Linear(2, 1)
optG = torch.optim.Adam(netG.parameters())
optD = torch.optim.Adam(netD.parameters())
"""


def test_dcgan_generator_backward_into_the_discriminator_is_silent():
    check(
        """
    for real in data:
        netD.zero_grad()
        netD(real).mean().backward()
        fake = netG(real)
        netD(fake.detach()).mean().backward()
        optD.step()
        netG.zero_grad()
        netD(fake).mean().backward()
        optG.step()
    """,
        [],
        GAN,
    )


def test_generator_optimizer_never_zeroed():
    check(
        """
    for real in data:
        netD.zero_grad()
        netD(real).mean().backward()
        fake = netG(real)
        netD(fake.detach()).mean().backward()
        optD.step()
        netD(fake).mean().backward()  # here
        optG.step()
    """,
        [("b", "# here", "optG")],
        GAN,
    )


def test_one_backward_stepped_by_two_optimizers_one_cleared_in_between():
    check(
        """
    for x in data:
        optG.zero_grad()
        netD(netG(x)).mean().backward()
        optD.zero_grad()  # here
        optG.step()
        optD.step()
    """,
        [("a", "# here", "optD")],
        GAN,
    )


def test_one_backward_stepped_by_two_optimizers_one_never_zeroed():
    check(
        """
    for x in data:
        optG.zero_grad()
        netD(netG(x)).mean().backward()  # here
        optG.step()
        optD.step()
    """,
        [("b", "# here", "optD")],
        GAN,
    )


def test_a_backward_belongs_to_the_first_run_of_steps_after_it():
    source = GAN + textwrap.dedent("""
    for x in data:
        optD.zero_grad()
        netD(x).mean().backward()
        optD.step()
        optG.zero_grad()
        netD(netG(x)).mean().backward()
        optG.step()
    """)
    module = parse_module(source)
    from graphlint.model.program import Program

    program = Program(module)
    graph = EventGraph(program)
    entry, _ = graph.expand(program.scopes[module], {}, 0, None, False)
    analysis = OrderAnalysis(graph, entry, module.code_for_node)
    owners = [
        analysis.owners(node, index)
        for node in graph.nodes
        for index, event in enumerate(node.events)
        if event.kind == "B"
    ]
    assert owners == [{"optD"}, {"optG"}]


# ----- steps that manage gradients themselves -----
def test_lbfgs_closure_defined_in_the_loop():
    header = HEADER.replace(
        "SGD(model.parameters(), lr=0.1)", "LBFGS(model.parameters())"
    )
    check(
        """
    for i in range(3):
        def closure():
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            return loss
        opt.step(closure)
    """,
        [],
        header,
    )


def test_custom_optimizer_whose_step_clears():
    header = """\
import torch
from torch import nn
class PlainSGD(torch.optim.Optimizer):
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.data -= group["lr"] * p.grad
                p.grad = None
model = nn.Linear(2, 1)
opt = PlainSGD(model.parameters(), {"lr": 0.1})
"""
    check(
        """
    for x in data:
        model(x).sum().backward()
        opt.step()
    """,
        [],
        header,
    )


def test_autograd_grad_writes_no_grad():
    check(
        """
    for x in data:
        grads = torch.autograd.grad(model(x).sum(), list(model.parameters()))
        for p, g in zip(model.parameters(), grads):
            p.grad = g
        opt.step()
    """,
        [],
    )


# ----- shapes from real projects -----
def test_helper_flag_argument_decides_its_branch():
    # accelerate's test_sync: the helper's other branch is dead for this call.
    check(
        """
    def update(optimizer, loss, clear_after=True):
        loss.backward()
        optimizer.step()
        if clear_after:
            optimizer.zero_grad()

    for x in data:
        update(opt, model(x).sum())
    """,
        [],
    )


def test_helper_flag_argument_false_keeps_the_finding():
    check(
        """
    def update(optimizer, loss, clear_after=True):
        loss.backward()  # here
        optimizer.step()
        if clear_after:
            optimizer.zero_grad()

    for x in data:
        update(opt, model(x).sum(), clear_after=False)
    """,
        [("b", "# here", "opt")],
    )


def test_stepping_each_optimizer_of_a_collection_is_one_step_each():
    # speechbrain's optimizers_step: `for opt in optimizers: scaler.step(opt)`.
    check(
        """
    scaler = torch.amp.GradScaler()
    optimizers = {"main": opt}
    for x in data:
        scaler.scale(model(x).sum()).backward()
        for o in optimizers.values():
            scaler.step(o)
        scaler.update()
        for o in optimizers.values():
            o.zero_grad(set_to_none=True)
    """,
        [],
    )


def test_library_zero_grads_function_may_clear():
    # pyro's opt_eig: `pyro.infer.util.zero_grads(params)` from the second iteration on.
    check(
        """
    import pyro
    params = None
    for x in data:
        if params is not None:
            pyro.infer.util.zero_grads(params)
        model(x).sum().backward()
        params = list(model.parameters())
        opt.step()
    """,
        [],
    )


def test_a_helper_spliced_twice_belongs_to_each_call_separately():
    # accelerate's test_sync: the same backward helper feeds a plain optimizer at one
    # call and a framework-managed one at the other; only the plain call counts for it.
    check(
        """
    from accelerate import Accelerator
    accelerator = Accelerator()

    def step_model(net, x, use_accelerator=True):
        loss = net(x).sum()
        if not use_accelerator:
            loss.backward()  # here
        else:
            accelerator.backward(loss)

    for x in data:
        step_model(model, x, False)
        opt.step()
        with accelerator.accumulate(model):
            step_model(model, x)
            opt2.step()
            opt2.zero_grad()
        if x.sum() > 0:
            opt.zero_grad()
    """,
        [("b", "# here", "opt")],
    )


def test_first_iteration_guard_on_none_is_decided_per_path():
    check(
        """
    previous = None
    for x in data:
        if previous is not None:
            opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        previous = x
    """,
        [],
    )


def test_a_name_never_set_to_none_stays_unknown():
    check(
        """
    for x in data:
        model(x).sum().backward()  # here
        opt.step()
        if x is not None:
            opt.zero_grad()
    """,
        [("b", "# here", "opt")],
    )


# ----- flags: a parameter tested twice in one call is one value -----
def _in_function(body: str) -> str:
    return "def steps(model, opt, data, accumulate):\n" + textwrap.indent(textwrap.dedent(body), "    ")


def test_a_parameter_tested_twice_takes_the_same_branch_both_times():
    # `if optimizer:` guarding both the zero_grad and the step (opacus' test helper):
    # no path skips the one and takes the other.
    check(
        _in_function(
            """
            for x in data:
                if opt:
                    opt.zero_grad()
                model(x).sum().backward()
                if opt:
                    opt.step()
            """
        ),
        [],
    )
    check(
        _in_function(
            """
            for x in data:
                if not accumulate:
                    opt.zero_grad()
                model(x).sum().backward()
                if not accumulate:
                    opt.step()
            """
        ),
        [],
    )


def test_a_flag_the_loop_re_binds_is_followed_from_each_binding():
    # The step runs when the new value is true, and the next iteration's test sees
    # that same value: every step is followed by a zero_grad before the next backward.
    check(
        _in_function(
            """
            for x in data:
                if accumulate:
                    opt.zero_grad()
                model(x).sum().backward()
                accumulate = not accumulate
                if accumulate:
                    opt.step()
            """
        ),
        [],
    )
    # Re-bound to an unknown value: the test after the binding decides afresh.
    check(
        _in_function(
            """
            for x in data:
                if accumulate:
                    opt.zero_grad()
                model(x).sum().backward()  # here
                opt.step()
                accumulate = check(x)
            """
        ),
        [("b", "# here", "opt")],
    )


def test_attribute_and_comparison_tests_of_parameters_are_one_value():
    # DGL's `if args.sparse_embedding:` around a second optimizer's zero_grad and
    # step; Swin's `if config.ACCUMULATION_STEPS > 1:` choosing accumulation or not,
    # tested once per iteration: every iteration takes the branch the first took.
    check(
        _in_function(
            """
            for x in data:
                if accumulate.sparse:
                    opt.zero_grad()
                model(x).sum().backward()
                if accumulate.sparse:
                    opt.step()
            """
        ),
        [],
    )
    check(
        _in_function(
            """
            opt.zero_grad()
            for i, x in enumerate(data):
                if accumulate.steps > 1:
                    model(x).sum().backward()
                    if (i + 1) % accumulate.steps == 0:
                        opt.step()
                        opt.zero_grad()
                else:
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
            """
        ),
        [],
    )


def test_a_constant_test_is_not_constant_once_its_attribute_is_assigned():
    check(
        _in_function(
            """
            for x in data:
                if accumulate.sparse:
                    opt.zero_grad()
                model(x).sum().backward()  # here
                accumulate.sparse = check(x)
                if accumulate.sparse:
                    opt.step()
            """
        ),
        [("b", "# here", "opt")],
    )


def test_a_flag_of_a_helper_is_decided_afresh_at_each_call():
    # Called with other arguments in the caller's loop: a plain epoch's last
    # gradients are still there when an accumulating epoch steps.
    check(
        """
def epoch(config, data):
    for i, x in enumerate(data):
        if config.steps > 1:
            model(x).sum().backward()
            if (i + 1) % config.steps == 0:
                opt.step()
                opt.zero_grad()
        else:
            opt.zero_grad()
            model(x).sum().backward()  # here
            opt.step()


for config in configs:
    epoch(config, data)
""",
        [("b", "# here", "opt")],
    )


def test_a_local_only_tested_is_one_value_between_its_bindings():
    # pytorch/rl's GRPO: the step and the zero_grad after it under one finiteness flag.
    check(
        """
for i, x in enumerate(data):
    model(x).sum().backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    did_step = bool(torch.isfinite(norm))
    if not did_step:
        opt.zero_grad()
    else:
        opt.step()
    if did_step:
        opt.zero_grad()
""",
        [],
    )


def test_a_local_whose_object_may_change_is_tested_independently():
    # `done` is a list the loop appends to: its truth can change between the tests.
    check(
        """
done = []
for x in data:
    if not done:
        opt.zero_grad()
    model(x).sum().backward()  # here
    done.append(x)
    if done:
        opt.step()
""",
        [("b", "# here", "opt")],
    )


def test_a_step_skipped_on_purpose_may_throw_accumulated_gradients_away():
    # Accumulation, then a non-finite update skipped and its gradients discarded.
    check(
        """
for i, x in enumerate(data):
    model(x).sum().backward()
    if (i + 1) % k == 0:
        if not torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)):
            opt.zero_grad()
        else:
            opt.step()
            opt.zero_grad()
""",
        [],
    )
    # The skip does not excuse a zero_grad that wipes every micro-batch.
    check(
        """
for i, x in enumerate(data):
    model(x).sum().backward()
    if (i + 1) % k == 0:
        if torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)):
            opt.step()
    opt.zero_grad()  # here
""",
        [("a", "# here", "opt")],
    )


def test_opposite_tests_of_one_flag_still_find_the_missing_zero_grad():
    # zero_grad only when accumulating, step only when not: every step applies
    # every backward since the last zero_grad, which never runs on that path.
    check(
        _in_function(
            """
            for x in data:
                if accumulate:
                    opt.zero_grad()
                model(x).sum().backward()  # here
                if not accumulate:
                    opt.step()
            """
        ),
        [("b", "# here", "opt")],
    )


def test_periods_that_decide_no_event_leave_room_for_the_accumulation_counter():
    # Logging, checkpoint and evaluation periods decide only prints and unknown calls:
    # they are not tracked, so the accumulation counter still is (at most three are).
    check(
        """
    for epoch in range(2):
        if epoch % save_every == 0:
            save(model.state_dict())
        for i, x in enumerate(loader):
            if i % log_every == 0:
                print(i)
            if i % eval_every == 0:
                print(evaluate(x))
            if i % k == 0:
                opt.zero_grad()
            model(x).sum().backward()
            if (i + 1) % k == 0 or (i + 1) == len(loader):
                opt.step()
    """,
        [],
    )
