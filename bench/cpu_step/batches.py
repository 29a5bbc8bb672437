"""The batches of bench/cpu_step, the same for the program and every peer:
step s trains on the B x T tokens from position s * B * T of the token
file (test/e2e/make_tokens.py: a 1024-byte header, then uint16 tokens),
each token's next as its target."""
import numpy as np


def batches(tokens_path, batch, seq, steps, dtype=np.int64):
    """Yields (inputs, targets), each [batch, seq] of `dtype`, per step."""
    data = np.fromfile(tokens_path, dtype=np.uint16, offset=1024).astype(dtype)
    for s in range(steps):
        base = s * batch * seq
        yield (data[base:base + batch * seq].reshape(batch, seq),
               data[base + 1:base + batch * seq + 1].reshape(batch, seq))
