"""smithbot's errors share one base, ``SmithbotError`` (defined beside the evaluator, which imports nothing of
smithbot): each subclass's message is the one line the command line prints before it exits 2. The subclasses live
with the code that raises them (``ConfigError`` in ``config``, ``RepoError`` in ``repo``, ``ProposeError`` in
``propose.pipeline``...); ``UsageError`` is an option's value that a command refuses once it knows more than the
option parser did (``--islands`` on a resumed run)."""

from __future__ import annotations

from evaluator.errors import SmithbotError

__all__ = ["SmithbotError", "UsageError"]


class UsageError(SmithbotError):
    """An option's value a command refuses after parsing (the parser checks what it can before any work)."""
