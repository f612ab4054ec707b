"""eliza._progress: the tqdm bars of the CLI and the converters are drawn
only where stderr is a terminal, and say what they count."""

from __future__ import annotations

import pytest

from eliza._progress import Bar, Steps


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with Bar("speaking", total=3, unit="chunk") as bar:
        bar.advance(1)
        bar.to(3)
    with Steps("converting") as steps:
        assert not steps.shown
        for i in range(4):
            steps(i, 4, f"tensor.{i}")
    assert capsys.readouterr() == ("", "")


def test_steps_count_the_converters_tensors(capsys: pytest.CaptureFixture[str]) -> None:
    steps = Steps("converting", show=True)
    for i in range(4):
        steps(i, 4, f"blk.{i}.attn_q.weight")
    err = capsys.readouterr().err
    assert "converting" in err and "4/4" in err and "blk.3.attn_q.weight" in err
    assert err.endswith("\n")  # closed after the last step, its line kept
    steps.close()  # idempotent


def test_a_failed_conversion_closes_the_bar(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError), Steps("converting", show=True) as steps:
        steps(0, 10, "first")
        raise RuntimeError("boom")
    err = capsys.readouterr().err
    assert "1/10" in err and err.endswith("\n")


def test_bar_moves_forward_only_and_can_clear_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    with Bar("diarizing", total=100, unit="%", show=True, leave=False, bar_format="{desc} {n:.0f}%",
             mininterval=0) as bar:  # every update drawn
        bar.to(40)
        bar.to(20)  # progress never goes back
        bar.to(100)
    err = capsys.readouterr().err
    assert "diarizing 40%" in err and "diarizing 100%" in err and "diarizing 20%" not in err
