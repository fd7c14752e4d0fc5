"""Synthetic tokens a model can learn: a sparse first-order Markov chain with a known entropy rate.

On uniform ids every loss curve sits at ln(vocab), so no check can tell a run that trains the model from one
that does not. Here token ``i`` is followed by one of ``SUCCESSORS`` distinct tokens ``succ[i, j]``, slot ``j``
taken with probability ``w_j`` (``w_j`` proportional to ``2**-j``, the same in every row). The successors of a
row are distinct, so ``H(next | current = i) = H(w)`` for every ``i``: the entropy rate, the expected loss
no model can beat, is ``H(w)`` nats exactly (``entropy_rate_nats``), whatever the vocabulary. Successors are
drawn Zipf-like (token ``r`` with weight ``1 / (r + 1)``), so the unigram distribution is skewed too: a model
learns it within a few steps (the loss leaves ln(vocab) at once), then the transitions.

The table comes from ``CHAIN_SEED`` (fixed: the "language"); a sample from the data seed and its global index
(``sampling.py``'s order rule); each sample starts in the chain's stationary distribution, so every position
has the same floor. NumPy only: the torch and Paddle workers read the very same tokens in every layout.
A micro-batch costs milliseconds of host time, so the workers prefetch synthetic batches in a background
thread (``prefetch.py``), off the timed step, in the same order: the same tokens.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from training.data.sampling import GlobalSampler

SUCCESSORS = 8
CHAIN_SEED = 20_251_125  # the chain's own seed: one table for every run, data seeds change only the samples
_CANDIDATES = 4 * SUCCESSORS  # Zipf draws per row, of which the first SUCCESSORS distinct are kept


def slot_weights(successors: int = SUCCESSORS) -> np.ndarray:
    w = 0.5 ** np.arange(successors)
    return w / w.sum()


def entropy_nats(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


ENTROPY_RATE_NATS = entropy_nats(slot_weights())  # the loss floor: 1.3606 nats for 8 successors


@functools.lru_cache(maxsize=4)
def chain(vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(successors [vocab, SUCCESSORS] int64, stationary distribution [vocab]) of the chain over ``vocab_size``."""
    if vocab_size < SUCCESSORS:
        raise ValueError(f"a Markov source needs a vocabulary of at least {SUCCESSORS} tokens, not {vocab_size}")
    rng = np.random.default_rng(CHAIN_SEED)
    zipf = 1.0 / np.arange(1, vocab_size + 1)
    rank_to_token = rng.permutation(vocab_size)  # which token is frequent is random, not token 0
    draws = rank_to_token[rng.choice(vocab_size, size=(vocab_size, _CANDIDATES), p=zipf / zipf.sum())]
    succ = np.empty((vocab_size, SUCCESSORS), dtype=np.int64)
    for i, row in enumerate(draws):
        kept = list(dict.fromkeys(row.tolist()))[:SUCCESSORS]
        extra = (i + 1) % vocab_size
        while len(kept) < SUCCESSORS:  # a row whose draws repeat: fill with the next tokens (rare, deterministic)
            if extra not in kept:
                kept.append(extra)
            extra = (extra + 1) % vocab_size
        succ[i] = kept
    return succ, _stationary(succ, slot_weights())


def _stationary(succ: np.ndarray, w: np.ndarray, tol: float = 1e-13, max_iter: int = 100_000) -> np.ndarray:
    """Power iteration of the lazy chain (same stationary distribution, always converges)."""
    vocab = succ.shape[0]
    pi = np.full(vocab, 1.0 / vocab)
    flat = succ.ravel()
    for _ in range(max_iter):
        moved = np.bincount(flat, weights=(pi[:, None] * w[None, :]).ravel(), minlength=vocab)
        nxt = 0.5 * (pi + moved)
        if np.abs(nxt - pi).sum() < tol:
            return nxt / nxt.sum()
        pi = nxt
    return pi / pi.sum()


class MarkovTokens(GlobalSampler):
    @property
    def description(self) -> dict:
        _, pi = chain(self.vocab_size)
        return {"distribution": "markov", "successors": SUCCESSORS, "chain_seed": CHAIN_SEED, "seed": self.seed,
                "entropy_rate_nats": round(ENTROPY_RATE_NATS, 6), "unigram_entropy_nats": round(entropy_nats(pi), 6),
                "uniform_nats": round(math.log(self.vocab_size), 6)}

    def samples(self, indices: range) -> np.ndarray:
        """Token ids [len(indices), seq_len + 1], each row from its own generator (data seed, global index)."""
        succ, pi = chain(self.vocab_size)
        w = slot_weights()
        cdf_pi, cdf_w = np.cumsum(pi), np.cumsum(w)
        rows = len(indices)
        tokens = np.empty((rows, self.seq_len + 1), dtype=np.int64)
        slots = np.empty((rows, self.seq_len), dtype=np.int64)
        for r, index in enumerate(indices):
            rng = np.random.default_rng([self.seed % 2**32, index, 0x6D6B])  # 0x6D6B: not uniform's stream
            u = rng.random(self.seq_len + 1)
            tokens[r, 0] = min(int(np.searchsorted(cdf_pi, u[0] * cdf_pi[-1], side="right")), self.vocab_size - 1)
            slots[r] = np.minimum(np.searchsorted(cdf_w, u[1:] * cdf_w[-1], side="right"), SUCCESSORS - 1)
        for t in range(self.seq_len):  # the walk: sequential in time, vectorised over the micro-batch
            tokens[:, t + 1] = succ[tokens[:, t], slots[:, t]]
        return tokens

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        tokens = self.samples(self.next_indices())
        return tokens[:, :-1], tokens[:, 1:]
