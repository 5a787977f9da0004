"""Experiments that were measured and not adopted (or that measure a choice): kept for the record and to
run again. Their results are in ``NOTEBOOK.md`` beside them; nothing in the rebuild pipeline imports them."""
