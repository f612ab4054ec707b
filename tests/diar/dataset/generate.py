"""Builds the diarization evaluation set: multi-speaker conversations spoken
by distinct espeak-ng voices (the espeakng-loader package's libespeak-ng,
through ctypes) and by distinct Kokoro-82M voices and voice blends
(libeliza's own TTS through eliza.TTS), with exact ground truth.

Each conversation is a sequence of utterances (one or two sentences, or a
short backchannel such as "Right."), each by a speaker other than the
previous one, separated by pauses or overlapping the previous utterance.
Every utterance is synthesized alone, so who speaks when is known to the
sample: an utterance's reference turns are its non-silent stretches
(10 ms frames above -46 dBFS, inner pauses under 0.3 s bridged). The mix gets
white noise at -60 dBFS and is written as 16-bit PCM at the synthesizer's
own rate, so the diarizer's resampler is exercised: 22,050 Hz for espeak-ng,
24,000 Hz for Kokoro (not resampled here).

The audio is not committed: this script regenerates it deterministically
(numpy PCG64 with fixed seeds; the espeak-ng build is pinned by
espeakng-loader==0.2.4; Kokoro runs with no_noise=True on 2 threads, which
makes its output bit-identical from run to run for one model file and one
libeliza, both recorded in dataset.json: the default model's sha256 and
eliza.version()). The reference RTTMs and dataset.json beside it are
committed; ``--check`` verifies that regenerated truth matches them. The
Kokoro files need libeliza (ELIZA_LIBRARY, or the SDK's default lookup) and
the default Kokoro model; they take a few minutes (Kokoro runs at about real
time on two busy cores).

Usage::

    python tests/diar/dataset/generate.py OUT_DIR            # every file: OUT_DIR/NAME.wav + NAME.rttm
    python tests/diar/dataset/generate.py OUT_DIR --only conv01_2spk_30s
    python tests/diar/dataset/generate.py --quick demo.wav   # one ~20 s two-speaker WAV (+ demo.rttm)
    python tests/diar/dataset/generate.py --update-truth     # rewrite the committed RTTMs + dataset.json
    python tests/diar/dataset/generate.py --check            # regenerated truth == committed truth
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import sys
import wave
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
RATE = 22050  # espeak-ng's output rate
KOKORO_THREADS = 2
NOISE_DBFS = -60.0
FRAME = 0.010  # seconds, for the reference turns
SILENCE_DBFS = -46.0
BRIDGE = 0.3  # inner pauses shorter than this stay inside one turn


@dataclass(frozen=True)
class Voice:
    """An espeak-ng voice ("language+variant"), its pitch (0..100), pitch
    range (0..100) and rate (words per minute)."""

    name: str
    pitch: int
    range: int
    rate: int


# No breathy variants (+f2, +f3, +f5): their noise differs from run to run.
VOICES = {
    "A": Voice("en-us+m1", 38, 50, 165),
    "B": Voice("en-us+f1", 66, 60, 175),
    "C": Voice("en-gb-scotland+m3", 30, 40, 150),
    "D": Voice("en+f4", 75, 70, 185),
    "E": Voice("en-029+m7", 50, 45, 170),
    "F": Voice("en-gb-x-rp+f4", 55, 30, 160),
}


@dataclass(frozen=True)
class KokoroVoice:
    """A Kokoro voice or weighted blend ("a:0.6,b:0.4") and its speed."""

    name: str
    speed: float


# The model's five voices are four female and one male; blends with jm_kumo
# and different speeds give further distinct speakers.
KOKORO_VOICES = {
    "K": KokoroVoice("jf_alpha", 1.0),
    "L": KokoroVoice("jm_kumo", 1.0),
    "M": KokoroVoice("jf_nezumi", 1.1),
    "N": KokoroVoice("jf_tebukuro:0.4,jm_kumo:0.6", 0.9),
    "O": KokoroVoice("jf_gongitsune", 1.0),
}


@dataclass(frozen=True)
class Spec:
    """One conversation: which voices, how long, and how it flows."""

    name: str
    speakers: tuple[str, ...]
    seconds: float
    seed: int
    overlap: float  # probability that an utterance starts before the previous one ends
    short: float  # probability of a backchannel instead of sentences
    engine: str = "espeak-ng"  # or "kokoro"


SPECS = (
    Spec("conv01_2spk_30s", ("A", "B"), 30, 101, 0.10, 0.20),
    Spec("conv02_2spk_60s_overlap", ("C", "D"), 60, 102, 0.55, 0.25),
    Spec("conv03_3spk_90s", ("A", "B", "C"), 90, 103, 0.10, 0.20),
    Spec("conv04_3spk_120s_short", ("D", "E", "F"), 120, 104, 0.15, 0.45),
    Spec("conv05_4spk_180s", ("A", "B", "C", "D"), 180, 105, 0.15, 0.25),
    Spec("conv06_4spk_300s", ("B", "C", "E", "F"), 300, 106, 0.10, 0.20),
    Spec("conv07_2spk_60s_same_gender", ("A", "E"), 60, 107, 0.10, 0.20),
    Spec("conv08_3spk_60s_overlap", ("B", "D", "F"), 60, 108, 0.35, 0.30),
    Spec("conv09_kokoro_2spk_45s", ("K", "L"), 45, 109, 0.15, 0.25, "kokoro"),
    Spec("conv10_kokoro_3spk_60s_overlap", ("L", "M", "N"), 60, 110, 0.35, 0.40, "kokoro"),
    Spec("conv11_kokoro_2spk_30s_same_gender", ("K", "O"), 30, 111, 0.10, 0.25, "kokoro"),
)
QUICK = Spec("quick_2spk_20s", ("A", "B"), 20, 7, 0.0, 0.15)

SENTENCES = (
    "I think we should start with the budget for next quarter.",
    "The train was late again this morning, so I missed the first meeting.",
    "Could you send me the report before the end of the week?",
    "We tried the new design last month and the results were mixed.",
    "My sister moved to the coast and she loves the quiet.",
    "The numbers look better than we expected.",
    "I have never seen the office this empty on a Monday.",
    "Let us look at the second option before we decide.",
    "The weather forecast says it will rain all weekend.",
    "He spent three years building that boat by hand.",
    "Honestly, I am not sure the plan will work.",
    "The library closes early on Fridays during the summer.",
    "We need more people on the support team.",
    "That restaurant on the corner has the best soup in town.",
    "I will call the supplier and ask about the delay.",
    "The children painted the fence bright yellow.",
    "Our flight leaves at seven, so we should leave the house by five.",
    "The software update fixed most of the problems.",
    "She plays the violin in a small orchestra.",
    "Nobody expected the meeting to last three hours.",
    "The garden needs water every evening in this heat.",
    "I read an interesting article about sleep and memory.",
    "Can we move the deadline to next Thursday?",
    "The museum has a new exhibition about ancient maps.",
    "We should write down every decision we make today.",
    "The old bridge will be closed for repairs until spring.",
    "My phone battery dies before lunch every single day.",
    "They opened a bakery near the station last year.",
    "I would rather walk than wait for the bus.",
    "The test results will be ready tomorrow afternoon.",
    "Please remind me to book the conference room.",
    "The river was higher than I have ever seen it.",
    "We found a cheaper way to ship the parts.",
    "His presentation was short but very clear.",
    "I forgot my umbrella at the cafe again.",
    "The new manager wants a weekly summary from each team.",
    "Mountains always look closer than they really are.",
    "The printer on the third floor is broken again.",
    "We could hire a consultant, but it would be expensive.",
    "The cat sleeps on the warm laptop whenever she can.",
)
BACKCHANNELS = (
    "Yes.",
    "Right.",
    "Okay.",
    "I see.",
    "Exactly.",
    "Sure.",
    "Really?",
    "No way.",
    "Mm hmm.",
    "Good point.",
    "Of course.",
    "Fair enough.",
)


# -- espeak-ng ---------------------------------------------------------------


class Espeak:
    """libespeak-ng in synchronous mode, collecting samples through its
    callback."""

    rate = RATE
    voices = VOICES

    _CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
    _AUDIO_OUTPUT_SYNCHRONOUS = 2
    _POS_CHARACTER = 1
    _RATE, _VOLUME, _PITCH, _RANGE = 1, 2, 3, 4

    def __init__(self) -> None:
        import espeakng_loader

        self.lib = ctypes.CDLL(espeakng_loader.get_library_path())
        data_parent = os.path.dirname(espeakng_loader.get_data_path())
        rate = self.lib.espeak_Initialize(self._AUDIO_OUTPUT_SYNCHRONOUS, 0, data_parent.encode(), 0)
        if rate != RATE:
            raise RuntimeError(f"espeak-ng runs at {rate} Hz, expected {RATE}")
        self.lib.espeak_Info.restype = ctypes.c_char_p
        self.version = self.lib.espeak_Info(None).decode()
        self._chunks: list[npt.NDArray[np.int16]] = []
        self._cb = self._CALLBACK(self._collect)  # kept alive with self
        self.lib.espeak_SetSynthCallback(self._cb)

    def _collect(self, wav: Any, n: int, _events: Any) -> int:
        if n > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        return 0

    def describe(self, voice: Any) -> dict[str, Any]:
        return dict(vars(voice))

    def say(self, voice: Any, text: str) -> npt.NDArray[np.float32]:
        if self.lib.espeak_SetVoiceByName(voice.name.encode()) != 0:
            raise RuntimeError(f"espeak-ng has no voice {voice.name}")
        for param, value in (
            (self._RATE, voice.rate),
            (self._PITCH, voice.pitch),
            (self._RANGE, voice.range),
            (self._VOLUME, 100),
        ):
            self.lib.espeak_SetParameter(param, value, 0)
        self._chunks = []
        data = text.encode() + b"\0"
        status = self.lib.espeak_Synth(data, len(data), 0, self._POS_CHARACTER, 0, 0, None, None)
        self.lib.espeak_Synchronize()
        if status != 0 or not self._chunks:
            raise RuntimeError(f"espeak-ng failed ({status}) on {text!r}")
        return np.concatenate(self._chunks).astype(np.float32) / 32768.0


# -- Kokoro ------------------------------------------------------------------


def _eliza() -> Any:
    sys.path.insert(0, str(HERE.parents[2] / "sdk"))
    import eliza

    return eliza


class Kokoro:
    """libeliza's Kokoro-82M (the default model), English G2P, no source
    noise: the same text and voice give the same samples on every run."""

    voices = KOKORO_VOICES

    def __init__(self) -> None:
        # English G2P for every voice: these Japanese voices speak English
        # text here, as they did before voices had a language.
        self.tts = _eliza().TTS(n_threads=KOKORO_THREADS, language="en-us")
        self.rate = int(self.tts.sample_rate)

    def describe(self, voice: Any) -> dict[str, Any]:
        return dict(vars(voice))

    def say(self, voice: Any, text: str) -> npt.NDArray[np.float32]:
        audio = self.tts.synthesize(text, voice=voice.name, speed=voice.speed, no_noise=True)
        if not len(audio):
            raise RuntimeError(f"Kokoro said nothing for {text!r}")
        return np.asarray(audio, dtype=np.float32)


def _kokoro_versions() -> dict[str, Any]:
    eliza = _eliza()
    from eliza import models

    path = Path(models.kokoro_model_path())
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {
        "libeliza": eliza.version(),
        "model": path.name,
        "model_sha256": digest.hexdigest(),
        "threads": KOKORO_THREADS,
        "no_noise": True,
    }


# -- conversations -------------------------------------------------------------


def _active_spans(x: npt.NDArray[np.float32], rate: int) -> list[tuple[int, int]]:
    """Non-silent stretches of one utterance, in samples."""
    hop = int(FRAME * rate)
    n = len(x) // hop
    peaks = np.abs(x[: n * hop]).reshape(n, hop).max(axis=1)
    active = np.flatnonzero(peaks > 10 ** (SILENCE_DBFS / 20))
    spans: list[tuple[int, int]] = []
    for f in active:
        a, b = int(f) * hop, (int(f) + 1) * hop
        if spans and a - spans[-1][1] < BRIDGE * rate:
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
    return spans


def make_conversation(
    spec: Spec, tts: Espeak | Kokoro
) -> tuple[npt.NDArray[np.float32], list[tuple[float, float, str]], dict[str, Any]]:
    """The mixed audio at ``tts.rate``, the reference turns (start, end,
    speaker label) sorted by start, and a description."""
    rate = tts.rate
    rng = np.random.default_rng(spec.seed)
    total = int(spec.seconds * rate)
    mix = np.zeros(total, dtype=np.float64)
    gains = {s: float(rng.uniform(0.7, 1.0)) for s in spec.speakers}
    turns: list[tuple[float, float, str]] = []
    t = int(rng.uniform(0.3, 1.0) * rate)
    prev: str | None = None
    prev_span = (0, 0)
    n_utterances = 0
    sentences = list(SENTENCES)
    rng.shuffle(sentences)
    while True:
        speaker = str(rng.choice([s for s in spec.speakers if s != prev]))
        if rng.random() < spec.short:
            text = str(rng.choice(BACKCHANNELS))
        else:
            k = 1 + int(rng.random() < 0.4)
            text = " ".join(sentences[(n_utterances + i) % len(sentences)] for i in range(k))
        audio = tts.say(tts.voices[speaker], text)
        spans = _active_spans(audio, rate)
        if not spans:
            continue
        audio = audio[spans[0][0] : spans[-1][1]]
        spans = [(a - spans[0][0], b - spans[0][0]) for a, b in spans]
        if prev is not None and rng.random() < spec.overlap:
            # Start inside the previous utterance, at most 1.5 s and half of it back.
            back = min(1.5 * rate, 0.5 * (prev_span[1] - prev_span[0]))
            t = max(prev_span[0] + int(0.3 * rate), prev_span[1] - int(rng.uniform(0.3, 1.0) * back))
        if t + len(audio) > total - int(0.3 * rate):
            break
        level = gains[speaker] * 0.1 / (float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))) + 1e-9)
        mix[t : t + len(audio)] += level * audio
        for a, b in spans:
            turns.append(((t + a) / rate, (t + b) / rate, speaker))
        prev, prev_span = speaker, (t, t + len(audio))
        n_utterances += 1
        t = t + len(audio) + int(rng.uniform(0.15, 1.2) * rate)
    mix += rng.standard_normal(total) * 10 ** (NOISE_DBFS / 20)
    peak = float(np.abs(mix).max())
    if peak > 0.95:
        mix *= 0.95 / peak
    turns.sort()
    info = {
        "name": spec.name,
        "duration": round(total / rate, 3),
        "sample_rate": rate,
        "engine": spec.engine,
        "seed": spec.seed,
        "n_speakers": len({s for _, _, s in turns}),
        "speakers": {s: tts.describe(tts.voices[s]) for s in spec.speakers},
        "n_utterances": n_utterances,
        "n_turns": len(turns),
        "speech_seconds": round(_union_length(turns), 3),
        "overlap_seconds": round(_overlap_length(turns), 3),
        "pcm_sha256": hashlib.sha256(pcm16(mix.astype(np.float32))).hexdigest(),
    }
    return mix.astype(np.float32), turns, info


def _union_length(turns: list[tuple[float, float, str]]) -> float:
    total, end = 0.0, -1.0
    for a, b, _ in sorted(turns):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _overlap_length(turns: list[tuple[float, float, str]]) -> float:
    edges = sorted([(a, 1) for a, _, _ in turns] + [(b, -1) for _, b, _ in turns])
    total, depth, last = 0.0, 0, 0.0
    for t, d in edges:
        if depth >= 2:
            total += t - last
        depth += d
        last = t
    return total


def rttm(turns: list[tuple[float, float, str]], uri: str) -> str:
    return "".join(f"SPEAKER {uri} 1 {a:.3f} {b - a:.3f} <NA> <NA> {s} <NA> <NA>\n" for a, b, s in turns)


def pcm16(audio: npt.NDArray[np.float32]) -> bytes:
    return np.clip(np.round(audio * 32767.0), -32768, 32767).astype("<i2").tobytes()


def write_wav(path: Path, audio: npt.NDArray[np.float32], rate: int = RATE) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16(audio))


def _generate(
    name: str,
) -> tuple[npt.NDArray[np.float32], list[tuple[float, float, str]], dict[str, Any]]:
    spec = next(s for s in SPECS if s.name == name)
    return make_conversation(spec, Kokoro() if spec.engine == "kokoro" else Espeak())


def _versions(kokoro: bool) -> dict[str, Any]:
    versions: dict[str, Any] = {
        "espeak_ng": Espeak().version,
        "espeakng_loader": metadata.version("espeakng-loader"),
        "numpy": np.__version__,
    }
    if kokoro:
        versions["kokoro"] = _kokoro_versions()
    return versions


def quick(path: str | os.PathLike[str]) -> list[tuple[float, float, str]]:
    """Writes a ~20 s two-speaker conversation to ``path`` (and its RTTM
    beside it) in a second or two; returns the reference turns. (The audio is
    the same on every run when this is the process's first use of espeak-ng.)"""
    out = Path(path)
    audio, turns, _ = make_conversation(QUICK, Espeak())
    write_wav(out, audio)
    out.with_suffix(".rttm").write_text(rttm(turns, out.stem))
    return turns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", nargs="?", help="directory for NAME.wav + NAME.rttm")
    parser.add_argument("--only", nargs="*", metavar="NAME", help="generate these files only")
    parser.add_argument("--quick", metavar="OUT.wav", help="write one short two-speaker WAV and exit")
    parser.add_argument("--update-truth", action="store_true", help="rewrite the committed RTTMs + JSON")
    parser.add_argument("--check", action="store_true", help="compare regenerated truth with the committed")
    args = parser.parse_args(argv)
    if args.quick:
        turns = quick(args.quick)
        print(f"{args.quick}: {len(turns)} turns, speakers {sorted({s for _, _, s in turns})}")
        return 0
    if not (args.out or args.update_truth or args.check):
        parser.error("give OUT_DIR, --quick, --update-truth or --check")
    specs = [s for s in SPECS if not args.only or s.name in args.only]
    described = []
    failures = 0
    # espeak-ng's wave generator keeps its phase from one call to the next, so
    # an utterance depends on everything synthesized before it in the process:
    # each conversation gets a fresh process to be the same on every run.
    with ProcessPoolExecutor(1, mp_context=get_context("spawn"), max_tasks_per_child=1) as pool:
        results = [pool.submit(_generate, spec.name) for spec in specs]
        versions = pool.submit(_versions, any(s.engine == "kokoro" for s in specs)).result()
        committed_doc = json.loads((HERE / "dataset.json").read_text())
        if args.check and "kokoro" in versions:
            was = committed_doc["generator"].get("kokoro", {})
            for key in ("model_sha256", "libeliza"):
                if was.get(key) != versions["kokoro"][key]:
                    print(
                        f"note: Kokoro {key} is {versions['kokoro'][key]}, dataset.json has {was.get(key)}: "
                        "the Kokoro files may differ for that reason",
                        file=sys.stderr,
                    )
        for spec, future in zip(specs, results):
            audio, turns, info = future.result()
            described.append(info)
            text = rttm(turns, spec.name)
            if args.out:
                out = Path(args.out)
                out.mkdir(parents=True, exist_ok=True)
                write_wav(out / f"{spec.name}.wav", audio, info["sample_rate"])
                (out / f"{spec.name}.rttm").write_text(text)
            if args.update_truth:
                (HERE / f"{spec.name}.rttm").write_text(text)
            if args.check:
                committed = {f["name"]: f for f in committed_doc["files"]}
                if (HERE / f"{spec.name}.rttm").read_text() != text:
                    print(f"{spec.name}: regenerated truth differs from the committed RTTM", file=sys.stderr)
                    failures += 1
                if committed.get(spec.name, {}).get("pcm_sha256") != info["pcm_sha256"]:
                    print(f"{spec.name}: regenerated audio differs from dataset.json", file=sys.stderr)
                    failures += 1
            print(
                f"{spec.name}: {info['duration']:.1f} s, {info['n_speakers']} speakers, "
                f"{info['n_turns']} turns, {info['overlap_seconds']:.1f} s overlap"
            )
    if args.update_truth and not args.only:
        doc = {"generator": versions, "files": described}
        (HERE / "dataset.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
