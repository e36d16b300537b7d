"""Token expansion for the TokenGS/LocusGS fine-tune: N -> M query tokens (1024 -> 4096).

Official fine-tune (TokenGS, and LocusGS "finetune expands anchors like tokens"): the first N tokens
are the trained ones unchanged; tokens N..M-1 repeat them in order (token i <- token i mod N) plus
N(0, noise_std^2) noise. LocusGS's per-token anchors `anchor_mu` [N, 3] and radii `anchor_rho` [N, 1]
are expanded the same way (same repeat order, their own noise draws), so a repeated token starts at
its source's anchor.
"""

from __future__ import annotations

import numpy as np

PER_TOKEN = ("gs_tokens", "anchor_mu", "anchor_rho")  # [N, ...] params indexed by token


def expand_rows(x: np.ndarray, to: int, noise_std: float, rng: np.random.Generator) -> np.ndarray:
    """x [N, ...] -> [to, ...]: rows 0..N-1 copied, row i >= N = x[i mod N] + N(0, noise_std^2)."""
    n = x.shape[0]
    if to < n:
        raise ValueError(f"cannot expand {n} tokens to fewer ({to})")
    reps = np.asarray(x)[np.arange(n, to) % n]
    noise = rng.normal(0.0, noise_std, reps.shape).astype(x.dtype)
    return np.concatenate([np.asarray(x), reps + noise], axis=0)


def expand_params(params: dict, to: int, *, noise_std: float = 0.01, seed: int = 0) -> dict:
    """The model params (nested dict) with every per-token parameter expanded to `to` tokens."""
    if "gs_tokens" not in params:
        raise ValueError(f"no 'gs_tokens' in the params (top-level keys: {sorted(params)[:8]}...): "
                         "not a locusgs/tokengs checkpoint")
    rng = np.random.default_rng(seed)
    out = dict(params)
    for name in PER_TOKEN:
        if name in params:
            out[name] = expand_rows(np.asarray(params[name]), to, noise_std, rng)
    return out
