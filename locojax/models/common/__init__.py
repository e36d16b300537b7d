"""Layers and geometry shared by every model family, with the PyTorch-parity options written once.

    layers     LayerNorm (torch eps), exact GELU, LayerScale, Mlp, Dense/Conv with torch's default
               initialisers, truncated-normal heads, pre-norm transformer blocks
    attention  multi-head attention with an optional additive bias and per-head q/k LayerNorm,
               exact query chunking, jax.nn.dot_product_attention's fused path where available
    rays       Plücker rays through pixel centres, patch-pooled rays
    frames     canonical-frame transforms of cameras and Gaussians (SH of degree 1-3 rotated)
    precision  per-module compute dtypes
    scan_blocks  identical named blocks as one jax.lax.scan, the param tree kept (off by default:
               slower on XLA:CPU, docs/performance.md)
"""
