#!/usr/bin/python3
"""Write an llm.c token file: a 256 x int32 little-endian header (magic
20240520, version 1, token count N, zeros) followed by N uint16 tokens.

  make_tokens.py -o TOKENS.bin --count N --vocab V [--seed S]   random tokens in [0, V)
  make_tokens.py -o TOKENS.bin --text FILE                      the file's bytes as tokens

Deliberately bad files for tests:
  --bad-magic         a wrong magic number (20240521)
  --bad-version       version 2
  --truncate          the header counts N tokens but only N // 2 are written
  --header-count C    the header counts C tokens (any int32), whatever is written
  --token-at POS=VAL  overwrite token POS with VAL (0..65535), e.g. one outside
                      the vocabulary; repeatable
"""
import argparse
import sys

import numpy as np

TOKEN_MAGIC = 20240520
TOKEN_VERSION = 1
HEADER_INTS = 256


def random_tokens(count, vocab, seed):
    """count pseudo-random tokens in [0, vocab) from numpy's RandomState(seed)."""
    return np.random.RandomState(seed).randint(0, vocab, size=count).astype(np.uint16)


def text_tokens(path):
    """The bytes of a file as tokens (byte-level, vocabulary 256)."""
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8).astype(np.uint16)


def write_tokens(path, tokens, magic=TOKEN_MAGIC, version=TOKEN_VERSION, count=None):
    """Write tokens (uint16) with a header; count defaults to len(tokens)."""
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:3] = (magic, version, len(tokens) if count is None else count)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def parse_token_at(text):
    """POS=VALUE as a pair of ints (VALUE a uint16)."""
    try:
        pos, value = (int(v) for v in text.split("="))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected POS=VALUE, got {text!r}") from None
    if pos < 0 or not 0 <= value <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"need POS >= 0 and 0 <= VALUE <= 65535: {text!r}")
    return pos, value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", required=True, metavar="TOKENS.bin")
    p.add_argument("--count", type=int, help="number of random tokens")
    p.add_argument("--vocab", type=int, help="random tokens are in [0, VOCAB)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--text", metavar="FILE", help="byte-level tokens of FILE instead")
    p.add_argument("--bad-magic", action="store_true")
    p.add_argument("--bad-version", action="store_true")
    p.add_argument("--truncate", action="store_true",
                   help="write only half the tokens the header counts")
    p.add_argument("--header-count", type=int, metavar="C",
                   help="the token count the header states (default: the real one)")
    p.add_argument("--token-at", type=parse_token_at, action="append", default=[],
                   metavar="POS=VALUE", help="overwrite one token (repeatable)")
    args = p.parse_args(argv)
    if args.text is not None:
        if args.count is not None or args.vocab is not None:
            p.error("--text excludes --count and --vocab")
    else:
        if args.count is None or args.vocab is None:
            p.error("give --count and --vocab, or --text")
        if args.count < 1:
            p.error("--count must be positive")
        if not 1 <= args.vocab <= 0x10000:
            p.error("--vocab must be in [1, 65536]")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        tokens = (text_tokens(args.text) if args.text is not None
                  else random_tokens(args.count, args.vocab, args.seed))
    except OSError as e:
        print(f"make_tokens.py: error: {e}", file=sys.stderr)
        return 1
    for pos, value in args.token_at:
        if pos >= len(tokens):
            print(f"make_tokens.py: error: --token-at {pos}: only {len(tokens)} tokens",
                  file=sys.stderr)
            return 1
        tokens[pos] = value
    count = len(tokens)
    if args.truncate:
        tokens = tokens[:count // 2]
    write_tokens(args.output, tokens,
                 magic=TOKEN_MAGIC + 1 if args.bad_magic else TOKEN_MAGIC,
                 version=TOKEN_VERSION + 1 if args.bad_version else TOKEN_VERSION,
                 count=count if args.header_count is None else args.header_count)
    print(f"make_tokens.py: wrote {args.output}: {count} tokens"
          + (f", {len(tokens)} present" if args.truncate else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
