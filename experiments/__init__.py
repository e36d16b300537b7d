"""Command-line entry points (thin scripts over `locojax.train`):

    python -m experiments.train     --config=NAME --workdir=DIR [--config.KEY=VALUE ...]
    python -m experiments.evaluate  --config=NAME --workdir=DIR [--step=N] [--protocol=NAME] [--export_ply]
    python -m experiments.baselines --workdir=DIR   (copy-nearest-view and mean-colour PSNR on the run's scenes)
    python -m experiments.benchmark NAME [args]
"""
