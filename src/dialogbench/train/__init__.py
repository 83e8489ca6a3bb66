"""Imitation learning for the DEMO agent: fine-tuning data from runs, and a LoRA recipe."""
