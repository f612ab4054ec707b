"""Kokoro v1.0's 54 voices (npm kokoro-js@1.2.1): packed F16 into the default
model with their language and gender, every one speaking (on the tiny random
model of tts_api_model.py, a few on the real one), blends equal to KModel's
weighted style and only within one language, the G2P language following the
voice, and the clear errors: a voice file of the wrong size, npm missing,
text in a language without a G2P."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("torch", "kokoro", "gguf"):
    pytest.importorskip(_module)

import gguf  # noqa: E402
import tts_api_model as tm  # noqa: E402

import eliza  # noqa: E402
from eliza import models  # noqa: E402
from eliza.convert import kokoro as kconv  # noqa: E402

# Voices per language in Kokoro v1.0 (VOICES.md of hexgrad/Kokoro-82M).
LANGUAGE_COUNTS = {
    "en-us": 20,
    "en-gb": 8,
    "es": 3,
    "fr-fr": 1,
    "hi": 4,
    "it": 2,
    "ja": 5,
    "pt-br": 3,
    "zh": 8,
}
PHONEMES = "həlˈO ðˈɛɹ, hˌW ɑɹ jˈu?"  # noqa: RUF001
# Kokoro's frame: 600 samples at 24 kHz (2 x 300); the tiny model's is 2 x (2 * 2 * 5).
TINY_FRAME = 40


@pytest.fixture(scope="module")
def default_model(kokoro_js_voices: Path) -> Path:
    """The default model in $ELIZA_MODEL_CACHE, converted with the fetched
    voices when it is not there yet."""
    try:
        voices = None if models.is_cached(models.KOKORO) else kokoro_js_voices
        return models.kokoro_model_path(install=False, voices=voices)
    except ImportError:
        pytest.skip("the Kokoro model packages are not installed")


@pytest.fixture(scope="module")
def tiny_path(kokoro_js_voices: Path, pytestconfig: pytest.Config) -> Path:
    cache = getattr(pytestconfig, "cache", None)
    return tm.tiny_kokoro_voices_gguf(kokoro_js_voices, cache.mkdir("tts-api") if cache is not None else None)


@pytest.fixture(scope="module")
def tiny(tiny_path: Path) -> Iterator[eliza.TTS]:
    with eliza.TTS(tiny_path, n_threads=2) as t:
        yield t


@pytest.fixture(scope="module")
def espeak(tiny: eliza.TTS) -> None:
    try:
        tiny.phonemize("a")
    except eliza.UnsupportedError as e:
        pytest.skip(f"no espeak-ng: {e}")


def _bin(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype="<f4").reshape(510, 256)


# -- the default model ------------------------------------------------------------


def test_default_model_voices_equal_their_bin_files_f16_rounded(
    default_model: Path, kokoro_js_voices: Path
) -> None:
    reader = gguf.GGUFReader(str(default_model))
    tensors = {t.name: t for t in reader.tensors}
    names = reader.fields["kokoro.voices"].contents()
    files = sorted(kokoro_js_voices.glob("*.bin"))
    assert len(files) == 54 and sorted(names) == [f.stem for f in files]
    for f in files:
        t = tensors[f"voice.{f.stem}"]
        assert t.tensor_type == gguf.GGMLQuantizationType.F16, f.stem
        np.testing.assert_array_equal(
            np.asarray(t.data).reshape(510, 256), _bin(f).astype(np.float16), f.stem
        )


def test_default_model_lists_each_voice_with_its_language_and_gender(default_model: Path) -> None:
    with eliza.TTS(default_model, n_threads=1) as t:
        voices = t.voices
    assert len(voices) == 54 and voices[0].name == "af_heart"  # the default voice comes first
    assert Counter(v.language for v in voices) == LANGUAGE_COUNTS
    assert all(v.gender == v.name[1] for v in voices)
    assert {
        v.name: v.language for v in voices if v.name in ("bf_emma", "ff_siwis", "pm_alex", "zf_xiaobei")
    } == {
        "bf_emma": "en-gb",
        "ff_siwis": "fr-fr",
        "pm_alex": "pt-br",
        "zf_xiaobei": "zh",
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("voice", "text", "phonemes"),
    [
        ("af_heart", "Hello there, how are you?", False),
        ("bm_george", "Hello there, how are you?", False),
        ("ef_dora", "Hola, ¿cómo estás?", False),
        ("jf_alpha", "konnɪtʃiwa", True),  # noqa: RUF001
    ],
)
def test_real_model_speaks_with_voices_of_several_languages(
    default_model: Path, voice: str, text: str, phonemes: bool
) -> None:
    with eliza.TTS(default_model, n_threads=2) as t:
        try:
            audio = t.synthesize(text, voice=voice, phonemes=phonemes, no_noise=True)
        except eliza.UnsupportedError as e:
            pytest.skip(f"no espeak-ng: {e}")
    seconds = len(audio) / 24000
    assert np.all(np.isfinite(audio))
    assert 0.5 < seconds < 4.0
    assert 0.01 < float(np.sqrt(np.mean(audio**2))) < 0.5


# -- every voice, blends (tiny model) ----------------------------------------------


def test_each_of_the_54_voices_speaks_on_the_tiny_model(tiny: eliza.TTS, kokoro_js_voices: Path) -> None:
    n_ids = len(PHONEMES) + 2  # every symbol is in the vocabulary, plus the two pads
    names = sorted(f.stem for f in kokoro_js_voices.glob("*.bin"))
    assert len(names) == 54
    peaks = set()
    for name in names:
        audio = tiny.synthesize(PHONEMES, voice=name, phonemes=True, no_noise=True)
        assert np.all(np.isfinite(audio)), name
        assert float(np.abs(audio).max()) > 0, name
        # each token lasts 1..max_dur (2) frames
        assert len(audio) % TINY_FRAME == 0 and n_ids * TINY_FRAME <= len(audio) <= 2 * n_ids * TINY_FRAME, (
            name
        )
        peaks.add(round(float(np.abs(audio).max()), 6))
    assert len(peaks) > 40  # each voice's style shapes the audio


def test_blend_equals_the_weighted_voice(tiny: eliza.TTS) -> None:
    spec = ",".join(f"{n}:{w}" for n, w in tm.BLEND.items())
    blended = tiny.synthesize(PHONEMES, voice=spec, phonemes=True, no_noise=True)
    manual = tiny.synthesize(PHONEMES, voice="af_blend", phonemes=True, no_noise=True)
    assert len(blended) == len(manual)
    np.testing.assert_allclose(blended, manual, rtol=1e-4, atol=1e-5 * np.abs(manual).max())
    np.testing.assert_array_equal(
        tiny.synthesize(PHONEMES, voice="af_heart:3,af_bella:7", phonemes=True, no_noise=True), blended
    )


@pytest.mark.reference
def test_blend_equals_kmodel_with_the_weighted_style(default_model: Path) -> None:
    """KPipeline's voice for a blend is the packs' weighted mean; its style
    for a chunk is row len(phonemes) - 1 of it. KModel (the real model's
    weights, noise off) on that style against libeliza's blend."""
    import kokoro_ref as kr

    packs = kr.voices_from_gguf(default_model)
    blend = sum(np.float32(w) * packs[n] for n, w in tm.BLEND.items())
    style = np.asarray(blend, dtype=np.float32)[len(PHONEMES) - 1]
    vocab = kconv.load_vocab(kconv.packaged_data_file("vocab.json"))
    ref = kr.kmodel_reference(kr.build_kmodel(default_model), kr.phoneme_ids(PHONEMES, vocab), style)
    with eliza.TTS(default_model, n_threads=2) as t:
        ours = t.synthesize(PHONEMES, voice="af_heart:0.3,af_bella:0.7", phonemes=True, no_noise=True)
        other = t.synthesize(PHONEMES, voice="af_heart:0.7,af_bella:0.3", phonemes=True, no_noise=True)
    assert len(ours) == len(ref["audio"])
    corr = float(np.corrcoef(ours, ref["audio"])[0, 1])
    assert corr > 0.99
    # and the weights matter: the other blend is further from the reference
    n = min(len(other), len(ref["audio"]))
    assert float(np.corrcoef(other[:n], ref["audio"][:n])[0, 1]) < corr


@pytest.mark.parametrize(
    ("spec", "other"),
    [("af_heart:0.5,bf_emma:0.5", "bf_emma (en-gb)"), ("af_heart,jf_alpha", "jf_alpha (ja)")],
)
def test_blend_of_two_languages_is_refused(tiny: eliza.TTS, spec: str, other: str) -> None:
    with pytest.raises(eliza.InvalidArgumentError) as e:
        tiny.synthesize(PHONEMES, voice=spec, phonemes=True)
    assert "af_heart (en-us)" in e.value.message and other in e.value.message
    assert "one language" in e.value.message


# -- languages ----------------------------------------------------------------------


@pytest.mark.parametrize(("voice", "language"), [("jf_alpha", "Japanese"), ("zm_yunxi", "Mandarin Chinese")])
def test_text_without_a_g2p_is_unsupported_but_phonemes_speak(
    tiny: eliza.TTS, voice: str, language: str
) -> None:
    for call in (tiny.synthesize, lambda *a, **k: list(tiny.stream(*a, **k))):
        with pytest.raises(eliza.UnsupportedError) as e:
            call("Hello.", voice=voice)
        assert language in e.value.message and "phonemes" in e.value.message
    with pytest.raises(eliza.UnsupportedError):
        tiny.phonemize("Hello.", voice=voice)
    assert len(tiny.synthesize(PHONEMES, voice=voice, phonemes=True)) > 0


def test_g2p_language_follows_the_voice(tiny: eliza.TTS, espeak: Any) -> None:
    text = "La casa es grande."
    spanish = tiny.phonemize(text, lang="es")
    assert tiny.phonemize(text, voice="ef_dora") == spanish
    assert tiny.phonemize(text, voice="af_heart") == tiny.phonemize(text, lang="en-us") != spanish
    assert tiny.phonemize("Hello.", voice="bf_emma") == tiny.phonemize("Hello.", lang="en-gb")
    # synthesis sees the same phonemes
    said = tiny.synthesize(text, voice="ef_dora", no_noise=True)
    np.testing.assert_array_equal(
        said, tiny.synthesize(spanish, voice="ef_dora", phonemes=True, no_noise=True)
    )
    # lang= overrides the voice's language, also for a voice without a G2P
    np.testing.assert_array_equal(
        tiny.synthesize(text, voice="jf_alpha", lang="es", no_noise=True),
        tiny.synthesize(spanish, voice="jf_alpha", phonemes=True, no_noise=True),
    )


def test_model_language_overrides_every_voice(tiny_path: Path, espeak: Any) -> None:
    with eliza.TTS(tiny_path, n_threads=1, language="es") as t:
        assert t.phonemize("La casa.", voice="af_heart") == t.phonemize("La casa.", lang="es")
        assert len(t.synthesize("La casa.", voice="jf_alpha")) > 0


# -- bad voice files, npm ------------------------------------------------------------


def test_voice_file_of_the_wrong_size_is_a_format_error(tmp_path: Path, kokoro_js_voices: Path) -> None:
    (tmp_path / "af_heart.bin").write_bytes((kokoro_js_voices / "af_heart.bin").read_bytes())
    (tmp_path / "af_short.bin").write_bytes(b"\0" * 1000)
    with pytest.raises(eliza.FormatError) as e:
        kconv.load_voices(tmp_path)
    assert "af_short.bin is 1,000 bytes" in e.value.message and "522,240" in e.value.message


def test_cli_models_fetch_reports_a_bad_voice_directory(tmp_path: Path, run_cli: Any) -> None:
    voices = tmp_path / "voices"
    voices.mkdir()
    (voices / "af_x.bin").write_bytes(b"\0" * 12)
    r = run_cli(
        "models", "fetch", "kokoro-82m", "--voices", str(voices), env={"ELIZA_MODEL_CACHE": str(tmp_path)}
    )
    assert r.returncode != 0
    assert "af_x.bin is 12 bytes" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "kokoro-82m-v1.0-f16.gguf").exists()


def test_missing_npm_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(eliza.UnsupportedError) as e:
        models.fetch_kokoro_voices(tmp_path / "voices")
    assert "npm is not installed" in e.value.message and "--voices DIR" in e.value.message
