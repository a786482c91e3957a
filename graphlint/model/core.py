"""Entry point of the model: build everything the rules query for one module."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst
from libcst.metadata import MetadataWrapper, PositionProvider


@dataclass(frozen=True)
class Span:
    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Diagnostic:
    span: Span
    message: str


@dataclass
class ModuleModel:
    module: libcst.Module
    source: str
    positions: dict = field(default_factory=dict)
    # Set to a human-readable reason when a work budget cut the analysis short.
    truncated: str | None = None

    def span(self, node: libcst.CSTNode) -> Span:
        rng = self.positions[node]
        return Span(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)


def build_model(module: libcst.Module, source: str) -> ModuleModel:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    return ModuleModel(module=wrapper.module, source=source, positions=dict(positions))
