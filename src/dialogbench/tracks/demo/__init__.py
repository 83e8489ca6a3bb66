"""DEMO tracks: element awareness and dialogue agent interaction."""
