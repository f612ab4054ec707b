"""Writes the small goldens the Kokoro engine is held to by default:

    tests/data/kokoro_tiny.gguf         a tiny random-weight Kokoro (schema of docs/kokoro.md)
    tests/data/kokoro_tiny_golden.gguf  kokoro 0.9.4 KModel's stage outputs on it

The tiny model is KModel with a small config (ALBERT 16 wide, 2 heads, 12
applications; hidden 16; generator 16 -> 8 -> 4 channels) and the decoder
blocks KModel hardcodes at 1024 / 64 channels rebuilt 24 / 4 wide, so that
every stage runs in milliseconds. Weights are PyTorch's initialisation with
every weight_g, InstanceNorm affine and Snake alpha perturbed (as
``kokoro_ref.random_kmodel``); they go through eliza.convert.kokoro's writer
(q8_0: the AdaIN style projections are Q8_0, other matrices F16) and the
reference runs on the weights read back from the file, so the comparison is
exact up to float32 arithmetic. The converter's public entry points check
shapes against KModel's hardcoded decoder widths, hence its internal writer.

The golden file holds, per case, the input (``caseN.ids`` int32 with the pad
ids, ``caseN.style`` [256], ``golden.caseN.speed``) and KModel's stage outputs
(noise off) under the engine's stage names (``caseN.<stage>``, PyTorch
layout without the batch dimension). Header keys record the versions and
the seed. Run from the repository root:

    python tests/tts/make_kokoro_engine_golden.py
"""

from __future__ import annotations

import copy
import importlib.metadata
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "sdk"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gguf  # noqa: E402
import kokoro_ref as kr  # noqa: E402
import torch  # noqa: E402

from eliza.convert import kokoro as kconv  # noqa: E402

F32 = npt.NDArray[np.float32]

SEED = 20240
MODEL_PATH = REPO / "tests" / "data" / "kokoro_tiny.gguf"
GOLDEN_PATH = REPO / "tests" / "data" / "kokoro_tiny_golden.gguf"

# Decoder widths of the tiny model (KModel: 1024, 64, and 512 = the generator's input).
DEC_HIDDEN, DEC_RES = 24, 4

VOICE = "tiny_a"

# (ids without the pad ids, speed); the style is the voice's row len(ids) - 1.
CASES: list[tuple[list[int], float]] = [
    ([50, 83, 54, 156, 57, 135, 16, 61, 102, 68], 1.0),
    ([43, 102, 56, 51, 158, 46, 3, 16, 69, 83, 92, 156, 55, 123, 46, 58, 47, 16, 72, 135, 57, 4], 1.3),
    ([65], 0.8),
]

# The stages kept (the STFT of the source and conv_post's output are large:
# the reference tests compare them live), and those stored as float16.
GOLDEN_STAGES = (
    "bert",
    "d_en",
    "d",
    "lstm",
    "duration",
    "pred_dur",
    "F0_pred",
    "N_pred",
    "t_en",
    "dec_encode",
    "gen_in",
    "har_source",
    "audio",
)
HALF_STAGES = ("har_source", "audio")


def tiny_config() -> dict[str, Any]:
    """KModel's config for the tiny model (v1.0's vocab and istftnet rates)."""
    cfg: dict[str, Any] = copy.deepcopy(kr.kokoro_onnx_config())
    cfg.update(hidden_dim=16, max_dur=8)
    cfg["plbert"].update(
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
        embedding_size=8,
    )
    cfg["istftnet"].update(upsample_initial_channel=16)
    return cfg


def tiny_kmodel(seed: int = SEED) -> Any:
    """kokoro_ref.random_kmodel on the tiny config, its decoder blocks rebuilt
    narrow (encode, decode, asr_res) and perturbed the same way."""
    from kokoro.istftnet import AdainResBlk1d
    from torch.nn.utils import weight_norm

    cfg = tiny_config()
    model = kr.random_kmodel(seed, cfg)
    d, s = cfg["hidden_dim"], cfg["style_dim"]
    g_in = cfg["istftnet"]["upsample_initial_channel"]
    torch.manual_seed(seed + 2)
    dec = model.decoder
    dec.encode = AdainResBlk1d(d + 2, DEC_HIDDEN, s)
    dec.decode = torch.nn.ModuleList(
        [AdainResBlk1d(DEC_HIDDEN + 2 + DEC_RES, DEC_HIDDEN, s) for _ in range(3)]
        + [AdainResBlk1d(DEC_HIDDEN + 2 + DEC_RES, g_in, s, upsample=True)]
    )
    dec.asr_res = torch.nn.Sequential(weight_norm(torch.nn.Conv1d(d, DEC_RES, kernel_size=1)))
    gen = torch.Generator().manual_seed(seed + 3)
    with torch.no_grad():
        # sharper duration logits: random weights otherwise give every token the same length
        model.predictor.duration_proj.linear_layer.weight.mul_(8.0)
        # a voiced F0 (~150 Hz, above SineGen's 10 Hz threshold): random weights give |F0| ~ 1, an
        # unvoiced, constant source whose STFT phases outside bins 0 and 1 are FFT rounding noise
        model.predictor.F0_proj.weight.mul_(30.0)
        model.predictor.F0_proj.bias.fill_(150.0)
        for name, p in dec.named_parameters():
            if name.startswith(("encode.", "decode.", "asr_res.")):
                if name.endswith("weight_g") or ".norm.weight" in name:
                    p.mul_(1.0 + 0.2 * torch.rand(p.shape, generator=gen))
                elif ".norm.bias" in name:
                    p.add_(0.1 * torch.randn(p.shape, generator=gen))
    return model.eval()


def gguf_tensors(model: Any) -> dict[str, F32]:
    """The model's GGUF tensors: weight norm folded, the pooler dropped."""
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    out: dict[str, F32] = {}
    for name, value in sd.items():
        if name.startswith("bert.pooler.") or name.endswith(
            (".weight_g", ".position_ids", ".token_type_ids")
        ):
            continue
        if name.endswith(".weight_v"):
            base = name[: -len("_v")]
            out[base] = kconv.fold_weight_norm(sd[base + "_g"], value)
        else:
            out[name] = np.ascontiguousarray(value, dtype=np.float32)
    return out


def tiny_voice(seed: int = SEED) -> F32:
    """The tiny model's one voice pack, [510, 256] (style vectors of scale ~0.3)."""
    return (0.3 * np.random.default_rng(seed).standard_normal((kconv.STYLE_ROWS, 256))).astype(np.float32)


def write_model(model: Any, path: Path) -> None:
    cfg = kconv.KokoroConfig.from_dict(tiny_config())
    tensors = gguf_tensors(model)
    kconv._write(  # the public entry points check KModel's hardcoded decoder widths
        path,
        tensors,
        {VOICE: tiny_voice()},
        cfg,
        source="pth",
        weight_type="q8_0",
        voice_type="f32",
        name="kokoro tiny random (engine golden)",
        counts=(len(tensors), 0),
        progress=None,
        t0=time.perf_counter(),
    )


def load_back(model: Any, path: Path) -> None:
    """Sets the model's weights to the file's (dequantized; each folded
    weight W split into v = W, g = ||W||)."""
    stored = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type)
        stored[t.name] = np.asarray(data, dtype=np.float32).reshape(tuple(int(x) for x in reversed(t.shape)))
    sd = model.state_dict()
    new: dict[str, torch.Tensor] = {}
    for name, value in sd.items():
        if name.endswith((".weight_g", ".weight_v")):
            w = stored[name[: -len("_g")]].astype(np.float64)
            norm = np.sqrt(np.sum(w * w, axis=tuple(range(1, w.ndim)), keepdims=True))
            arr = np.where(norm == 0, 0.0, norm) if name.endswith("_g") else np.where(norm == 0, 1.0, w)
            new[name] = torch.from_numpy(arr.astype(np.float32).reshape(value.shape))
        elif name in stored:
            new[name] = torch.from_numpy(stored[name].copy())
        else:
            new[name] = value
    model.load_state_dict(new, strict=True)


def stage_outputs(
    model: Any, ids: list[int], style: F32, speed: float, f0_scale: float = 1.0
) -> dict[str, F32]:
    """KModel.forward_with_tokens (noise off) on padded ``ids``, recording the
    engine's stages (libeliza/tts/kokoro*.c, ez_kokoro_record) in PyTorch
    layout without the batch dimension. ``f0_scale`` multiplies the predicted
    F0 curve before the decoder uses it (1 + 2**-23: a last-bit change, to
    measure how much the generator amplifies such differences)."""
    seen: dict[str, torch.Tensor] = {}
    hooks = []

    def out_hook(name: str, pick: int | None = None) -> Any:
        def hook(_m: Any, _inp: Any, out: Any) -> None:
            seen[name] = out[pick] if pick is not None else out

        return hook

    def in_hook(name: str) -> Any:
        def hook(_m: Any, inp: Any) -> None:
            seen[name] = inp[0]

        return hook

    gen = model.decoder.generator
    hooks += [
        model.bert.register_forward_hook(out_hook("bert")),
        model.bert_encoder.register_forward_hook(out_hook("d_en")),
        model.predictor.text_encoder.register_forward_hook(out_hook("d")),
        model.predictor.lstm.register_forward_hook(out_hook("lstm", 0)),
        model.predictor.duration_proj.register_forward_hook(out_hook("dur_logits")),
        model.text_encoder.register_forward_hook(out_hook("t_en")),
        model.decoder.encode.register_forward_hook(out_hook("dec_encode")),
        gen.register_forward_pre_hook(in_hook("gen_in")),
        gen.m_source.register_forward_hook(out_hook("har_source", 0)),
        gen.noise_convs[0].register_forward_pre_hook(in_hook("har")),
        gen.conv_post.register_forward_hook(out_hook("conv_post")),
    ]
    f0n = model.predictor.F0Ntrain

    def record(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f0, n = f0n(x, s)
        if f0_scale != 1.0:
            f0 = f0 * f0_scale
        seen["F0_pred"], seen["N_pred"] = f0, n
        return f0, n

    model.predictor.F0Ntrain = record
    try:
        with kr.no_noise(), torch.no_grad():
            audio, dur = model.forward_with_tokens(
                torch.LongTensor([ids]), torch.from_numpy(np.array(style, np.float32).reshape(1, -1)), speed
            )
            seen["duration"] = torch.sigmoid(seen.pop("dur_logits")).sum(dim=-1) / speed
    finally:
        del model.predictor.F0Ntrain
        for h in hooks:
            h.remove()
    seen["pred_dur"] = dur.reshape(-1).float()
    seen["audio"] = audio
    return {
        k: np.ascontiguousarray(v.detach().numpy().astype(np.float32)).squeeze(0)
        if v.dim() > 1
        else v.detach().numpy().astype(np.float32)
        for k, v in seen.items()
    }


def _squeeze(stages: dict[str, F32]) -> dict[str, F32]:
    out = {}
    for k, v in stages.items():
        a = np.asarray(v, np.float32)
        while a.ndim > 1 and a.shape[-1] == 1:  # har_source [L, 1]
            a = a[..., 0]
        out[k] = np.ascontiguousarray(a.reshape(-1) if a.ndim > 2 else a)
    return out


def reference_stages(
    model: Any, ids: list[int], style: F32, speed: float, f0_scale: float = 1.0
) -> dict[str, F32]:
    """stage_outputs with every stage as a 1-D or 2-D array."""
    return _squeeze(stage_outputs(model, ids, style, speed, f0_scale))


def main() -> None:
    torch.set_num_threads(2)
    model = tiny_kmodel(SEED)
    write_model(model, MODEL_PATH)
    load_back(model, MODEL_PATH)
    pack = tiny_voice()
    w = gguf.GGUFWriter(str(GOLDEN_PATH), "kokoro-golden", use_temp_file=False)
    w.add_string("golden.script", "tests/tts/make_kokoro_engine_golden.py")
    w.add_string("golden.model", MODEL_PATH.name)
    w.add_uint32("golden.seed", SEED)
    for pkg in ("torch", "kokoro", "transformers", "numpy", "gguf"):
        w.add_string(f"golden.version.{pkg}", importlib.metadata.version(pkg))
    w.add_uint32("golden.n_cases", len(CASES))
    for i, (ids, speed) in enumerate(CASES):
        style = pack[len(ids) - 1]
        padded = [0, *ids, 0]
        stages = reference_stages(model, padded, style, speed)
        w.add_float32(f"golden.case{i}.speed", speed)
        w.add_tensor(f"case{i}.ids", np.asarray(padded, np.int32))
        w.add_tensor(f"case{i}.style", style)
        for name in GOLDEN_STAGES:
            value = stages[name]
            w.add_tensor(f"case{i}.{name}", value.astype(np.float16) if name in HALF_STAGES else value)
        print(
            f"case {i}: {len(ids)} phonemes, durations {stages['pred_dur'].astype(int).tolist()}, "
            f"{stages['audio'].size} samples"
        )
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for p in (MODEL_PATH, GOLDEN_PATH):
        print(f"{p.relative_to(REPO)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
