from __future__ import annotations


def fix(finding, document):
    return None
