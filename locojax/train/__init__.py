"""The shared trainer / evaluator of every model family.

  run         build_run(config, batch) -> Run (model, mesh, optimizer, abstract state), DataSource,
              placeholder batches: what training, evaluation, aot and imports start from
  optimizer   optax AdamW, the papers' schedules, clipping, parameter groups, weight-decay masks
  sharding    Mesh over all devices, batch on "data", params replicated or FSDP-sharded
  state       TrainState and its abstract (eval_shape) form serving init, sharding and restore
  step        the jitted train step (non-finite updates skipped and counted)
  checkpoint  orbax CheckpointManager: keep-last-N + best, data-iterator state, SIGTERM
  evaluate    protocols by name -> per-scene PSNR/SSIM/LPIPS, sample renders
  logging     metrics.jsonl, TensorBoard, PNGs, progress bar
  loop        train_and_evaluate(config, workdir)
"""
