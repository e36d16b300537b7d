"""TFDS builders. Every builder stores the same per-scene record (see `features.scene_features`)."""
