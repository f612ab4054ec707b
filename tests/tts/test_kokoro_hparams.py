"""Kokoro's metadata stages (tts/kokoro.c: check_kind, load_sizes,
load_generator), each with its own refusals: tests/data/kokoro_tiny.gguf
with one value patched in place (same type, same length), opened through
eliza.TTS, must fail with ELIZA_E_FORMAT naming what is wrong."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import eliza

TINY = Path(__file__).resolve().parents[1] / "data" / "kokoro_tiny.gguf"
GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 8, 9


def _value_at(data: bytes | bytearray, key: str) -> int:
    """The offset of the value type that follows metadata key ``key``."""
    name = key.encode()
    at = data.find(struct.pack("<Q", len(name)) + name)
    assert at >= 0, key
    return at + 8 + len(name)


def _patch(data: bytearray, key: str, value: int | float | str | list[int]) -> None:
    at = _value_at(data, key)
    (vtype,) = struct.unpack_from("<I", data, at)
    if isinstance(value, list):
        etype, count = struct.unpack_from("<IQ", data, at + 4)
        assert vtype == GGUF_ARRAY and etype == GGUF_INT32 and count == len(value), key
        struct.pack_into(f"<{count}i", data, at + 16, *value)
    elif isinstance(value, str):
        (length,) = struct.unpack_from("<Q", data, at + 4)
        assert vtype == GGUF_STRING and length == len(value), key
        data[at + 12 : at + 12 + length] = value.encode()
    elif isinstance(value, float):
        assert vtype == GGUF_FLOAT32, key
        struct.pack_into("<f", data, at + 4, value)
    else:
        assert vtype == GGUF_UINT32, key
        struct.pack_into("<I", data, at + 4, value)


# key -> (patched value, what the message says); the tiny model's values:
# hidden 16, style 128, text kernel 5, ALBERT hidden 16 over 2 heads, n_fft
# 20, hop 5, upsample rates [10, 6] with kernels [20, 12] from 16 channels,
# resblock kernels [3, 7, 11]
REFUSED: dict[str, tuple[dict[str, int | float | str | list[int]], str]] = {
    "gate order": ({"kokoro.lstm_gate_order": "iofc"}, "gate order 'iofc' is not supported"),
    "style size": ({"kokoro.style_dim": 64}, "style_dim 64"),
    "hidden size": ({"kokoro.hidden_dim": 18}, "hidden_dim 18 is not a multiple of 4"),
    "even text kernel": ({"kokoro.text_encoder_kernel_size": 4}, "text_encoder_kernel_size 4 is even"),
    "ALBERT heads": ({"kokoro.plbert.num_attention_heads": 3}, "not a multiple of its 3 heads"),
    "odd n_fft": ({"kokoro.istftnet.n_fft": 21}, "n_fft must be even"),
    "hop past n_fft": ({"kokoro.istftnet.hop_size": 30}, "n_fft must be even and at least the hop"),
    "norm epsilon": ({"kokoro.plbert.layer_norm_eps": 1.0}, "layer_norm_eps"),
    "upsample kernel": (
        {"kokoro.istftnet.upsample_kernel_sizes": [20, 5]}, "kernel 5 is shorter than its rate 6"
    ),
    "upsampling": (
        {"kokoro.istftnet.upsample_rates": [64, 13], "kokoro.istftnet.upsample_kernel_sizes": [64, 13]},
        "4160 samples per frame",
    ),
    "channels": ({"kokoro.istftnet.upsample_initial_channel": 18}, "18 does not halve 2 times"),
    "even resblock kernel": (
        {"kokoro.istftnet.resblock_kernel_sizes": [3, 7, 12]}, "resblock kernel 2 is even"
    ),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_kokoro_hparams_refused(what: str, tmp_path: Path) -> None:
    patches, message = REFUSED[what]
    data = bytearray(TINY.read_bytes())
    for key, value in patches.items():
        _patch(data, key, value)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(eliza.FormatError, match=message):
        eliza.TTS(bad)


def test_the_unpatched_file_opens() -> None:
    # the patches above are what fails, not the file
    with eliza.TTS(TINY, n_threads=1) as tts:
        assert tts.sample_rate == 24000
