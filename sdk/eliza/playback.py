"""Audio to the sound card as it is made, through ``sounddevice`` (the
optional extra ``libeliza[play]``; PortAudio underneath).

Example::

    player, why_not = eliza.playback.open_player(tts.sample_rate)
    if player is None:
        print(why_not)
    else:
        with player:
            for chunk in tts.stream("Hello there. How are you?"):
                player.write(chunk.audio)   # returns at once; plays in the background
"""

from __future__ import annotations

import collections
import importlib
import threading
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Player", "open_player"]


class Player:
    """A mono float32 output stream fed from a queue: :meth:`write` queues
    samples and returns, the sound card's callback takes them; leaving the
    ``with`` block (or :meth:`close`) waits until everything queued has
    played."""

    def __init__(self, sd: Any, sample_rate: int) -> None:
        self._pending: collections.deque[npt.NDArray[np.float32]] = collections.deque()
        self._lock = threading.Lock()
        self._drained = threading.Event()
        self._drained.set()
        self._stream = sd.OutputStream(
            samplerate=sample_rate, channels=1, dtype="float32", callback=self._callback
        )
        self._stream.start()

    def _callback(self, outdata: Any, frames: int, time: Any, status: Any) -> None:
        out = outdata.reshape(-1)
        filled = 0
        with self._lock:
            while filled < frames and self._pending:
                head = self._pending[0]
                take = min(frames - filled, len(head))
                out[filled : filled + take] = head[:take]
                filled += take
                if take == len(head):
                    self._pending.popleft()
                else:
                    self._pending[0] = head[take:]
            if not self._pending:
                self._drained.set()
        out[filled:] = 0

    def write(self, audio: npt.ArrayLike) -> None:
        """Queues mono float samples (clipped to [-1, 1]) for playing."""
        samples = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
        if samples.size:
            with self._lock:
                self._pending.append(samples)
                self._drained.clear()

    def close(self) -> None:
        """Waits for the queued audio to play, then closes the stream."""
        self._drained.wait()
        self._stream.stop()
        self._stream.close()

    def __enter__(self) -> Player:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            with self._lock:
                self._pending.clear()
                self._drained.set()
        self.close()


def open_player(sample_rate: int) -> tuple[Player | None, str]:
    """A started :class:`Player`, or None and why not (sounddevice is not
    installed, PortAudio is missing, or there is no output device)."""
    try:
        sd = importlib.import_module("sounddevice")
    except ImportError:
        return None, "sounddevice is not installed (pip install 'libeliza[play]')"
    except OSError as e:  # sounddevice imports, but PortAudio does not load
        return None, f"PortAudio cannot be loaded ({e})"
    try:
        sd.query_devices(kind="output")
        return Player(sd, sample_rate), ""
    except (sd.PortAudioError, ValueError) as e:  # no default output device, or none that takes the rate
        return None, f"no sound card to play on ({e})"
