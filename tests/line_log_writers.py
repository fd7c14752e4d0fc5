"""Each format's log of a ``Truth`` (tests/line_logs.py), printed as its tool prints (the field tables' sources)."""
from __future__ import annotations

from datetime import datetime, timedelta

from .line_logs import GIB, MIB, Truth, flops_per_step_per_device

T0 = datetime(2025, 5, 1, 12, 0, 0)


def write(truth: Truth) -> str:
    return WRITERS[truth.fmt](truth)


def _points(truth: Truth, rank) -> list[tuple[int, int, float, int]]:
    """(step, cover, step time, memory index) of each line ``rank`` prints."""
    index = ([0] if truth.first_report else []) + list(truth.shown)
    return [(step, cover, tau, k) for (step, cover, tau), k in zip(truth.lines(rank), index)]


def _interleaved(truth: Truth, line_of, eval_of) -> str:
    """Every rank's lines, step by step (ranks interleave as launchers tee them), evaluations after their point."""
    by_step: dict[int, list[str]] = {}
    for n, rank in enumerate(truth.ranks):
        for step, cover, tau, k in _points(truth, rank):
            by_step.setdefault(step, []).append(line_of(rank, step, cover, tau, k))
    out = []
    for step in sorted(by_step):
        lines = by_step[step]
        out += lines[::-1] if step % 2 else lines  # the ranks' order changes from step to step
        if step // truth.interval in truth.evals and step % truth.interval == 0:
            out.append(eval_of(step))
    return "".join(out)


def _prefix(rank) -> str:
    return "" if rank is None else f"[rank{rank}]:"


def _memory(truth: Truth, rank, k: int) -> float:
    return truth.memory_gib[rank][k]


# ---------------------------------------------------------------- Megatron-LM / Megatron-Core / Megatron-DeepSpeed


def megatron(truth: Truth) -> str:
    step_l, flops = truth.interval, flops_per_step_per_device(truth)
    head = "------------------------ arguments ------------------------\n"
    if truth.stated:
        head += f"  log_interval {'.' * 36} {step_l}\n"
    head += f"  seq_length {'.' * 38} {truth.seq}\n-------------------- end of arguments ---------------------\n"

    def line(rank, step, cover, tau, k):
        at = T0 + timedelta(seconds=step * 3)
        stamp = {"lm": "", "core": f" [{at:%Y-%m-%d %H:%M:%S}]", "core2025": f" [{at:%Y-%m-%d %H:%M:%S.%f}]"}
        text = (f"{_prefix(rank)}{stamp[truth.variant]} iteration {step:8d}/{truth.points * step_l:8d} | consumed "
                f"samples: {step * truth.batch:12d} | elapsed time per iteration (ms): {tau * 1000:.1f} |")
        if truth.variant != "lm":
            text += f" throughput per GPU (TFLOP/s/GPU): {flops / tau / 1e12:.1f} |"
        text += (f" learning rate: {1.5e-4:.6E} | global batch size: {truth.batch:5d} | lm loss: "
                 f"{truth.loss(rank, k):.6E} | loss scale: 1.0 | grad norm: 0.912 | number of skipped iterations:   0 "
                 "| number of nan iterations:   0 |\n")
        if k == (0 if truth.first_report else truth.shown[0]):  # report_memory after the first line
            gib = _memory(truth, rank, k)
            who = "" if truth.variant == "lm" else f"[Rank {rank or 0}] "
            text += (f"{who}(after {step} iterations) memory (MB) | allocated: {gib * 0.8 * 1024:.2f} | max allocated:"
                     f" {gib * 0.9 * 1024:.2f} | reserved: {gib * 1024:.2f} | max reserved: {gib * 1024:.2f}\n")
        return text

    def evaluation(step):
        return (f"{'-' * 90}\n validation loss at iteration {step} | lm loss value: 2.500000E+00 | lm loss PPL: "
                f"1.218249E+01 | \n{'-' * 90}\n")

    return head + _interleaved(truth, line, evaluation) + "[after training is done] datetime: 2025-05-01 13:00:00\n"


def megatron_deepspeed(truth: Truth) -> str:
    step_l, world = truth.interval, truth.world

    def line(rank, step, cover, tau, k):
        tflops = flops_per_step_per_device(truth) * 4 / 3 / tau / 1e12
        text = (f"{_prefix(rank)} iteration {step:8d}/{truth.points * step_l:8d} | consumed samples: "
                f"{step * truth.batch:12d} | consumed tokens: {step * truth.batch * truth.seq:12d} | elapsed time per "
                f"iteration (ms): {tau * 1000:.1f} | learning rate: {1.5e-4:.3E} | global batch size: {truth.batch:5d}"
                f" | lm loss: {truth.loss(rank, k):.6E} | loss scale: 4096.0 | actual seqlen: {truth.seq:5d} | number"
                f" of skipped iterations:   0 | number of nan iterations:   0 | samples per second: "
                f"{truth.batch / tau:.3f} | tokens per gpu per second (tgs): {truth.batch * truth.seq / tau / world:.3f}"
                f" | TFLOPs: {tflops:.2f} |\n")
        if k == truth.shown[0]:
            gib = _memory(truth, rank, k)
            text += (f"[Rank {rank or 0}] (after {step} iterations) memory (MB) | allocated: {gib * 900} | max "
                     f"allocated: {gib * 1000} | reserved: {gib * 1024} | max reserved: {gib * 1024}\n")
        return text

    return _interleaved(truth, line, lambda step: f" validation loss at iteration {step} | lm loss value: 2.5E+00 |\n")


# ---------------------------------------------------------------- NeMo


def nemo(truth: Truth) -> str:
    total = truth.points * truth.interval
    if truth.variant == "nemo1":
        head = f"model:\n  global_batch_size: {truth.batch}\n  encoder_seq_length: {truth.seq}\n"

        def line(rank, step, cover, tau, k):
            return (f"Epoch 0: :  {100 * step // total:3d}%|##        | {step}/{total} [00:{step % 60:02d}<01:00, "
                    f"reduced_train_loss={truth.loss(rank, k):.3f}, global_step={step - 1}.000, consumed_samples="
                    f"{step * truth.batch}.0, train_step_timing in s={tau:.3f}]\r")

        return head + _interleaved(truth, line, lambda s: "\nValidation DataLoader 0: 100%|##| 4/4 [00:01<00:00]\n")

    def printed(rank, step, cover, tau, k):
        tflops = flops_per_step_per_device(truth) / tau / 1e12
        return (f"Training epoch 0, iteration {step}/{total} | lr: 1.5e-04 | global_batch_size: {truth.batch} | "
                f"global_step: {step - 1} | reduced_train_loss: {truth.loss(rank, k):.4} | train_step_timing in s: "
                f"{tau:.4} | TFLOPS_per_GPU: {tflops:.4} | consumed_samples: {step * truth.batch} | "
                f"peak_memory_usage: {_memory(truth, rank, k) * GIB:.4}\n")

    return _interleaved(truth, printed, lambda s: "Validation: iteration 2/4\n")


# ---------------------------------------------------------------- torchtitan


def torchtitan(truth: Truth) -> str:
    def one(rank, step, tau, k):
        tps = truth.batch * truth.seq / tau / truth.world
        gib = _memory(truth, rank, k)
        text = (f"{_prefix(rank)}[titan] 2025-01-10 12:{step // 60 % 60:02d}:{step % 60:02d},000 - root - INFO - "
                f"\x1b[31mstep: {step:2}  \x1b[32mloss: {truth.loss(rank, k):7.4f}  ")
        if truth.variant == "new":
            text += "\x1b[33mgrad_norm:  1.2031  "
        text += f"\x1b[36mmemory: {gib:5.2f}GiB({gib / truth.device_gib * 100:.2f}%)  "
        if truth.variant == "new":
            flops = flops_per_step_per_device(truth) / tau / 1e12
            return text + (f"\x1b[34mtps: {round(tps):,}  \x1b[36mtflops: {flops:,.2f}  \x1b[35mmfu: "
                           f"{flops / 9.895:.2f}%\x1b[39m\n")
        return text + f"\x1b[34mwps: {round(tps):,}  \x1b[35mmfu: {tps * 6e9 / 9.895e12:.2f}%\x1b[39m\n"

    def line(rank, step, cover, tau, k):  # unprefixed repeats: each other rank's line of the step after the first
        return one(rank, step, tau, k) + "".join(one(rank, step, tau * (1 + 0.1 * j), k) for j in range(1, truth.repeats))

    def evaluation(step):
        return (f"[titan] 2025-01-10 13:00:00,000 - root - INFO - validate step: {step:2}  loss:  2.5000  "
                "memory:  1.00GiB(1.25%)  tps: 99,999\n")

    return "[titan] 2025-01-10 11:59:00,000 - root - INFO - Training starts at step 1.\n" + _interleaved(
        truth, line, evaluation)


# ---------------------------------------------------------------- PaddleNLP, PaddleFormers, ERNIEKit


def _paddle_args(truth: Truth, device_batch: int) -> str:
    out = "[2025-05-01 11:59:00,000] [    INFO] - ============================================================\n"
    settings = [("per_device_train_batch_size", device_batch), ("gradient_accumulation_steps", 1),
                ("max_seq_length", truth.seq)] + ([("logging_steps", truth.interval)] if truth.stated else [])
    for key, value in settings:
        out += f"[2025-05-01 11:59:00,000] [    INFO] - {key:30}:{value}\n"
    return out


def paddle(truth: Truth) -> str:
    device_batch = truth.batch // truth.world  # data parallel over every device

    def line(rank, step, cover, tau, k):
        runtime = tau * cover
        at = T0 + timedelta(seconds=step)
        text = (f"[{at:%Y-%m-%d %H:%M:%S},000] [    INFO] - loss: {truth.loss(rank, k)}, learning_rate: 3e-05, "
                f"global_step: {step}, ")
        if truth.variant != "2022":
            gib = _memory(truth, rank, k)
            text += (f"current_memory_allocated: {gib * 0.5}, current_memory_reserved: {gib * 0.9}, "
                     f"max_memory_allocated: {gib * 0.8}, max_memory_reserved: {gib}, ")
        samples = device_batch if truth.variant == "2022" else truth.batch * cover  # 2022: one step on one device
        text += (f"interval_runtime: {round(runtime, 4)}, interval_samples_per_second: {round(samples / runtime, 4)}, "
                 f"interval_steps_per_second: {round(cover / runtime, 4)}, ")
        if truth.variant != "2022":
            tokens = truth.batch * cover * truth.seq / runtime / truth.world
            text += f"interval_tokens_per_second_per_device: {round(tokens, 4)}, "
        if truth.fmt == "paddleformers":
            text += f"interval_hardware_tflops_per_device: {round(tokens * 6e9 / 2**40, 2)}, "
        return text + ("epoch: 0.01\n" if truth.variant == "2022" else "progress_or_epoch: 0.01\n")

    evaluation = "[2025-05-01 13:00:00,000] [    INFO] - eval_loss: 2.3, eval_runtime: 12.1, eval_samples_per_second: " \
                 "10.2, eval_steps_per_second: 1.1, progress_or_epoch: 0.1\n"
    return _paddle_args(truth, device_batch) + _interleaved(truth, line, lambda s: evaluation)


def erniekit(truth: Truth) -> str:
    def line(rank, step, cover, tau, k):
        runtime, gib = tau * cover, _memory(truth, rank, k)
        steps_per_s = round(cover / runtime, 4)
        tokens = truth.batch * truth.seq
        per_card = round(tokens * steps_per_s / truth.world, 1)
        return (f"[2025-05-01 12:00:00,000] [    INFO] - loss: {truth.loss(rank, k)}, loss_cur_dp: 2.5, learning_rate: "
                f"{1.666667e-06:e}, global_step: {step}, mem_allocated_gb: {gib * 0.6:f}, max_mem_allocated_gb: "
                f"{gib * 0.8:f}, mem_reserved_gb: {gib * 0.9:f}, max_mem_reserved_gb: {gib:f}, loss_scale: "
                f"32768.000000, global_runtime: {round(runtime, 4):f}, global_samples_per_second: "
                f"{round(truth.batch * cover / runtime, 4):f}, global_steps_per_second: {steps_per_s:f}, "
                f"tokens_trained_current_step: {tokens}, timestamp: 1768815791366, TFLOPS_per_sec_per_card: "
                f"{round(6 * tokens * 1e9 * steps_per_s / 1e12 / truth.world, 3):f}, tokens_per_sec_per_card: "
                f"{per_card:f}, tokens_per_sec_per_card_average: {per_card:f}, progress_or_epoch: 0.007700\n")

    evaluation = "[2025-05-01 13:00:00,000] [    INFO] - eval_loss: 2.3, eval_runtime: 12.1, eval_samples_per_second: " \
                 "10.2, eval_steps_per_second: 1.1\n"
    return _paddle_args(truth, truth.batch // truth.world) + _interleaved(truth, line, lambda s: evaluation)


WRITERS = {"megatron": megatron, "megatron-deepspeed": megatron_deepspeed, "nemo": nemo, "torchtitan": torchtitan,
           "paddlenlp": paddle, "paddleformers": paddle, "erniekit": erniekit}
