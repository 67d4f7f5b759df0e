"""The one base of every error smithbot reports to its user: one line, its message, that says what is wrong and
what to do. It lives here, in the evaluator, which imports nothing of smithbot, so that the evaluator's errors
(``TaskError``, ``BackendError``) and smithbot's share it; ``smithbot.errors`` is the name the rest uses."""

from __future__ import annotations


class SmithbotError(Exception):
    """An error with a message for the user: the command line prints it as one line and exits 2."""
