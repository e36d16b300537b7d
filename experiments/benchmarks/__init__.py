"""Benchmarks run by `python -m experiments.benchmark NAME`; one module per NAME with `main(argv)`."""
