"""Pallas compositing kernels: Triton (GPU) in triton_composite.py, Mosaic (TPU) in mosaic_composite.py.

Both have the signature and contract of `locojax.render.composite.composite_tiles`; the backend
dispatcher `locojax.render.composite_backends.composite` picks one per platform at lowering time.
"""
