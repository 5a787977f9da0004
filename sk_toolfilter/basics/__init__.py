"""The shared basics every layer may use: progress reporting, input files, redaction of secrets, JSON as
sent on the wire, and offline token counts. Of the rest of the package they use only ``errors`` (which
itself uses ``redaction``): the layer contract in pyproject.toml keeps it so."""
