"""Model families. Each family module exposes a `GaussianModel` (see `interface.py`)."""
