"""dialogbench: measure how well conversational AI systems understand the people they talk to."""

__version__ = "0.1.0"
