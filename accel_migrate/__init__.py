"""accel-migrate: rewrite single-GPU PyTorch training scripts for DDP/FSDP training.

This module stays light: it imports neither libcst, click, rich nor torch.
"""

__version__ = "0.1.0"
