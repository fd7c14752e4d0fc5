"""Finetuning data: Alpaca-style instruction records, one JSON object a line.

Each line is ``{"instruction": str, "input": str (optional, may be ""), "output": str}``.
A record becomes bos + Alpaca's prompt + the output + eos, cut to seq_len + 1
tokens; the loss falls on the response only (standard SFT), so targets are
-100 on the prompt and on padding. A micro-batch is padded to its longest
sample, not to seq_len, which is what makes finetuning throughput differ from
pretraining's, and why each batch reports its real and padded token counts.

The tokenizer is byte-level (UTF-8 bytes, id = byte + 3; 0 pad, 1 bos, 2 eos):
workers cannot download a vocabulary, and bytes need none, cover every text,
and cost what a tokenizer costs here, nothing. The model's vocabulary needs
at least 259 entries; larger ones simply leave ids unused.

Sample order is the same seed-derived per-epoch permutation as the token
files', indexed by global sample, so data-parallel ranks partition exactly the
batch one process would see.

NumPy only (no framework): both workers batch through ``training/data/batches.py``.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Optional

import numpy as np

from training.data.sampling import GlobalSampler
from training.data.token_file import DataFormatError, EpochShuffle

PAD, BOS, EOS = 0, 1, 2
BYTE_OFFSET = 3
MIN_VOCAB = BYTE_OFFSET + 256
IGNORE_INDEX = -100  # torch.nn.functional.cross_entropy's default ignore_index

_PROMPT_WITH_INPUT = (
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")
_PROMPT_NO_INPUT = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n")


def encode(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64) + BYTE_OFFSET


def prompt(instruction: str, input_text: str = "") -> str:
    """Alpaca's prompt (Stanford alpaca train.py); the input section is left out when the input is empty."""
    template = _PROMPT_WITH_INPUT if input_text else _PROMPT_NO_INPUT
    return template.format(instruction=instruction, input=input_text)


class InstructionDataset(GlobalSampler):
    """Padded SFT micro-batches of (inputs, targets) from an Alpaca-style jsonl file."""

    def __init__(self, path: str | Path | None, vocab_size: int, seq_len: int, micro_batch_size: int, seed: int,
                 dp_rank: int = 0, dp_size: int = 1, pad_to_multiple_of: int = 8,
                 records: Optional[list[dict]] = None):
        """Reads ``path``, or (path None) trains on the given ``records``."""
        self.path = Path(path) if path is not None else None
        if vocab_size < MIN_VOCAB:
            raise DataFormatError(f"{self.path}: the built-in byte tokenizer needs vocab_size >= {MIN_VOCAB} "
                                  f"(3 specials + 256 bytes), got {vocab_size}; raise model.vocab_size")
        super().__init__(vocab_size, seq_len, micro_batch_size, seed, dp_rank, dp_size)
        self.pad_to_multiple_of = pad_to_multiple_of
        self.last_real_tokens = self.last_padded_tokens = 0
        self.records = [self._tokenize(r) for r in (_read(self.path) if self.path is not None else records)]
        self._order = EpochShuffle(len(self.records), seed)

    @property
    def description(self) -> dict:
        return {"path": str(self.path) if self.path else "generated", "records": len(self.records),
                "tokenizer": "bytes"}

    def _tokenize(self, record: dict) -> tuple[np.ndarray, int]:
        """The record's tokens (at most seq_len + 1) and how many of them are prompt (bos included)."""
        head = np.concatenate([[BOS], encode(prompt(record["instruction"], record.get("input", "")))])
        tokens = np.concatenate([head, encode(record["output"]), [EOS]])[:self.seq_len + 1]
        return tokens, min(len(head), len(tokens))

    def sample(self, index: int) -> tuple[np.ndarray, int]:
        return self.records[self._order(index)]

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's next micro-batch as int64 arrays (inputs, targets), padded on the right."""
        samples = [self.sample(index) for index in self.next_indices()]
        longest = max(len(tokens) - 1 for tokens, _ in samples)
        multiple = self.pad_to_multiple_of
        width = min(-(-longest // multiple) * multiple, self.seq_len)
        inputs = np.full((len(samples), width), PAD, dtype=np.int64)
        targets = np.full((len(samples), width), IGNORE_INDEX, dtype=np.int64)
        for row, (tokens, prompt_len) in enumerate(samples):
            n = len(tokens) - 1
            inputs[row, :n] = tokens[:-1]
            targets[row, prompt_len - 1:n] = tokens[prompt_len:]  # target t is token t + 1
        self.last_real_tokens = sum(len(tokens) - 1 for tokens, _ in samples)
        self.last_padded_tokens = int(inputs.size)
        return inputs, targets


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        raise DataFormatError(f"{path}: not found; expected an Alpaca-style jsonl file "
                              "(write a sample with `python -m training.data.make_dataset alpaca`)")
    records = []
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError as error:  # JSONDecodeError, and UnicodeDecodeError for non-UTF-8 bytes
            raise DataFormatError(f"{where}: not valid JSON ({error}); write one JSON object a line") from error
        if not isinstance(record, dict):
            raise DataFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
        for key in ("instruction", "output"):
            if key not in record:
                raise DataFormatError(f"{where}: missing key {key!r}; each record needs 'instruction' and "
                                      "'output' (and optionally 'input')")
        for key in ("instruction", "input", "output"):
            if key in record and not isinstance(record[key], str):
                raise DataFormatError(f"{where}: {key!r} must be a string, got {type(record[key]).__name__}")
        records.append(record)
    if not records:
        raise DataFormatError(f"{path}: no records; expected one JSON object a line with 'instruction' and "
                              "'output' keys")
    return records


_WORDS = ("the", "model", "data", "token", "learns", "quickly", "river", "blue", "seven", "compute", "graph",
          "tensor", "gradient", "write", "short", "poem", "about", "list", "explain", "why", "summarize",
          "translate", "café", "naïve", "日本語", "über", "and", "of", "a", "benchmark")


def alpaca_sample(n: int, seed: int = 0) -> list[dict]:
    """``n`` deterministic records of random words, varied lengths, some with empty input."""
    rng = random.Random(seed)

    def words(low: int, high: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))

    return [{"instruction": words(3, 15), "input": words(2, 30) if rng.random() < 0.5 else "",
             "output": words(1, 80)} for _ in range(n)]


def write_alpaca_sample(path: str | Path, n: int, seed: int = 0) -> Path:
    """``alpaca_sample`` as a jsonl file, for tests and demos."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for record in alpaca_sample(n, seed):
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
