"""pyannote interop (Diarization.to_annotation / from_rttm) and the
pictures (eliza.plot.timeline / spectrogram, `eliza diarize --plot`,
`eliza say --plot`): image size, not blank, one colour per speaker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import eliza
from eliza import models
from eliza import plot as eplot

REPO = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 1200, 500

TURNS = eliza.Diarization([
    eliza.Turn(0.5, 3.0, 0, 0.9),
    eliza.Turn(3.2, 6.0, 1, 0.8),
    eliza.Turn(5.5, 8.0, 2, 0.7),
    eliza.Turn(8.5, 9.5, 0, 0.9),
])


def _image(path: Path) -> npt.NDArray[np.uint8]:
    image = pytest.importorskip("matplotlib.image")
    rgba = np.asarray(image.imread(str(path)))
    return np.round(rgba[..., :3] * 255).astype(np.uint8)


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def _count(img: npt.NDArray[np.uint8], colour: str) -> int:
    return int(np.all(img == np.array(_rgb(colour), np.uint8), axis=-1).sum())


def test_to_annotation_and_back_through_rttm() -> None:
    core = pytest.importorskip("pyannote.core")
    annotation = TURNS.to_annotation(uri="talk")
    assert isinstance(annotation, core.Annotation) and annotation.uri == "talk"
    assert sorted(annotation.labels()) == ["SPEAKER_00", "SPEAKER_01", "SPEAKER_02"]
    assert abs(annotation.label_duration("SPEAKER_00") - 3.5) < 1e-9
    assert len(list(annotation.itertracks())) == len(TURNS)
    metrics = pytest.importorskip("pyannote.metrics.diarization")
    assert metrics.DiarizationErrorRate()(annotation, annotation) == 0.0
    back = eliza.Diarization.from_rttm(TURNS.to_rttm("talk"))
    assert [(t.speaker, round(t.start, 3), round(t.end, 3)) for t in back] == [
        (t.speaker, t.start, t.end) for t in TURNS
    ]


def test_from_rttm_reads_a_file_numbers_speakers_and_filters_by_uri(tmp_path: Path) -> None:
    rttm = tmp_path / "x.rttm"
    rttm.write_text(
        "SPEAKER a 1 1.000 2.000 <NA> <NA> SPEAKER_03 <NA> <NA>\n"
        "SPEAKER b 1 0.000 1.000 <NA> <NA> bob <NA> <NA>\n"
        "SPEAKER a 1 0.500 0.250 <NA> <NA> alice <NA> <NA>\n"
    )
    d = eliza.Diarization.from_rttm(rttm, uri="a")
    assert [(t.start, t.end, t.speaker) for t in d] == [(0.5, 0.75, 1), (1.0, 3.0, 0)]
    assert d.speakers == [0, 1]
    dataset = REPO / "tests" / "diar" / "dataset" / "conv03_3spk_90s.rttm"
    assert len(eliza.Diarization.from_rttm(dataset).speakers) == 3
    with pytest.raises(eliza.InvalidArgumentError, match="line 1"):
        eliza.Diarization.from_rttm("SPEAKER a 1 x 1.0 <NA> <NA> s <NA> <NA>\n")


def test_timeline_has_one_colour_per_speaker(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rate = 16000
    t = np.arange(10 * rate) / rate
    audio = (0.5 * np.sin(2 * np.pi * 3 * t) * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    out = tmp_path / "timeline.png"
    eplot.timeline(out, TURNS, audio, rate, title="talk")
    img = _image(out)
    assert img.shape == (HEIGHT, WIDTH, 3)
    assert img.std() > 10  # not blank
    for s in TURNS.speakers:
        assert _count(img, eplot.speaker_color(s)) > 1000, f"speaker {s} is not drawn in its colour"
    for other in eplot.SPEAKER_COLORS[len(TURNS.speakers):]:
        assert _count(img, other) < 20, f"{other} drawn, but only {len(TURNS.speakers)} speakers exist"
    assert not list(tmp_path.glob(".*.part"))


def test_spectrogram_picture_and_mel_bands(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rate = 24000
    t = np.arange(2 * rate) / rate
    tone = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    spec = eplot.mel_spectrogram(tone, rate)
    assert spec.shape[0] == 80 and spec.shape[1] == 1 + (len(tone) - 1024) // 256
    band = int(np.argmax(spec.mean(axis=1)))
    mel = 2595 * np.log10(1 + np.array([1000.0, rate / 2]) / 700)
    assert abs(band - (mel[0] / mel[1]) * 81 + 1) <= 2  # 1 kHz lands in its mel band
    out = tmp_path / "spec.png"
    eplot.spectrogram(out, tone, rate)
    img = _image(out)
    assert img.shape == (HEIGHT, WIDTH, 3) and img.std() > 10
    with pytest.raises(eliza.InvalidArgumentError):
        eplot.spectrogram(out, np.zeros((10, 2), np.float32), rate)


def _eliza(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "eliza", *args], capture_output=True, timeout=300)


def test_cli_diarize_and_say_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(REPO / "tests" / "diar"))
    from diar_models_util import speech_like

    try:
        models.diarization_model_paths(install=False)
        have_diar = True
    except ImportError:
        have_diar = False
    if have_diar:
        wav = tmp_path / "talk.wav"
        eliza.write_wav(wav, speech_like(7, 12.0), 16000)
        run = _eliza("diarize", str(wav), "--threads", "2", "--plot", str(tmp_path / "timeline.png"))
        assert run.returncode == 0, run.stderr
        img = _image(tmp_path / "timeline.png")
        assert img.shape == (HEIGHT, WIDTH, 3)
        n_speakers = len({line.split()[2] for line in run.stdout.decode().splitlines() if "SPEAKER_" in line})
        drawn = [c for c in eplot.SPEAKER_COLORS if _count(img, c) > 200]
        assert len(drawn) == n_speakers
    if models.is_cached(models.KOKORO):
        run = _eliza("say", "Hello there.", "-o", str(tmp_path / "hi.wav"), "--no-noise", "--threads", "2",
                     "--plot", str(tmp_path / "spec.png"))
        assert run.returncode == 0, run.stderr
        img = _image(tmp_path / "spec.png")
        assert img.shape == (HEIGHT, WIDTH, 3) and img.std() > 10
    if not have_diar and not models.is_cached(models.KOKORO):
        pytest.skip("neither the diarization nor the Kokoro model is cached")
