"""Write stand-in datasets, for tests and for trying the real-data paths without a corpus.

  python -m training.data.make_dataset tokens --prefix data/demo --vocab-size 50304 --documents 1000
  python -m training.data.make_dataset alpaca --out data/alpaca.jsonl --records 500

``tokens`` writes <prefix>_ids.npy + <prefix>_idx.npz (PaddleNLP's GPT format) of
random ids; ``alpaca`` writes Alpaca-style instruction records of random words.
Both are deterministic per --seed.
"""
from __future__ import annotations

import argparse

from training.data.instruction import write_alpaca_sample
from training.data.token_file import generate_token_dataset


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m training.data.make_dataset", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    tokens = commands.add_parser("tokens", help="pretraining tokens: <prefix>_ids.npy + <prefix>_idx.npz")
    tokens.add_argument("--prefix", required=True, help="output path prefix; the two suffixes are appended")
    tokens.add_argument("--vocab-size", type=int, required=True,
                        help="ids are drawn from [0, V); V <= 65536 is stored as uint16, larger as int32")
    tokens.add_argument("--documents", type=int, required=True, help="number of documents")
    tokens.add_argument("--min-len", type=int, default=16, help="shortest document, in tokens (default 16)")
    tokens.add_argument("--max-len", type=int, default=1024, help="longest document, in tokens (default 1024)")
    tokens.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    alpaca = commands.add_parser("alpaca", help="finetuning records: Alpaca-style jsonl")
    alpaca.add_argument("--out", required=True, help="output .jsonl file")
    alpaca.add_argument("--records", type=int, required=True, help="number of records")
    alpaca.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    args = parser.parse_args(argv)
    try:
        if args.command == "tokens":
            written = generate_token_dataset(args.prefix, args.vocab_size, args.documents, args.seed,
                                             args.min_len, args.max_len)
        else:
            written = (write_alpaca_sample(args.out, args.records, args.seed),)
    except ValueError as error:  # bad arguments: a usage message, not a traceback
        parser.error(str(error))
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
