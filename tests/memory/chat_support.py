"""A short two-person chat the memory-adapter tests (HTTP, mem0) feed their systems."""

from __future__ import annotations

from dialogbench.data.model import Message

LINES = [
    ("Ana", "I adopted a grey cat named Pixel last spring"),
    ("Ben", "Nice! I have been learning to play the cello"),
    ("Ana", "My sister lives in Lisbon and works as a nurse"),
    ("Ben", "I ran the Berlin marathon in October"),
    ("Ana", "Pixel knocked my coffee over this morning"),
    ("Ben", "My cello teacher says my bowing has improved"),
    ("Ana", "I am flying to Lisbon next week to see my sister"),
    ("Ben", "Good luck with the trip"),
]
MESSAGES = [Message(id=f"m{i}", position=i, speaker=s, text=t) for i, (s, t) in enumerate(LINES)]
