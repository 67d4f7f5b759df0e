"""smithbot: contributes faster Triton kernels to LLM inference engines (DESIGN.md)."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
