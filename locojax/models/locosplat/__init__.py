"""LoCoSplat (paper 000, sec. 2): a DepthSplat-style depth branch (depth/), static voxel anchors, a
pointwise Gaussian head; one static-shape jitted encoder."""
