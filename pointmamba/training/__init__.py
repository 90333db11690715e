"""Training: the trainer and its hooks (warm-up switch, diagnostics), optimizer and schedule, checkpoints,
datasets and loaders from a config, distributed setup, seeding, the work directory."""
