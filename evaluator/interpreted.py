"""Plain Python values of what Triton's interpreter hands a stand-in (``standin.py``, ``forks.py``): a scalar held
in a 0-d or 1-element tensor, and a ``tl.constexpr``'s value."""

from __future__ import annotations

from typing import Any

import numpy as np


def scalar(x: Any) -> int:
    """An interpreted tensor's first element, a constexpr's value, or the number itself, as an int."""
    from triton import language as tl

    if isinstance(x, tl.tensor):
        return int(np.asarray(x.handle.data).reshape(-1)[0])
    return int(x.value if isinstance(x, tl.constexpr) else x)


def unwrap(x: Any) -> Any:
    """A ``tl.constexpr``'s value; anything else as it is."""
    from triton import language as tl

    return x.value if isinstance(x, tl.constexpr) else x
