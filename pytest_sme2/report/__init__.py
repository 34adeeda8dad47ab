"""Renderers of results: terminal now; markdown, CSV and charts later."""
