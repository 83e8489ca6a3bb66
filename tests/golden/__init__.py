"""Golden fixtures of every track's figures, driven through the CLI (see cases.py)."""
