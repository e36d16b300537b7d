"""LoCoSplat's depth branch (paper sec. 2.1): DepthSplat's two-scale multi-view depth network.

    DepthBranch(cfg)(images, intrinsics, c2w, near, far, train=...) -> DepthBranchOutput
"""

from locojax.models.locosplat.depth.config import DepthBranchConfig, DepthBranchOutput, TRUNKS  # noqa: F401
from locojax.models.locosplat.depth.branch import DepthBranch  # noqa: F401
