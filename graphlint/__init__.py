"""graphlint: find autograd misuse in PyTorch training code."""

__version__ = "0.1.0"
