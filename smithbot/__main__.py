from __future__ import annotations

from smithbot.cli import main

main()
