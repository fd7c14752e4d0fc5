"""Real-data sources: the PaddleNLP token format, Alpaca SFT batches, and the generator CLI."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.conftest import ROOT
from training.data import make_dataset
from training.data.instruction import (BOS, EOS, IGNORE_INDEX, MIN_VOCAB, PAD, InstructionDataset, encode, prompt,
                                       write_alpaca_sample)
from training.data.token_file import (DataFormatError, TokenFileDataset, generate_token_dataset,
                                      write_token_dataset)


# --- token files -----------------------------------------------------------------------------------------------

def test_write_round_trip_matches_paddlenlp_layout(tmp_path):
    docs = [np.array([5, 6, 7]), np.array([1]), np.array([9, 9, 0, 4])]
    ids_path, idx_path = write_token_dataset(tmp_path / "c", docs, vocab_size=10)
    assert (ids_path.name, idx_path.name) == ("c_ids.npy", "c_idx.npz")
    ids = np.load(ids_path, mmap_mode="r")
    assert ids.dtype == np.uint16 and ids.tolist() == [5, 6, 7, 1, 9, 9, 0, 4]
    with np.load(idx_path) as index:
        assert set(index.files) == {"lens", "sents", "docs"}
        assert index["lens"].dtype == np.int32 and index["lens"].tolist() == [3, 1, 4]
        assert index["sents"].tolist() == [0, 3, 4, 8]
        assert index["docs"].dtype == np.int64 and index["docs"].tolist() == [0, 1, 2, 3]


def test_large_vocabulary_is_stored_as_int32(tmp_path):
    ids_path, _ = write_token_dataset(tmp_path / "c", [np.array([70_000, 3])], vocab_size=100_000)
    assert np.load(ids_path).dtype == np.int32
    ids_path, _ = write_token_dataset(tmp_path / "d", [np.array([65_535])], vocab_size=65_536)
    assert np.load(ids_path).dtype == np.uint16


def test_generated_dataset_is_deterministic_and_in_range(tmp_path):
    a = generate_token_dataset(tmp_path / "a", vocab_size=50, n_documents=20, seed=3, min_len=4, max_len=9)
    b = generate_token_dataset(tmp_path / "b", vocab_size=50, n_documents=20, seed=3, min_len=4, max_len=9)
    assert np.array_equal(np.load(a[0]), np.load(b[0]))
    lens = np.load(a[1])["lens"]
    assert len(lens) == 20 and lens.min() >= 4 and lens.max() <= 9
    assert np.load(a[0]).max() < 50


def _stream(tmp_path, n_tokens=103, vocab=97):
    """A single document 0, 1, 2, ... so every window's content tells where it came from."""
    write_token_dataset(tmp_path / "s", [np.arange(n_tokens) % vocab], vocab)
    return tmp_path / "s", np.arange(n_tokens) % vocab


def test_windows_are_contiguous_slices_covering_the_stream_once_per_epoch(tmp_path):
    prefix, stream = _stream(tmp_path)
    data = TokenFileDataset(prefix, vocab_size=97, seq_len=10, micro_batch_size=1, seed=0)
    assert data.samples_per_epoch == 10  # (103 - 1) // 10
    starts = []
    for i in range(data.samples_per_epoch):
        window = data.sample(i)
        assert window.dtype == np.int64 and len(window) == 11
        start = int(np.flatnonzero(stream == window[0])[0])
        assert np.array_equal(window, stream[start:start + 11])
        starts.append(start)
    assert sorted(starts) == list(range(0, 100, 10))


def test_windows_cross_document_boundaries(tmp_path):
    write_token_dataset(tmp_path / "d", [np.arange(0, 7), np.arange(7, 13), np.arange(13, 40)], vocab_size=40)
    data = TokenFileDataset(tmp_path / "d", vocab_size=40, seq_len=8, micro_batch_size=1, seed=0)
    windows = {tuple(data.sample(i).tolist()) for i in range(data.samples_per_epoch)}
    assert tuple(range(0, 9)) in windows and tuple(range(8, 17)) in windows


def test_batches_are_shifted_int64_arrays(tmp_path):
    prefix, _ = _stream(tmp_path)
    inputs, targets = TokenFileDataset(prefix, 97, seq_len=10, micro_batch_size=3, seed=1).next_batch()
    assert inputs.dtype == targets.dtype == np.int64  # framework-neutral: torch and paddle wrap them
    assert inputs.shape == targets.shape == (3, 10)
    assert np.array_equal(inputs[:, 1:], targets[:, :-1])


def test_token_data_parallel_ranks_partition_the_one_process_batch(tmp_path):
    generate_token_dataset(tmp_path / "g", vocab_size=64, n_documents=30, seed=0, min_len=5, max_len=40)
    whole = TokenFileDataset(tmp_path / "g", 64, seq_len=16, micro_batch_size=4, seed=7)
    ranks = [TokenFileDataset(tmp_path / "g", 64, seq_len=16, micro_batch_size=2, seed=7, dp_rank=r, dp_size=2)
             for r in range(2)]
    for _ in range(5):
        parts = [rank.next_batch() for rank in ranks]
        inputs, targets = whole.next_batch()
        assert np.array_equal(np.concatenate([p[0] for p in parts]), inputs)
        assert np.array_equal(np.concatenate([p[1] for p in parts]), targets)


def test_epochs_wrap_with_a_fresh_order(tmp_path):
    prefix, _ = _stream(tmp_path, n_tokens=301)
    data = TokenFileDataset(prefix, 97, seq_len=10, micro_batch_size=1, seed=0)
    n = data.samples_per_epoch
    epoch = [tuple(data.sample(i).tolist()) for i in range(3 * n)]
    first, second, third = epoch[:n], epoch[n:2 * n], epoch[2 * n:]
    assert set(first) == set(second) == set(third) and len(set(first)) == n
    assert first != second  # reshuffled, not replayed
    again = TokenFileDataset(prefix, 97, seq_len=10, micro_batch_size=1, seed=0)
    assert [tuple(again.sample(i).tolist()) for i in (2 * n + 1, 1)] == [third[1], first[1]]
    other_seed = TokenFileDataset(prefix, 97, seq_len=10, micro_batch_size=1, seed=1)
    assert [tuple(other_seed.sample(i).tolist()) for i in range(n)] != first


def test_description(tmp_path):
    write_token_dataset(tmp_path / "c", [np.arange(20), np.arange(30)], vocab_size=50)
    data = TokenFileDataset(tmp_path / "c", 50, seq_len=8, micro_batch_size=1, seed=0)
    assert data.description == {"path": str(tmp_path / "c"), "documents": 2, "tokens": 50, "dtype": "uint16"}


def _corrupt(tmp_path, ids=None, **index):
    prefix = tmp_path / "bad"
    write_token_dataset(prefix, [np.arange(40)], vocab_size=50)
    if ids is not None:
        np.save(f"{prefix}_ids.npy", ids)
    if index:
        np.savez(f"{prefix}_idx.npz", **index)
    return prefix


@pytest.mark.parametrize("case, culprit, words", [
    ("no ids", "bad_ids.npy", "not found"),
    ("no idx", "bad_idx.npz", "not found"),
    ("no lens", "bad_idx.npz", "'lens'"),
    ("lens mismatch", "bad_idx.npz", "sum(lens)"),
    ("docs mismatch", "bad_idx.npz", "'docs'"),
    ("id too large", "bad_ids.npy", "vocab_size"),
    ("negative id", "bad_ids.npy", "vocab_size"),
    ("too short", "bad_ids.npy", "seq_len"),
    ("not 1-D", "bad_ids.npy", "1-D"),
    ("garbage", "bad_ids.npy", "readable"),
])
def test_token_format_errors_name_the_file(tmp_path, case, culprit, words):
    seq_len = 8
    if case == "no ids":
        prefix = _corrupt(tmp_path)
        (tmp_path / "bad_ids.npy").unlink()
    elif case == "no idx":
        prefix = _corrupt(tmp_path)
        (tmp_path / "bad_idx.npz").unlink()
    elif case == "no lens":
        prefix = _corrupt(tmp_path, docs=np.array([0, 1]))
    elif case == "lens mismatch":
        prefix = _corrupt(tmp_path, lens=np.array([39], dtype=np.int32))
    elif case == "docs mismatch":
        prefix = _corrupt(tmp_path, lens=np.array([40], dtype=np.int32), docs=np.array([0, 2]))
    elif case == "id too large":
        prefix = _corrupt(tmp_path, ids=np.concatenate([np.arange(39), [50]]).astype(np.uint16))
    elif case == "negative id":
        prefix = _corrupt(tmp_path, ids=np.concatenate([[-1], np.arange(39)]).astype(np.int32))
    elif case == "too short":
        prefix, seq_len = _corrupt(tmp_path), 40
    elif case == "not 1-D":
        prefix = _corrupt(tmp_path, ids=np.arange(40).reshape(4, 10))
    else:
        prefix = _corrupt(tmp_path)
        (tmp_path / "bad_ids.npy").write_bytes(b"not numpy")
    with pytest.raises(DataFormatError) as caught:
        TokenFileDataset(prefix, vocab_size=50, seq_len=seq_len, micro_batch_size=1, seed=0)
    assert culprit in str(caught.value) and words in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_range_scan_spans_chunks(tmp_path, monkeypatch):
    import training.data.token_file as token_file
    monkeypatch.setattr(token_file, "_SCAN_CHUNK", 7)  # many chunks; the bad id sits in a late one
    prefix = _corrupt(tmp_path, ids=np.concatenate([np.arange(37), [60], [1, 2]]).astype(np.uint16))
    with pytest.raises(DataFormatError, match="offset 37"):
        TokenFileDataset(prefix, vocab_size=50, seq_len=8, micro_batch_size=1, seed=0)


# --- instruction data ------------------------------------------------------------------------------------------

def _next(data: InstructionDataset) -> tuple[torch.Tensor, torch.Tensor]:
    """The next micro-batch, checked framework-neutral (int64 NumPy: both workers share it), as tensors."""
    inputs, targets = data.next_batch()
    assert isinstance(inputs, np.ndarray) and inputs.dtype == targets.dtype == np.int64
    return torch.from_numpy(inputs), torch.from_numpy(targets)


def _records(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def test_byte_tokenizer_and_alpaca_prompt():
    assert encode("A é").tolist() == [65 + 3, 32 + 3, 0xC3 + 3, 0xA9 + 3]
    assert prompt("Do it", "").endswith("### Instruction:\nDo it\n\n### Response:\n")
    assert "### Input:" not in prompt("Do it")
    assert prompt("Do it", "ctx").endswith("### Instruction:\nDo it\n\n### Input:\nctx\n\n### Response:\n")


def test_targets_cover_exactly_the_response(tmp_path):
    path = _records(tmp_path / "r.jsonl", [{"instruction": "Say hi", "input": "", "output": "hi üü"}])
    data = InstructionDataset(path, vocab_size=300, seq_len=256, micro_batch_size=1, seed=0)
    inputs, targets = _next(data)
    head = [BOS, *encode(prompt("Say hi")).tolist()]
    tokens = head + encode("hi üü").tolist() + [EOS]
    n = len(tokens) - 1
    assert n % 8  # so rounding the width up is visible
    assert inputs[0, :n].tolist() == tokens[:-1]
    assert targets[0, :len(head) - 1].eq(IGNORE_INDEX).all()
    assert targets[0, len(head) - 1:n].tolist() == tokens[len(head):]
    assert inputs[0, n:].eq(PAD).all() and targets[0, n:].eq(IGNORE_INDEX).all()
    assert data.last_real_tokens == n and data.last_padded_tokens == inputs.shape[1]
    assert inputs.shape[1] % 8 == 0 and inputs.shape[1] - n < 8


def _prompt_end(row: list[int]) -> int:
    """Tokens up to and including the prompt's closing "### Response:\\n", found in the row itself."""
    marker = encode("### Response:\n").tolist()
    ends = [i + len(marker) for i in range(len(row) - len(marker) + 1) if row[i:i + len(marker)] == marker]
    return ends[0] if ends else len(row) + 1  # a prompt cut by seq_len: nothing is supervised


@pytest.mark.parametrize("seq_len", [384, 1024])  # 384 truncates (in prompt or response), 1024 does not
def test_padding_supervision_and_token_counts_per_micro_batch(tmp_path, seq_len):
    path = write_alpaca_sample(tmp_path / "a.jsonl", 40, seed=1)
    data = InstructionDataset(path, vocab_size=512, seq_len=seq_len, micro_batch_size=4, seed=2)
    kinds = {"whole" if len(t) <= seq_len else "prompt cut" if p == len(t) else "response cut" for t, p in data.records}
    assert kinds == ({"whole", "prompt cut", "response cut"} if seq_len == 384 else {"whole"})
    for _ in range(12):
        inputs, targets = _next(data)
        width = inputs.shape[1]
        assert width % 8 == 0 and width <= seq_len
        longest = int(inputs.ne(PAD).sum(1).max())
        assert width == min(-(-longest // 8) * 8, seq_len)  # the longest sample, rounded up to 8, capped
        real = inputs.ne(PAD)  # no real token is 0: bos is 1 and bytes start at 3
        assert data.last_real_tokens == int(real.sum()) and data.last_padded_tokens == 4 * width
        assert targets[~real].eq(IGNORE_INDEX).all()  # padding is never supervised
        for row in range(4):
            n = int(real[row].sum())
            assert real[row, :n].all()  # padding is on the right only
            prompt_len = _prompt_end(inputs[row, :n].tolist())
            assert targets[row, :prompt_len - 1].eq(IGNORE_INDEX).all()
            assert targets[row, prompt_len - 1:n].ne(IGNORE_INDEX).all()
            assert torch.equal(targets[row, :n - 1][targets[row, :n - 1] != IGNORE_INDEX],
                               inputs[row, 1:n][targets[row, :n - 1] != IGNORE_INDEX])
        assert int(inputs.max()) < 512 and int(targets.max()) < 512


def test_short_seq_len_caps_padding(tmp_path):
    path = write_alpaca_sample(tmp_path / "a.jsonl", 10, seed=0)
    data = InstructionDataset(path, vocab_size=MIN_VOCAB, seq_len=12, micro_batch_size=3, seed=0)
    inputs, targets = _next(data)
    assert inputs.shape == (3, 12) and targets.eq(IGNORE_INDEX).all()  # the prompt alone fills the window


def _pad(t: torch.Tensor, width: int, value: int) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)


def test_instruction_data_parallel_ranks_partition_the_one_process_batch(tmp_path):
    path = write_alpaca_sample(tmp_path / "a.jsonl", 13, seed=4)  # 13: micro-batches straddle epochs
    whole = InstructionDataset(path, 300, seq_len=512, micro_batch_size=4, seed=5)
    ranks = [InstructionDataset(path, 300, seq_len=512, micro_batch_size=2, seed=5, dp_rank=r, dp_size=2)
             for r in range(2)]
    for _ in range(10):
        parts = [_next(rank) for rank in ranks]
        inputs, targets = _next(whole)
        width = inputs.shape[1]
        assert max(p[0].shape[1] for p in parts) == width
        assert torch.equal(torch.cat([_pad(p[0], width, PAD) for p in parts]), inputs)
        assert torch.equal(torch.cat([_pad(p[1], width, IGNORE_INDEX) for p in parts]), targets)
        assert sum(rank.last_real_tokens for rank in ranks) == whole.last_real_tokens


def test_instruction_epochs_visit_every_record_once(tmp_path):
    path = _records(tmp_path / "r.jsonl", [{"instruction": f"n{i}", "output": "x"} for i in range(5)])
    data = InstructionDataset(path, 300, seq_len=512, micro_batch_size=1, seed=0)
    seen = [_next(data)[0][0].tolist() for _ in range(10)]
    key = [tuple(s) for s in seen]
    assert len(set(key[:5])) == 5 and set(key[:5]) == set(key[5:])
    assert key[:5] != key[5:]


def test_alpaca_sample_is_deterministic_and_varied(tmp_path):
    a = write_alpaca_sample(tmp_path / "a.jsonl", 30, seed=9).read_text(encoding="utf-8")
    b = write_alpaca_sample(tmp_path / "b.jsonl", 30, seed=9).read_text(encoding="utf-8")
    assert a == b
    records = [json.loads(line) for line in a.splitlines()]
    assert len(records) == 30 and {"instruction", "input", "output"} == set(records[0])
    assert any(r["input"] == "" for r in records) and any(r["input"] for r in records)
    assert len({len(r["output"]) for r in records}) > 10


@pytest.mark.parametrize("content, line, words", [
    ('{"instruction": "a", "output": "b"}\n{"instruction": "a", "output": \n', 2, "not valid JSON"),
    ('{"instruction": "a", "output": "b"}\n\n{"input": "", "output": "b"}\n', 3, "missing key 'instruction'"),
    ('{"instruction": "a"}\n', 1, "missing key 'output'"),
    ('{"instruction": "a", "output": 5}\n', 1, "'output' must be a string"),
    ('{"instruction": "a", "input": null, "output": "b"}\n', 1, "'input' must be a string"),
    ('["instruction", "output"]\n', 1, "JSON object"),
])
def test_instruction_format_errors_name_file_and_line(tmp_path, content, line, words):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        InstructionDataset(path, 300, seq_len=64, micro_batch_size=1, seed=0)
    assert f"bad.jsonl:{line}:" in str(caught.value) and words in str(caught.value)


def test_instruction_invalid_utf8_is_a_format_error(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"instruction": "a", "output": "b"}\n{"instruction": "\xff", "output": "b"}\n')
    with pytest.raises(DataFormatError, match="bad.jsonl:2: not valid JSON"):
        InstructionDataset(path, 300, seq_len=64, micro_batch_size=1, seed=0)


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_empty_instruction_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    with pytest.raises(DataFormatError, match="empty.jsonl: no records"):
        InstructionDataset(path, 300, seq_len=64, micro_batch_size=1, seed=0)


def test_missing_instruction_file_and_small_vocab(tmp_path):
    with pytest.raises(DataFormatError, match="nope.jsonl: not found"):
        InstructionDataset(tmp_path / "nope.jsonl", 300, seq_len=64, micro_batch_size=1, seed=0)
    path = write_alpaca_sample(tmp_path / "a.jsonl", 2)
    with pytest.raises(DataFormatError, match=r"a.jsonl: .*vocab_size >= 259"):
        InstructionDataset(path, 258, seq_len=64, micro_batch_size=1, seed=0)


# --- CLI -------------------------------------------------------------------------------------------------------

def _make_dataset(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "training.data.make_dataset", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_token_files(tmp_path):
    done = _make_dataset("tokens", "--prefix", str(tmp_path / "out" / "demo"), "--vocab-size", "1000",
                         "--documents", "25", "--seed", "3")
    assert done.returncode == 0, done.stderr
    ids_path, idx_path = tmp_path / "out" / "demo_ids.npy", tmp_path / "out" / "demo_idx.npz"
    assert done.stdout.split() == [str(ids_path), str(idx_path)]
    data = TokenFileDataset(tmp_path / "out" / "demo", vocab_size=1000, seq_len=32, micro_batch_size=2, seed=0)
    assert data.description["documents"] == 25
    assert np.array_equal(np.load(ids_path), np.load(generate_token_dataset(
        tmp_path / "same", vocab_size=1000, n_documents=25, seed=3)[0]))


def test_cli_writes_alpaca_file(tmp_path):
    out = tmp_path / "alpaca.jsonl"
    done = _make_dataset("alpaca", "--out", str(out), "--records", "7")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(out)]
    assert len(InstructionDataset(out, 300, seq_len=128, micro_batch_size=1, seed=0).records) == 7


def test_cli_help_and_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exit_help:
        make_dataset.main(["--help"])
    assert exit_help.value.code == 0 and "alpaca" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_bad:
        make_dataset.main(["tokens", "--prefix", "x", "--vocab-size", "10", "--documents", "0"])
    assert exit_bad.value.code == 2 and "no documents" in capsys.readouterr().err
