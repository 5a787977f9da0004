"""Measuring: the recording HTTP transport, token counts, the savings report, metrics and evaluation."""
