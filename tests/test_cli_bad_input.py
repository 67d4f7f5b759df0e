"""Bad input on every command's options is refused at parse time, before any work starts: one line on stderr that
names the command and the option as typed, exit 2, no traceback, and nothing written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from smithbot.cli import main

# (arguments, words the one line must hold); TASK and RUN stand for a bundled task and a run id that need not exist:
# each of these is refused before a task is loaded or the run database is opened
CASES = [
    # counts are at least 1
    ("run demo --top 0", "'--top'"),
    ("run demo --top -1", "'--top'"),
    ("run demo --top two", "'--top'"),
    ("run demo --iterations 0", "'--iterations'"),
    ("extract demo --top 0", "'--top'"),
    ("extract demo --all --jobs 0", "'--jobs'"),
    ("eval rmsnorm k.py --rounds 0", "'--rounds'"),
    ("verify RUN --top 0", "'--top'"),
    ("verify RUN --top -3", "'--top'"),
    ("evolve rmsnorm --workers 0", "'--workers'"),
    ("evolve rmsnorm --iterations 0", "'--iterations'"),
    ("evolve rmsnorm --islands 0", "'--islands'"),
    ("evolve rmsnorm --patience 0", "'--patience'"),
    ("evolve rmsnorm --migrate-every 0", "'--migrate-every'"),
    ("evolve rmsnorm --budget-tokens 0", "'--budget-tokens'"),
    ("evolve rmsnorm --seed -1", "'--seed'"),
    ("demo --iterations 0", "'--iterations'"),
    ("profile demo --batch 0", "'--batch'"),
    ("scan demo --limit -1", "'--limit'"),
    ("profile demo --limit -1", "'--limit'"),
    # times and budgets are more than 0
    ("run demo --time -5", "'--time': -5 is not more than 0"),
    ("run demo --time 0", "'--time'"),
    ("run demo --time-total 0", "'--time-total'"),
    ("run demo --budget-usd -1", "'--budget-usd'"),
    ("evolve rmsnorm --time 0", "'--time'"),
    ("evolve rmsnorm --budget-usd 0", "'--budget-usd'"),
    ("eval rmsnorm k.py --timeout -1", "'--timeout'"),
    ("eval rmsnorm k.py --timeout 0", "'--timeout'"),
    ("extract demo --all --check-timeout 0", "'--check-timeout'"),
    ("eval rmsnorm k.py --min-gain -0.1", "'--min-gain'"),
    ("export-dataset RUN --out steps.jsonl --threshold -1", "'--threshold'"),
    ("eval rmsnorm k.py --timeout soon", "'--timeout'"),
    # choices
    ("eval rmsnorm k.py --backend gpu", "'gpu' is not one of cuda, interpreter, auto"),
    ("evolve rmsnorm --backend gpu", "'--backend'"),
    ("verify RUN --backend gpu", "'--backend'"),
    ("demo --backend gpu", "'--backend'"),
    ("run demo --backend gpu", "'--backend'"),
    ("run demo --proposer foo", "'foo' is not one of tune, llm, inductor, replay"),
    ("evolve rmsnorm --proposer foo", "'--proposer'"),
    ("profile demo --phase middle", "'middle' is not one of decode, prefill"),
    # output paths that cannot be made
    ("extract demo rms_norm --out /proc/nope", "cannot make the folder /proc/nope"),
    ("report RUN --out /proc/nope", "'--out'"),
    ("propose RUN --out /proc/nope", "'--out'"),
    ("export-dataset RUN --out /proc/nope/steps.jsonl", "cannot make the folder /proc/nope"),
    # options and commands that do not exist, arguments missing
    ("run demo --tpo 3", "No such option: --tpo"),
    ("scan demo --fusoin", "No such option: --fusoin"),
    ("nosuch", "No such command 'nosuch'"),
    ("run", "Missing argument 'target'"),
    ("eval", "Missing argument"),
    ("report", "Missing argument 'run'"),
    ("export-dataset RUN", "Missing option '--out'"),
]


@pytest.mark.parametrize("args,words", CASES, ids=[a for a, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(args: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("SMITHBOT_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["smithbot", *args.split()])
    with pytest.raises(SystemExit) as done:
        main()
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert done.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: smithbot"), err
    assert words in lines[0], lines[0]
    assert "Traceback" not in err
    assert not home.exists(), "work started before the error (the workspace was made)"


def test_bare_smithbot_prints_its_help(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["smithbot"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 0 and "Commands:" in capsys.readouterr().out


def test_help_shows_no_bool_metavar_for_flags(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["smithbot", "run", "--help"])
    with pytest.raises(SystemExit) as done:
        main()
    text = capsys.readouterr().out
    assert done.value.code == 0 and "--fusion" in text and "--help" in text
    assert "<bool>" not in text, text
