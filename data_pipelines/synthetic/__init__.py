"""Procedural indoor multi-view scenes rendered by an analytic numpy ray caster.

numpy/PIL only (no TensorFlow, no JAX): the build spawns worker processes that import just this
package. Entry points: `scene_spec.sample_scene_spec` (what is in a room), `render.render_frames`
(images + exact depth), `generate.generate_scene` (both, for one (split, index)).
"""
