"""File formats: `ply` (standard INRIA 3DGS .ply files)."""
