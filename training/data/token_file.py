"""Pretraining tokens from disk, in PaddleNLP's ``<prefix>_ids.npy`` + ``<prefix>_idx.npz`` format.

The format is the one PaddleNLP's ``create_pretraining_data.py`` writes and its
GPT loaders read (ppfleetx ``GPTDataset``, ``CompatibleIndexedDataset``), so a
file prepared for PaddleNLP (e.g. ``gpt_en_dataset_300m``) trains here as is:

* ``<prefix>_ids.npy``: one flat 1-D array, the token ids of every document
  concatenated; ``uint16`` when every id fits (vocabularies up to 2**16),
  else ``int32``. Loaded memory-mapped, so its size is bounded by the disk.
* ``<prefix>_idx.npz`` (``np.savez``, uncompressed):
  ``lens`` int32, the length in tokens of each sentence, and ``sum(lens)`` must
  equal ``len(ids)``; the only key the GPT loader reads. A GPT corpus is not
  split into sentences, so there one sentence is one document.
  ``docs`` int64, ``len(documents) + 1`` cumulative sentence counts from 0:
  document ``d`` is sentences ``docs[d]:docs[d + 1]``, and ``docs[-1] == len(lens)``.
  ``sents`` int64, ``len(lens) + 1`` cumulative token counts from 0: where each
  sentence starts in ``ids``.

Samples are GPT-style windows of ``seq_len + 1`` tokens over the concatenated
stream, crossing document boundaries, stepping by ``seq_len`` (so every token
is a target once per epoch), in a seed-derived order that is drawn afresh each
epoch. A sample depends only on its global index, so data-parallel ranks
together read exactly what one process with the whole batch reads.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from training.data.sampling import GlobalSampler

_SCAN_CHUNK = 1 << 24  # tokens per slice when scanning the ids for range, to bound memory


class DataFormatError(ValueError):
    """A dataset file that cannot be trained on; the message names the file and the fix."""


class EpochShuffle:
    """Global sample index -> item index: a seed-derived permutation per epoch, wrapping over epochs."""

    def __init__(self, n_items: int, seed: int):
        self.n_items, self.seed = n_items, seed
        self._epoch, self._order = -1, np.empty(0, dtype=np.int64)

    def __call__(self, index: int) -> int:
        epoch, position = divmod(index, self.n_items)
        if epoch != self._epoch:  # indices only grow, so one cached epoch suffices
            rng = np.random.default_rng([self.seed % 2**64, epoch])
            self._epoch, self._order = epoch, rng.permutation(self.n_items)
        return int(self._order[position])


def _paths(prefix: str | Path) -> tuple[Path, Path]:
    return Path(f"{prefix}_ids.npy"), Path(f"{prefix}_idx.npz")


def _ids_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.int32)


def write_token_dataset(prefix: str | Path, documents: Sequence[np.ndarray],
                        vocab_size: int) -> tuple[Path, Path]:
    """Write ``documents`` (1-D arrays of token ids) as ``<prefix>_ids.npy`` and ``<prefix>_idx.npz``."""
    if not documents:
        raise ValueError("no documents to write")
    docs = [np.asarray(d).reshape(-1) for d in documents]
    for number, doc in enumerate(docs):
        if doc.size == 0:  # Megatron-lineage loaders read a zero length as a document separator
            raise ValueError(f"document {number} is empty")
        if doc.min() < 0 or doc.max() >= vocab_size:
            raise ValueError(f"document {number} has token ids outside [0, {vocab_size})")
    lens = np.array([d.size for d in docs], dtype=np.int32)
    ids_path, idx_path = _paths(prefix)
    ids_path.parent.mkdir(parents=True, exist_ok=True)
    np.save(ids_path, np.concatenate(docs).astype(_ids_dtype(vocab_size)))
    np.savez(idx_path, lens=lens,
             sents=np.concatenate([[0], np.cumsum(lens, dtype=np.int64)]),
             docs=np.arange(len(docs) + 1, dtype=np.int64))
    return ids_path, idx_path


def generate_token_dataset(prefix: str | Path, vocab_size: int, n_documents: int, seed: int = 0,
                           min_len: int = 16, max_len: int = 1024) -> tuple[Path, Path]:
    """Random documents of uniform random ids and lengths in [min_len, max_len]: a stand-in corpus."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len, size=n_documents, endpoint=True)
    return write_token_dataset(prefix, [rng.integers(0, vocab_size, size=n) for n in lengths], vocab_size)


class TokenFileDataset(GlobalSampler):
    """Micro-batches of (inputs, targets) from a token dataset; NumPy only, so Paddle workers need no torch."""

    def __init__(self, prefix: str | Path, vocab_size: int, seq_len: int, micro_batch_size: int, seed: int,
                 dp_rank: int = 0, dp_size: int = 1):
        super().__init__(vocab_size, seq_len, micro_batch_size, seed, dp_rank, dp_size)
        self.prefix = str(prefix)
        self.ids, self.n_documents = _load(Path(self.prefix), vocab_size, seq_len)
        self.samples_per_epoch = (len(self.ids) - 1) // seq_len
        self._order = EpochShuffle(self.samples_per_epoch, seed)

    @property
    def description(self) -> dict:
        return {"path": self.prefix, "documents": self.n_documents, "tokens": len(self.ids),
                "dtype": str(self.ids.dtype)}

    def sample(self, index: int) -> np.ndarray:
        start = self._order(index) * self.seq_len
        return self.ids[start:start + self.seq_len + 1].astype(np.int64)

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, targets) as int64 NumPy arrays: every framework reads the same file the same way."""
        tokens = np.stack([self.sample(index) for index in self.next_indices()])
        return tokens[:, :-1], tokens[:, 1:]


def _load(prefix: Path, vocab_size: int, seq_len: int) -> tuple[np.ndarray, int]:
    """The memory-mapped ids and the document count, after every check that is cheap enough to run."""
    ids_path, idx_path = _paths(prefix)
    for path in (ids_path, idx_path):
        if not path.is_file():
            raise DataFormatError(
                f"{path}: not found; a token dataset is the pair <prefix>_ids.npy + <prefix>_idx.npz, given "
                f"by its prefix ({prefix}); write one with `python -m training.data.make_dataset tokens`")
    try:
        ids = np.load(ids_path, mmap_mode="r")
        with np.load(idx_path) as index:
            keys = set(index.files)
            lens = index["lens"] if "lens" in keys else None
            docs = index["docs"] if "docs" in keys else None
    except (OSError, ValueError) as error:
        raise DataFormatError(f"{ids_path} / {idx_path}: not a readable .npy / .npz ({error}); "
                              "regenerate the pair") from error
    if lens is None:
        raise DataFormatError(f"{idx_path}: no 'lens' array (keys: {sorted(keys)}); it must hold each "
                              "document's length in tokens, as PaddleNLP's create_pretraining_data.py writes")
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise DataFormatError(f"{ids_path}: expected a 1-D integer array of token ids, got {ids.dtype} "
                              f"{ids.shape}; save the concatenated ids with np.save")
    if int(lens.sum(dtype=np.int64)) != len(ids):
        raise DataFormatError(f"{idx_path}: sum(lens) = {int(lens.sum(dtype=np.int64))} but {ids_path.name} "
                              f"holds {len(ids)} tokens; the two files are from different runs, regenerate both")
    if docs is not None and (len(docs) == 0 or int(docs[-1]) != len(lens)):
        raise DataFormatError(f"{idx_path}: 'docs' must end at len(lens) = {len(lens)}; regenerate both files")
    if len(ids) < seq_len + 1:
        raise DataFormatError(f"{ids_path}: {len(ids)} tokens, fewer than one sample of seq_len + 1 = "
                              f"{seq_len + 1}; use more data or a shorter model.seq_len")
    _check_range(ids, ids_path, vocab_size)
    return ids, len(docs) - 1 if docs is not None else len(lens)


def _check_range(ids: np.ndarray, path: Path, vocab_size: int) -> None:
    for start in range(0, len(ids), _SCAN_CHUNK):
        chunk = ids[start:start + _SCAN_CHUNK]
        if chunk.min() < 0 or chunk.max() >= vocab_size:
            offset = start + int(np.argmax((chunk < 0) | (chunk >= vocab_size)))
            raise DataFormatError(
                f"{path}: token id {int(ids[offset])} at offset {offset} is outside [0, vocab_size = "
                f"{vocab_size}); set model.vocab_size to the tokenizer's vocabulary size or re-tokenize")
