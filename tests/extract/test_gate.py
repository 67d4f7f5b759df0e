"""Self-checks share the GPU; one that ran out of memory beside others runs again alone (``pipeline._Gate``)."""

from __future__ import annotations

import threading
import time

from smithbot.extract.pipeline import _Gate


def test_a_check_alone_waits_for_the_running_ones_and_holds_off_new_ones() -> None:
    gate, events = _Gate(), []
    first_in, alone_waiting = threading.Event(), threading.Event()

    def first() -> None:
        with gate.shared() as crowded:
            first_in.set()
            alone_waiting.wait(5)
            time.sleep(0.2)  # still running while the lone check waits
            events.append("first ends")
        events.append(f"first crowded={crowded[0]}")

    def lone() -> None:
        first_in.wait(5)
        alone_waiting.set()
        with gate.alone():
            events.append("alone runs")
            time.sleep(0.2)
            events.append("alone ends")

    def late() -> None:
        alone_waiting.wait(5)
        time.sleep(0.3)  # asks while the lone check runs (or waits to)
        with gate.shared() as crowded:
            events.append(f"late runs crowded={crowded[0]}")

    threads = [threading.Thread(target=f) for f in (first, lone, late)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert events.index("first ends") < events.index("alone runs") < events.index("alone ends") \
        < events.index("late runs crowded=False")
    assert "first crowded=False" in events  # nothing else shared the GPU with it: no reason to run it again


def test_two_checks_at_once_each_know_they_were_crowded() -> None:
    gate, seen = _Gate(), []
    both = threading.Barrier(2)

    def check() -> None:
        with gate.shared() as crowded:
            both.wait(5)
        seen.append(crowded[0])

    threads = [threading.Thread(target=check) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [True, True]
