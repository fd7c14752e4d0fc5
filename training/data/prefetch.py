"""Synthetic batches made ahead, off the timed step: a background thread and a bounded queue.

A Markov micro-batch costs milliseconds of host time (a generator per sample, a walk over ``seq_len``), and the
harness times ``fetch()`` inside each step: without this, every default case's tokens/s would count it. The
thread calls the source's ``next_batch`` in the same order the worker would, so the tokens are the very same
(the parity tests and loss references do not move); the queue holds at most ``DEPTH`` batches. An error in the
thread is raised again in the caller at the batch it would have been; ``close`` stops and joins the thread.
"""
from __future__ import annotations

import queue
import threading

DEPTH = 2  # batches made ahead: enough to hide one batch's cost behind a step, little memory


class Prefetcher:
    """``source.next_batch()`` results, made ``DEPTH`` ahead in a daemon thread, in the source's order."""

    def __init__(self, source, depth: int = DEPTH):
        self.source = source
        self.description = source.description
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="batch-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item = (self.source.next_batch(), None)
            except BaseException as error:  # handed to the caller, raised there
                item = (None, error)
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=0.05)
                    break
                except queue.Full:
                    continue
            if item[1] is not None:
                return

    def next_batch(self):
        if self._stop.is_set():
            raise RuntimeError("the batch prefetcher is closed")
        batch, error = self._queue.get()
        if error is not None:
            self._stop.set()
            raise error
        return batch

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
