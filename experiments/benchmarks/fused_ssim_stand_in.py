"""The fused-ssim kernels (rahul-goel/fused-ssim @ 0ac916a, `ssim.cu`), which the official TokenGS loss
calls through `tokengs/rendering/fused_ssim.py` (CUDA/MPS/XPU only), written in torch for CPU runs of
the official code (`tokengs_official_train.py`).

    fusedssim(C1, C2, img1, img2, train) -> (ssim_map, dm_dmu1, dm_dsigma1_sq, dm_dsigma12)
    fusedssim_backward(C1, C2, img1, img2, dL_dmap, dm_dmu1, dm_dsigma1_sq, dm_dsigma12) -> dL_dimg1

Same arithmetic as the kernel: separable 11-tap Gaussian (sigma 1.5, the kernel's float constants)
with zero padding outside the image ("same"), sigma^2 floored at 0, the SSIM map clamped to [-1, 1]
with zero partial derivatives where it clamps, and the backward pass as the kernel's: blur each
partial derivative times dL/dmap, then dL/dx = B(dm_dmu1 dL) + 2 x B(dm_dsigma1_sq dL) + y B(dm_dsigma12 dL).
Images are [N, C, H, W].
"""

from __future__ import annotations

GAUSS_11 = (0.001028380123898387, 0.0075987582094967365, 0.036000773310661316, 0.10936068743467331,
            0.21300552785396576, 0.26601171493530273, 0.21300552785396576, 0.10936068743467331,
            0.036000773310661316, 0.0075987582094967365, 0.001028380123898387)


def _blur(torch, x):
    import torch.nn.functional as F

    n, c, h, w = x.shape
    k = torch.tensor(GAUSS_11, dtype=x.dtype, device=x.device)
    y = F.conv2d(x.reshape(n * c, 1, h, w), k.view(1, 1, 1, 11), padding=(0, 5))
    return F.conv2d(y, k.view(1, 1, 11, 1), padding=(5, 0)).reshape(n, c, h, w)


def fusedssim(C1, C2, img1, img2, train=True):
    import torch

    blur = lambda x: _blur(torch, x)  # noqa: E731
    mu1, mu2 = blur(img1), blur(img2)
    sigma1_sq = torch.clamp_min(blur(img1 * img1) - mu1 * mu1, 0.0)
    sigma2_sq = torch.clamp_min(blur(img2 * img2) - mu2 * mu2, 0.0)
    sigma12 = blur(img1 * img2) - mu1 * mu2
    a = mu1 * mu1 + mu2 * mu2 + C1
    b = sigma1_sq + sigma2_sq + C2
    c_ = 2.0 * mu1 * mu2 + C1
    d_ = 2.0 * sigma12 + C2
    val = (c_ * d_) / (a * b)
    keep = ((val >= -1.0) & (val <= 1.0)).to(val.dtype)
    dm_dmu1 = keep * ((mu2 * 2.0 * d_) / (a * b) - (mu2 * 2.0 * c_) / (a * b) - (mu1 * 2.0 * c_ * d_) / (a * a * b)
                      + (mu1 * 2.0 * c_ * d_) / (a * b * b))
    dm_dsigma1_sq = keep * (-c_ * d_) / (a * b * b)
    dm_dsigma12 = keep * (2.0 * c_) / (a * b)
    return val.clamp(-1.0, 1.0), dm_dmu1, dm_dsigma1_sq, dm_dsigma12


def fusedssim_backward(C1, C2, img1, img2, dL_dmap, dm_dmu1, dm_dsigma1_sq, dm_dsigma12):
    import torch

    blur = lambda x: _blur(torch, x)  # noqa: E731
    return blur(dm_dmu1 * dL_dmap) + 2.0 * img1 * blur(dm_dsigma1_sq * dL_dmap) + img2 * blur(dm_dsigma12 * dL_dmap)
